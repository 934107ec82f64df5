"""Nothing lost, through the real command line: each writer killed mid-write, on a full disk,
pointed at a file of another kind, and run twice at once; afterwards the next run works and
what was complete before is still readable. (The exhaustive cells, writer by writer on real
files, are tests/unit/test_storage.py; these prove each command goes through that code.)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spectui.recording.reader import read_recording
from tests.conftest import REPO, run_cli, seed_calibrations
from tests.faults import FAULT_ENV, fill, killed, read_only, small_disk

RECORDING = Path(REPO) / "tests" / "data" / "fixed-session.spectui"
FAST = ("--max-tokens", "8", "--threads", "1")


def cli(*args: str, env: dict | None = None, preexec=None, timeout: float = 300) -> subprocess.CompletedProcess:  # noqa: ANN001
    return subprocess.run([sys.executable, "-m", "spectui", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **(env or {})}, preexec_fn=preexec, timeout=timeout)


def start(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "spectui", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def one_line(proc: subprocess.CompletedProcess) -> str:
    err = proc.stderr.strip()
    assert proc.returncode == 2 and "Traceback" not in err and len(err.splitlines()) == 1, (proc.returncode, err)
    return err


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def recordings(folder: Path, n: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        shutil.copyfile(RECORDING, folder / f"r{i:04d}.spectui")
    return folder


def indexed(index: Path) -> int:
    db = sqlite3.connect(index)
    try:
        return db.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        db.close()


def kill_when(proc: subprocess.Popen, ready, timeout: float = 240) -> None:  # noqa: ANN001
    """SIGKILL ``proc`` the moment ``ready()`` holds (it must hold before the process ends)."""
    deadline = time.monotonic() + timeout
    try:
        while not ready():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the moment to kill never came"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)


# -- the history index --------------------------------------------------------------------------


def test_index_pointed_at_a_recording_refuses_and_leaves_it_byte_identical(tmp_path):
    rec = tmp_path / "run.spectui"
    shutil.copyfile(RECORDING, rec)
    before = digest(rec)
    proc = run_cli("history", "--index", str(rec), str(tmp_path))
    err = one_line(proc)
    assert str(rec) in err and "recording" in err
    assert digest(rec) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.spectui"]  # nothing beside it either
    assert run_cli("report", str(rec)).returncode == 0


def test_index_pointed_at_another_database_refuses(tmp_path):
    other = tmp_path / "app.db"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE accounts (name TEXT)")
    db.execute("INSERT INTO accounts VALUES ('mine')")
    db.commit()
    db.close()
    before = digest(other)
    err = one_line(run_cli("history", "--index", str(other), str(tmp_path)))
    assert "SQLite database" in err and digest(other) == before


def test_a_damaged_index_is_moved_aside_and_rebuilt(tmp_path):
    folder = recordings(tmp_path / "runs", 3)
    index = tmp_path / "history.sqlite"
    assert run_cli("history", "--index", str(index), str(folder)).returncode == 0
    torn = index.read_bytes()[:1500]  # the header survives, the pages do not
    index.write_bytes(torn)
    proc = run_cli("history", "--index", str(index), "--json", str(folder))
    assert proc.returncode == 0, proc.stderr
    aside = list(tmp_path.glob("history.sqlite.corrupt-*"))
    notes = json.loads(proc.stdout)["notes"]
    assert len(aside) == 1 and aside[0].read_bytes() == torn and any("moved it aside" in n for n in notes)
    assert indexed(index) == 3


def test_index_rebuild_killed_mid_write_keeps_what_was_committed_and_the_next_run_finishes(tmp_path):
    folder = recordings(tmp_path / "runs", 520)  # more than one batch of rows (500)
    index = tmp_path / "history.sqlite"
    proc = cli("history", "--index", str(index), str(folder), env={FAULT_ENV: "index-batch"})
    assert killed(proc), proc.stderr
    assert indexed(index) == 500  # the first batch was committed; the kill lost the rest only
    again = cli("history", "--index", str(index), "--json", str(folder))
    assert again.returncode == 0, again.stderr
    assert indexed(index) == 520


def test_index_on_a_full_disk_says_so_in_one_line_and_keeps_what_it_held(tmp_path):
    few, many = recordings(tmp_path / "few", 5), recordings(tmp_path / "many", 400)
    with small_disk(200 * 1024) as (disk, limit):
        index = disk / "history.sqlite"
        assert cli("history", "--index", str(index), str(few), preexec=limit).returncode == 0
        fill(disk, leave=8192)
        proc = cli("history", "--index", str(index), str(few), str(many), preexec=limit)
        err = one_line(proc)
        assert "history index" in err and ("full" in err or "too large" in err or "disk I/O" in err), err
        # SQLite in WAL mode needs room for its shared-memory file even to read: what was
        # there is readable again once there is room, before any other run touches it
        (disk / "filler").unlink(missing_ok=True)
        assert indexed(index) == 5
        assert cli("history", "--index", str(index), str(few), preexec=limit).returncode == 0
        assert indexed(index) == 5


def test_history_in_a_read_only_or_missing_folder_still_reports_and_changes_nothing(tmp_path):
    folder = recordings(tmp_path / "runs", 3)
    data = tmp_path / "data"
    index = data / "deeper" / "history.sqlite"
    assert cli("history", "--index", str(index), str(folder)).returncode == 0  # missing folders made
    before = digest(index)
    with read_only(data):
        for where in (index, data / "new" / "history.sqlite"):
            proc = cli("history", "--index", str(where), "--json", str(folder))
            assert proc.returncode == 0, proc.stderr
            doc = json.loads(proc.stdout)
            assert doc["indexed"]["found"] == 3 and any("nothing saved" in n for n in doc["notes"])
    assert digest(index) == before and not (data / "new").exists()
    assert cli("history", "--index", str(index), str(folder)).returncode == 0


def test_two_histories_at_once_on_one_index_both_work(tmp_path):
    """Two processes refresh one index over and over for a few seconds while recordings come
    and go: every run of both succeeds, and the index ends with every recording."""
    folder = recordings(tmp_path / "runs", 40)
    index = tmp_path / "history.sqlite"
    code = (
        "import subprocess, sys, time\n"
        "end, n = time.monotonic() + 4, 0\n"
        "while time.monotonic() < end:\n"
        f"    p = subprocess.run([sys.executable, '-m', 'spectui', 'history', '--json', '--index', {str(index)!r}, {str(folder)!r}],"
        " capture_output=True, text=True)\n"
        "    assert p.returncode == 0, p.stderr\n"
        "    n += 1\n"
        "print(n)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for i in range(40, 80):  # new recordings while both refresh
        shutil.copyfile(RECORDING, folder / f"r{i:04d}.spectui")
        time.sleep(0.05)
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and int(out) > 0, err
    assert cli("history", "--index", str(index), str(folder)).returncode == 0
    assert indexed(index) == 80


# -- OpenTelemetry exports (export -o) ---------------------------------------------------------


def test_export_never_replaces_a_file_of_another_kind(tmp_path):
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"my": "own json lines"}\n')
    before = digest(notes)
    err = one_line(run_cli("export", str(RECORDING), "-o", str(notes)))
    assert "leaves it as it is" in err and digest(notes) == before


def test_run_refuses_an_otel_file_of_another_kind_before_it_runs(tmp_path):
    notes = tmp_path / "notes.jsonl"
    notes.write_text("my notes\n")
    start = time.monotonic()
    err = one_line(run_cli("run", "--headless", "--max-tokens", "4", "--prompt", "hi", "--otel-file", str(notes)))
    assert "leaves it as it is" in err and notes.read_text() == "my notes\n"
    assert time.monotonic() - start < 30  # refused before a model was loaded


def test_export_killed_or_on_a_full_disk_keeps_the_earlier_export(tmp_path):
    with small_disk(512 * 1024) as (disk, limit):
        out = disk / "spans.jsonl"
        assert cli("export", str(RECORDING), "-o", str(out), preexec=limit).returncode == 0
        before = digest(out)
        many = [str(RECORDING)] * 3
        fill(disk, leave=4096)
        err = one_line(cli("export", *many, "-o", str(out), preexec=limit))
        assert "OpenTelemetry" in err or "cannot write" in err
        assert digest(out) == before and not list(disk.glob(".*.tmp"))
        (disk / "filler").unlink(missing_ok=True)
        proc = cli("export", *many, "-o", str(out), env={FAULT_ENV: "write:spans.jsonl"}, preexec=limit)
        assert killed(proc) and digest(out) == before
        assert cli("export", *many, "-o", str(out), preexec=limit).returncode == 0
        assert sum(1 for line in out.read_text().splitlines() if json.loads(line).get("parent_id") is None
                   and "context" in json.loads(line)) == 3


# -- writers inside a model run (real model, killed mid-write) ----------------------------------


@pytest.mark.slow
def test_sweep_killed_mid_manifest_keeps_the_last_manifest_and_its_recordings(tmp_path):
    out = tmp_path / "sweep"
    args = ("sweep", "--headless", "--json", "--prompts", "short-control", "--k-values", "2,4", "--repeats", "1",
            *FAST, "--out", str(out))
    proc = cli(*args, env={FAULT_ENV: "write:sweep.json@2"})  # the second manifest write dies half-written
    assert killed(proc), proc.stderr
    manifest = json.loads((out / "sweep.json").read_text())
    assert len(manifest["runs"]) == 1 and not manifest["complete"]
    for run in manifest["runs"]:
        assert read_recording(out / run["file"]).complete
    analyzed = cli("sweep", "--analyze", str(out), "--json")
    assert analyzed.returncode == 0, analyzed.stderr
    again = cli(*args[:-1], str(tmp_path / "again"))  # the next run works
    assert again.returncode == 0, again.stderr


@pytest.mark.slow
def test_sweep_into_a_folder_with_another_kind_of_sweep_json_is_refused(tmp_path):
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "sweep.json").write_text('{"mine": true}\n')
    before = digest(out / "sweep.json")
    err = one_line(cli("sweep", "--headless", "--json", "--prompts", "short-control", "--k-values", "2", *FAST,
                       "--out", str(out)))
    assert "leaves it as it is" in err and digest(out / "sweep.json") == before


def _complete_recordings(folder: Path) -> list[Path]:
    done = []
    for path in sorted(folder.glob("*.spectui")):
        try:
            if read_recording(path).complete:
                done.append(path)
        except Exception:  # noqa: BLE001 - a file being written
            pass
    return done


@pytest.mark.slow
@pytest.mark.parametrize("command", ["soak", "quality"])
def test_soak_and_quality_killed_mid_run_keep_every_finished_recording(tmp_path, command):
    out = tmp_path / command
    if command == "soak":
        args = ("soak", "--mode", "spec", "--k", "4", "--max-tokens", "6", "--threads", "1", "--duration", "120",
                "--out", str(out))
    else:
        args = ("quality", "--only", "quality-json-capital", "quality-tool-weather", "--max-tokens", "24", "--threads", "1",
                "--repeats", "3", "--out", str(out))
    proc = start(*args)
    kill_when(proc, lambda: len(_complete_recordings(out)) >= 2)
    finished = _complete_recordings(out)
    assert len(finished) >= 2
    for path in out.glob("*.spectui"):  # every file readable; a cut one reads as incomplete
        assert run_cli("report", str(path)).returncode == 0
    if command == "soak":
        analyzed = cli("soak", "--analyze", str(out), "--window", "5", "--json")
        assert analyzed.returncode == 0, analyzed.stderr
    again = cli(*args[:-1], str(tmp_path / "again"), timeout=600) if command == "quality" else None
    if again is not None:
        assert again.returncode in (0, 1), again.stderr  # 1: a graded failure, not a fault


@pytest.mark.slow
def test_chat_killed_mid_turn_keeps_earlier_turns_and_the_folder_replays(tmp_path, calibrations):
    folder = tmp_path / "chat"
    # 200 tokens: the story is still decoding when it is killed, and the second turn (the first
    # one's tokens plus its own budget) stays under the 512 tokens the session's calibration
    # reaches (tests/conftest.py), where 400 made it measure a deeper one first
    proc = subprocess.Popen([sys.executable, "-m", "spectui", "chat", "--max-tokens", "200", "--threads", "1",
                             "--record-dir", str(folder)], cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdin.write("Name a colour.\n\nWrite a long story about the sea.\n")
    proc.stdin.flush()

    def second_turn_decoding() -> bool:
        files = sorted(folder.glob("turn-02*.spectui")) if folder.exists() else []
        return bool(files) and files[0].stat().st_size > 2000

    kill_when(proc, second_turn_decoding)
    first, second = sorted(folder.glob("turn-01*.spectui")), sorted(folder.glob("turn-02*.spectui"))
    assert read_recording(first[0]).complete and not read_recording(second[0]).complete
    assert run_cli("report", str(first[0])).returncode == 0
    report = run_cli("report", str(second[0]))
    assert report.returncode == 0 and "incomplete" in report.stdout
    from spectui.sessions.conversation import Conversation

    conversation = Conversation.open(folder)  # what the dashboard and --rerun read
    assert conversation.turns[0].reply and conversation.turns[0].path == first[0]
    again = subprocess.run([sys.executable, "-m", "spectui", "chat", *FAST, "--record-dir", str(tmp_path / "again")],
                           cwd=REPO, input="Name a colour.\n", capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr


def _temps(folder: Path) -> list[Path]:
    return sorted(folder.glob(".*.tmp"))


@pytest.mark.slow
def test_write_quant_killed_on_a_full_disk_or_at_a_taken_name_leaves_no_half_model(tmp_path):
    out = tmp_path / "model.Q8_0.gguf"
    proc = start("tune", "--write-quant", "q8_0", str(out))
    kill_when(proc, lambda: any(p.stat().st_size > 1 << 20 for p in _temps(tmp_path)))
    assert not out.exists() and _temps(tmp_path)  # killed mid-write: the half file never took the name
    done = cli("tune", "--write-quant", "q8_0", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_bytes()[:4] == b"GGUF" and _temps(tmp_path) == []  # the killed run's half swept
    before = digest(out)
    err = one_line(cli("tune", "--write-quant", "q8_0", str(out)))
    assert "never overwrites" in err and digest(out) == before
    with small_disk(8 << 20) as (disk, limit):
        proc = cli("tune", "--write-quant", "q8_0", str(disk / "model.gguf"), preexec=limit)
        one_line(proc)
        assert not (disk / "model.gguf").exists() and _temps(disk) == []


@pytest.mark.slow
def test_draft_memory_save_killed_keeps_the_saved_memory_and_the_next_run_adds_to_it(tmp_path, calibrations):
    from spectui.engine.drafters.suffix_memory import SuffixMemory
    from spectui.models.artifacts import model_artifacts
    from spectui.models.gguf import read_gguf
    from spectui.models.registry import embedded_model_path

    cache = tmp_path / "cache"
    seed_calibrations(calibrations, cache)
    env = {"XDG_CACHE_HOME": str(cache)}
    args = ("run", "--headless", "--mode", "spec", "--draft", "suffix", *FAST, "--no-record")
    assert cli(*args, "--prompt", "Name a colour.", env=env).returncode == 0
    (memory,) = (cache / "spectui" / "draft-memory").glob("*.msgpack")
    before = digest(memory)
    proc = cli(*args, "--prompt", "Name a fruit.", env={**env, FAULT_ENV: "write:*.msgpack"})
    assert killed(proc), proc.stderr
    assert digest(memory) == before
    done = cli(*args, "--prompt", "Name a tree.", env=env)
    assert done.returncode == 0, done.stderr
    arts = model_artifacts(read_gguf(embedded_model_path()))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(cache))
        assert SuffixMemory.open(arts.vocab_sha256 or arts.sha256).sequences == 2  # the first run's, the third's


@pytest.mark.slow
def test_tune_killed_while_writing_its_result_keeps_the_previous_result(tmp_path, calibrations, tuned):
    from spectui.tune import store

    cache = tmp_path / "cache"
    seed_calibrations(calibrations, cache)  # measured once for the session (tests/conftest.py)
    env = {"XDG_CACHE_HOME": str(cache)}
    # the previous result: the session's real tune of this target at one thread (the key these
    # runs write under), stored as tune stores it
    assert store.save_result(tuned, cache=cache / "spectui") is not None
    # one prompt, --reps 0 (predictions only), a context too short for the long curve: the
    # verify-cost curve is the cost, and the result is written as any tune writes it
    args = ("tune", "--json", "--prompt", "Say hi.", "--reps", "0", "--max-tokens", "8", "--threads", "1", "--ctx", "512")
    (result,) = (cache / "spectui" / "tune").glob("*.json")
    before = digest(result)
    proc = cli(*args, env={**env, FAULT_ENV: f"write:{result.name}"}, timeout=600)
    assert killed(proc), proc.stderr
    assert digest(result) == before and json.loads(result.read_text())["key"]
    again = cli(*args, env=env, timeout=600)
    assert again.returncode == 0, again.stderr
    assert digest(result) != before and _temps(result.parent) == []


@pytest.mark.slow
def test_under_umask_022_user_text_is_0600_in_0700_and_caches_are_not_forced(tmp_path):
    """One real run, chat and history with the usual umask: every file holding text is 0600 in
    a 0700 folder; the caches without text keep 0644."""
    cache, data = tmp_path / "cache", tmp_path / "data"
    env = {"XDG_CACHE_HOME": str(cache), "XDG_DATA_HOME": str(data), "SPECTUI_RECORDINGS": str(data / "spectui" / "recordings")}

    def umask() -> None:
        os.umask(0o022)

    run = cli("run", "--headless", "--mode", "spec", "--draft", "suffix", *FAST, "--prompt", "Name a colour.",
              env=env, preexec=umask)
    assert run.returncode == 0, run.stderr
    chat = subprocess.run([sys.executable, "-m", "spectui", "chat", *FAST], cwd=REPO, input="Name a fruit.\n",
                          capture_output=True, text=True, env={**os.environ, **env}, preexec_fn=umask, timeout=300)
    assert chat.returncode == 0, chat.stderr
    index = cli("history", env=env, preexec=umask)
    assert index.returncode == 0, index.stderr

    def mode(p: Path) -> int:
        return stat.S_IMODE(p.stat().st_mode)

    private = [*(data / "spectui" / "recordings").rglob("*.spectui"), *(cache / "spectui" / "draft-memory").glob("*.msgpack"),
               data / "spectui" / "history.sqlite"]
    assert len(private) >= 4  # the run's recording, the chat turn, the memory, the index
    for p in private:
        assert mode(p) == 0o600 and mode(p.parent) == 0o700, (p, oct(mode(p)), oct(mode(p.parent)))
    caches = [p for p in (cache / "spectui").glob("*.json")]
    assert any(p.name == "fingerprints.json" for p in caches)
    for p in caches:
        assert mode(p) == 0o644, (p, oct(mode(p)))
