"""Nothing lost: each of spectui's own writers under a kill, a full disk, a file of another
kind, a damaged file of its own, read-only and missing folders, and a second process.

Every cell runs the writer's real function (``tests/storage_writers.py``) in a child process
on real files; after each fault the next run works and what was complete before is still
there. The CLI-level runs of the same writers are in tests/functional/test_writes_survive.py.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spectui import file_kinds, storage
from spectui.errors import SpectuiError
from tests.conftest import REPO
from tests.faults import FAULT_ENV, fill, killed, read_only, small_disk

#: the writers driven here, and whether their file holds user text (0600 / 0700)
WRITERS = {"cache": False, "catalogue": False, "tune-result": True, "draft-memory": True, "otel-export": False}
RECORDING = Path(REPO) / "tests" / "data" / "fixed-session.spectui"


def drive(writer: str, action: str, folder: Path, n: int = 0, pad: int = 100, *, env: dict | None = None,
          preexec=None) -> subprocess.CompletedProcess:  # noqa: ANN001
    args = [sys.executable, "-m", "tests.storage_writers", writer, action, str(folder)]
    if action == "write":
        args += [str(n), str(pad)]
    return subprocess.run(args, capture_output=True, text=True, cwd=REPO, env={**os.environ, **(env or {})},
                          preexec_fn=preexec, timeout=120)


def target(writer: str, folder: Path) -> Path:
    from tests.storage_writers import path_of

    return path_of(writer, folder)


def version(writer: str, folder: Path) -> str:
    proc = drive(writer, "read", folder)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def written(writer: str, folder: Path, n: int, pad: int = 100) -> bytes:
    proc = drive(writer, "write", folder, n, pad)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
    return target(writer, folder).read_bytes()


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*.tmp")]


@pytest.mark.parametrize("writer", WRITERS)
def test_kill_mid_write_leaves_the_old_version(writer, tmp_path):
    before = written(writer, tmp_path, 1)
    proc = drive(writer, "write", tmp_path, 2, 20_000, env={FAULT_ENV: f"write:{target(writer, tmp_path).name}"})
    assert killed(proc), (proc.returncode, proc.stderr)
    assert target(writer, tmp_path).read_bytes() == before
    assert version(writer, tmp_path) == "1"
    written(writer, tmp_path, 3)  # the next run works, and sweeps the killed run's temporary file
    assert version(writer, tmp_path) == "3"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("writer", WRITERS)
def test_full_disk_leaves_the_old_version_and_says_so_in_one_line(writer):
    with small_disk(64 * 1024) as (folder, limit):
        before = written(writer, folder, 1)
        fill(folder)
        proc = drive(writer, "write", folder, 2, 200_000, preexec=limit)
        assert "Traceback" not in proc.stderr, proc.stderr
        if proc.returncode == 2:  # an export the user asked for: the error is theirs to see
            assert len(proc.stderr.strip().splitlines()) == 1 and ("No space" in proc.stderr or "too large" in proc.stderr)
        else:  # a cache: the run goes on without it
            assert proc.returncode == 0 and proc.stdout.strip() == "failed", proc.stderr
        assert target(writer, folder).read_bytes() == before
        assert leftovers(folder) == []
        (folder / "filler").unlink(missing_ok=True)
        written(writer, folder, 3)
        assert version(writer, folder) == "3"


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("foreign", ["recording", "text", "sqlite"])
def test_a_file_of_another_kind_is_refused_in_one_line_and_left_as_it_is(writer, foreign, tmp_path):
    path = target(writer, tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if foreign == "recording":
        path.write_bytes(RECORDING.read_bytes())
    elif foreign == "text":
        path.write_text("my notes, not spectui's\n")
    else:
        import sqlite3

        db = sqlite3.connect(path)
        db.execute("CREATE TABLE mine (x)")
        db.commit()
        db.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    proc = drive(writer, "write", tmp_path, 1)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1 and "leaves it as it is" in line and "Traceback" not in line
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert [p.name for p in path.parent.iterdir() if "corrupt" in p.name] == []


@pytest.mark.parametrize("writer", WRITERS)
def test_a_damaged_file_of_its_own_is_moved_aside_never_deleted(writer, tmp_path):
    whole = written(writer, tmp_path, 1)
    path = target(writer, tmp_path)
    torn = whole[: len(whole) // 2]
    if writer == "otel-export":
        torn = whole[: whole.index(b"\n") // 2]  # a torn first line
    path.write_bytes(torn)
    proc = drive(writer, "write", tmp_path, 2)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    aside = [p for p in path.parent.iterdir() if p.name.startswith(path.name + ".corrupt-")]
    if writer == "otel-export":  # an export is replaced whole: a torn one is its own kind, replaced
        assert version(writer, tmp_path) == "2"
        return
    assert len(aside) == 1 and aside[0].read_bytes() == torn
    assert "moved it aside" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert version(writer, tmp_path) == "2"


@pytest.mark.parametrize("writer", WRITERS)
def test_missing_and_read_only_folders(writer, tmp_path):
    deep = tmp_path / "not" / "yet"
    written(writer, deep, 1)  # missing folders are made
    before = target(writer, deep).read_bytes()
    with read_only(target(writer, deep).parent):
        proc = drive(writer, "write", deep, 2)
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.returncode in (0, 2) and (proc.returncode == 2 or proc.stdout.strip() == "failed")
        if proc.returncode == 2:
            assert len(proc.stderr.strip().splitlines()) == 1
    assert target(writer, deep).read_bytes() == before
    written(writer, deep, 3)
    assert version(writer, deep) == "3"


def _hammer(writer: str, folder: Path, first: int, seconds: float) -> subprocess.Popen:
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from tests.storage_writers import write\n"
        f"n, end = {first}, time.monotonic() + {seconds}\n"
        "while time.monotonic() < end:\n"
        f"    assert write({writer!r}, Path({str(folder)!r}), n, -1)\n"
        "    n += 2\n"
        f"print((n - {first}) // 2)\n"
    )
    return subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("writer", ["cache", "draft-memory", "catalogue"])
def test_two_processes_at_once_keep_both_their_entries(writer, tmp_path):
    """Two processes write distinct entries as fast as they can for two seconds; every entry
    of both is in the file afterwards (read-merge-write under the lock)."""
    a, b = _hammer(writer, tmp_path, 0, 2.0), _hammer(writer, tmp_path, 1, 2.0)
    (out_a, err_a), (out_b, err_b) = a.communicate(timeout=120), b.communicate(timeout=120)
    assert a.returncode == 0 and b.returncode == 0, (err_a, err_b)
    count_a, count_b = int(out_a), int(out_b)
    assert count_a > 0 and count_b > 0
    if writer == "cache":
        from spectui.models.json_cache import read_entries

        keys = set(read_entries("verify-cost.json", tmp_path))
    elif writer == "catalogue":
        import json

        keys = {k.replace("model-", "k") for k in json.loads(target(writer, tmp_path).read_text())["facts"]}
    else:
        from spectui.engine.drafters.suffix_memory import SuffixMemory
        from tests.storage_writers import VOCAB

        keys = {f"k{seq[0]}" for seq in SuffixMemory.open(VOCAB, cache=tmp_path).contents()}
    assert {f"k{2 * i}" for i in range(count_a)} | {f"k{2 * i + 1}" for i in range(count_b)} <= keys


@pytest.mark.parametrize("writer", ["tune-result", "otel-export"])
def test_two_processes_at_once_leave_a_whole_file(writer, tmp_path):
    """One file replaced whole (the latest tune result, one export): the last writer wins by
    design; a reader polling meanwhile never finds half a file."""
    written(writer, tmp_path, 1)
    a, b = _hammer(writer, tmp_path, 0, 2.0), _hammer(writer, tmp_path, 1, 2.0)
    reads = 0
    while a.poll() is None or b.poll() is None:
        assert version(writer, tmp_path) != "-"
        reads += 1
    assert a.returncode == 0 and b.returncode == 0, (a.stderr.read(), b.stderr.read())
    assert reads > 0 and leftovers(tmp_path) == []


# -- modes (issue: private by default) -------------------------------------------------------


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("writer", WRITERS)
def test_user_text_is_0600_in_0700_and_caches_keep_normal_modes(writer, tmp_path, umask_022):
    home = tmp_path / "home"  # made by spectui (pytest makes tmp_path 0700 itself)
    written(writer, home, 1)
    path = target(writer, home)
    if WRITERS[writer]:
        assert mode(path) == 0o600 and mode(path.parent) == 0o700
    else:
        assert mode(path) == 0o644 and mode(path.parent) == 0o755  # not forced


def test_an_existing_readable_file_is_tightened_on_the_first_write_with_one_line(tmp_path, umask_022):
    written("draft-memory", tmp_path, 1)
    path = target("draft-memory", tmp_path)
    os.chmod(path, 0o644)
    os.chmod(path.parent, 0o755)
    proc = drive("draft-memory", "write", tmp_path, 2)
    assert proc.returncode == 0, proc.stderr
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    lines = proc.stderr.strip().splitlines()
    assert lines and all("made the" in line and "private" in line for line in lines)


def test_create_new_is_0600_whatever_the_umask_and_never_replaces(tmp_path):
    old = os.umask(0)
    try:
        fd = storage.create_new(tmp_path / "r", private=True)
        os.write(fd, b"x")
        os.close(fd)
        assert mode(tmp_path / "r") == 0o600
        with pytest.raises(FileExistsError):
            storage.create_new(tmp_path / "r", private=True)
    finally:
        os.umask(old)


def test_write_new_never_replaces_a_file_that_appeared(tmp_path):
    kind = file_kinds.magic_kind("a test file", b"T")
    storage.write_new(tmp_path / "out", b"T1", kind)
    with pytest.raises(SpectuiError, match="does not replace"):
        storage.write_new(tmp_path / "out", b"T2", kind)
    assert (tmp_path / "out").read_bytes() == b"T1" and leftovers(tmp_path) == []


def test_stale_temporary_files_of_dead_writers_are_swept_live_ones_kept(tmp_path):
    path = tmp_path / "f.json"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".f.json.{dead.stdout.strip()}.abc.tmp"
    live = tmp_path / f".f.json.{os.getpid()}.abc.tmp"
    stale.write_text("half")
    live.write_text("half")
    time.sleep(0.01)
    storage.remove_stale_temps(path)
    assert not stale.exists() and live.exists()


def test_recordings_are_0600_and_the_recordings_folder_is_tightened_once(tmp_path, monkeypatch, umask_022):
    from spectui.recording.reader import read_recording
    from spectui.recording.writer import RecordingWriter

    home = tmp_path / "recordings"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    (home / "old.spectui").write_bytes(RECORDING.read_bytes())  # an older spectui's, 0644
    monkeypatch.setenv("SPECTUI_RECORDINGS", str(home))
    events = read_recording(RECORDING).events
    with pytest.warns(storage.StorageNotice, match="made the folder private"):
        with RecordingWriter(home / "chat-1" / "turn-01.spectui") as w:  # a run folder in it
            for ev in events:
                w.write(ev)
    assert mode(home) == 0o700 and mode(home / "chat-1") == 0o700 and mode(home / "chat-1" / "turn-01.spectui") == 0o600
    user_folder = tmp_path / "mine"
    user_folder.mkdir()
    os.chmod(user_folder, 0o755)
    with RecordingWriter(user_folder / "run.spectui") as w:  # a folder the user named keeps its modes
        w.write(events[0])
    assert mode(user_folder) == 0o755 and mode(user_folder / "run.spectui") == 0o600


def test_a_recording_on_a_full_disk_keeps_every_complete_record_and_says_so(tmp_path):
    from spectui.recording.reader import read_recording
    from tests.faults import python

    code = (
        "import sys\n"
        "from spectui.errors import SpectuiError\n"
        "from spectui.recording.reader import read_recording\n"
        "from spectui.recording.writer import RecordingWriter\n"
        f"events = read_recording({str(RECORDING)!r}).events\n"
        "w = RecordingWriter(sys.argv[1] if len(sys.argv) > 1 else {path!r})\n"
        "try:\n"
        "    w.write(events[0])\n"
        "    for _ in range(10_000):\n"
        "        for ev in events[1:-1]:\n"
        "            w.write(ev)\n"
        "    w.close()\n"
        "except SpectuiError as exc:\n"
        "    print(f'spectui: error: {exc}', file=sys.stderr)\n"
        "    sys.exit(2)\n"
    )
    with small_disk(128 * 1024) as (disk, limit):
        path = disk / "run.spectui"
        proc = python(code.replace("{path!r}", repr(str(path))), preexec=limit)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "cannot write recording" in proc.stderr
        # the failed file is closed, not left for Python to flush at exit (3.13 reports that)
        assert "Exception ignored" not in proc.stderr, proc.stderr
        rec = read_recording(path)  # every complete record is there; the cut one is a torn tail
        assert not rec.complete and len(rec.events) > 10
        path.unlink()
        ok = python(code.replace("range(10_000)", "range(1)").replace("{path!r}", repr(str(path))), preexec=limit)
        assert ok.returncode == 0, ok.stderr  # the next run works once there is room
