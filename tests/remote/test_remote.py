"""``--host``: sessions on a node over a real SSH server on 127.0.0.1 (``tests/remote/conftest.py``).

What must hold: a run on the node records locally the very tokens a local run records (greedy),
with the node's name in the header; a connection killed mid-run keeps every event received,
marks the recording cut short, exits 1 and leaves no spectui process on the node; each way of
failing to reach a node is one line and exit 2.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spectui import __version__
from spectui.recording.reader import read_recording
from spectui.recording.schema import End, MemorySample, Prefill, Step
from spectui.remote.ssh import mismatch
from spectui.remote.wire import Hello
from tests.conftest import REPO, seed_calibrations
from tests.remote.conftest import Node, node_spectui_processes, second_home

pytestmark = pytest.mark.server
#: a bound for one command; runs that load a model share two cores with whatever else runs
TIMEOUT_S = 300


def spectui(node: Node, *args: str, stdin: str | None = None, env: dict[str, str] | None = None,
            timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "spectui", *args], capture_output=True, text=True, input=stdin, timeout=timeout, cwd=REPO,
        env=env or node.environ(),
    )


def one_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, proc.stderr)
    return lines[0]


def test_unreachable_node_is_one_line(node):
    line = one_line(spectui(node, "run", "--headless", "--host", "nowhere", "--prompt", "hi"))
    assert line.startswith("spectui: error: cannot reach node nowhere:") and "refused" in line


def test_a_refused_key_is_one_line(node):
    line = one_line(spectui(node, "run", "--headless", "--host", "stranger", "--prompt", "hi"))
    assert line.startswith("spectui: error: node stranger refused the SSH key") and "authorized_keys" in line


def test_a_node_without_spectui_is_one_line(node):
    env = {**node.environ(), "SPECTUI_REMOTE_COMMAND": "/nonexistent/bin/spectui"}
    line = one_line(spectui(node, "run", "--headless", "--host", "node-a", "--prompt", "hi", env=env))
    assert f"node node-a has no spectui (/nonexistent/bin/spectui not found there): pip install spectui=={__version__} on node-a" in line


def test_bad_input_is_refused_by_the_node_in_one_line(node, tmp_path):
    record = tmp_path / "never.spectui"
    line = one_line(spectui(node, "run", "--headless", "--host", "node-a", "--target", "/nowhere/model.gguf", "--record", str(record)))
    assert line.startswith("spectui: error: on node node-a:") and "/nowhere/model.gguf" in line
    assert not record.exists()  # refused before the run: no recording, as for a local run


def test_the_handshake_names_version_schema_backends_and_models(node):
    ssh = node.env["SPECTUI_SSH"].split()
    proc = subprocess.run([*ssh, "-o", "BatchMode=yes", "node-a", node.remote_command() + " node hello"],
                          capture_output=True, text=True, timeout=TIMEOUT_S)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    hello = json.loads(proc.stdout)
    assert hello["spectui_version"] == __version__ and hello["protocol"] >= 1
    assert "llama-cpp-python" in hello["backends"] and hello["models"]
    assert hello["host"]["cpu_count"] == os.cpu_count()


def test_another_spectui_on_the_node_is_refused_saying_what_to_install_where():
    line = mismatch("mini", Hello(spectui_version="0.0.9", schema_version="1.2"))
    assert line.startswith("node mini runs spectui 0.0.9 (schema 1.2)") and f"pip install spectui=={__version__} on mini" in line
    assert mismatch("mini", Hello(spectui_version=__version__, schema_version=read_schema())) == ""


def read_schema() -> str:
    from spectui.recording.schema import SCHEMA_VERSION

    return SCHEMA_VERSION


def test_the_node_process_ends_with_its_stdin():
    """No SSH: the node side alone. End of file on stdin (the link gone) ends it, idle or not."""
    proc = subprocess.Popen([sys.executable, "-m", "spectui", "node", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=REPO)  # fmt: skip
    from spectui.remote.wire import FrameReader

    assert isinstance(FrameReader(proc.stdout.fileno()).next(timeout=60), Hello)
    proc.stdin.close()
    assert proc.wait(timeout=15) == 0


@pytest.mark.slow
@pytest.mark.parametrize("mode", [("--mode", "ar"), ("--mode", "spec", "--draft", "ngram", "--deterministic")], ids=["ar", "spec"])
def test_a_node_run_records_the_tokens_of_a_local_run(node, tmp_path, mode):
    args = ("run", "--headless", *mode, "--max-tokens", "48", "--prompt", "Write a haiku about the sea.")
    here = spectui(node, *args, "--record", str(tmp_path / "here.spectui"))
    there = spectui(node, *args, "--host", "node-a", "--record", str(tmp_path / "there.spectui"))
    assert here.returncode == 0 and there.returncode == 0, there.stderr
    assert there.stdout == here.stdout and there.stdout.strip()
    local, remote = read_recording(tmp_path / "here.spectui"), read_recording(tmp_path / "there.spectui")
    assert remote.complete and remote.header.node == "node-a" and local.header.node == ""
    tokens = [[t for e in r.events if type(e) is Step for t in e.tokens] for r in (local, remote)]
    assert tokens[0] == tokens[1] and tokens[0]
    assert local.events[-1].reason == remote.events[-1].reason
    assert remote.header.artifacts.target.sha256 == local.header.artifacts.target.sha256
    assert remote.header.artifacts.host.cpu == local.header.artifacts.host.cpu  # the node is this machine
    assert remote.header.prompt_tokens == local.header.prompt_tokens
    report = spectui(node, "report", str(tmp_path / "there.spectui"))
    assert report.returncode == 0, report.stderr


def start_long_run(node, record) -> subprocess.Popen:  # noqa: ANN001
    """A long greedy count on node-a, recorded here: it runs for seconds unless stopped (the
    tests stop it after 20 steps). 400 tokens keep it within the depth of the session's
    calibrations (tests/conftest.py), which the tests ask for: 3000 measured one to depth 1024 first."""
    return subprocess.Popen(
        [sys.executable, "-m", "spectui", "run", "--headless", "--host", "node-a", "--mode", "ar", "--raw", "--max-tokens", "400",
         "--prompt", "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,", "--record", str(record)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=node.environ(),
    )  # fmt: skip


def wait_for_steps(run: subprocess.Popen, record, n: int) -> None:  # noqa: ANN001
    """Until ``record`` holds ``n`` decode steps (the run must still be going)."""
    deadline = time.monotonic() + TIMEOUT_S
    while not (record.exists() and sum(type(e) is Step for e in read_recording(record).events) >= n):
        assert run.poll() is None and time.monotonic() < deadline, run.stderr.read() if run.poll() is not None else "no tokens"
        time.sleep(0.2)


@pytest.mark.slow
def test_a_dropped_connection_keeps_what_arrived_and_leaves_nothing_on_the_node(own_node, tmp_path, calibrations):
    node = own_node  # this test kills its server
    record = tmp_path / "cut.spectui"
    run = start_long_run(node, record)
    try:
        wait_for_steps(run, record, 20)
        assert node_spectui_processes(node), "the node's spectui should be running mid-run"
        node.kill()
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 1, err
    rec = read_recording(record)
    assert rec.complete and not rec.truncated
    end = rec.events[-1]
    assert type(end) is End and end.reason == "interrupted" and "connection to node node-a was lost" in end.error
    steps = [e for e in rec.events if type(e) is Step]
    assert 20 <= end.n_tokens == sum(len(s.tokens) for s in steps) < 400
    assert any(type(e) is Prefill for e in rec.events)
    lines = [line for line in err.splitlines() if line.startswith("spectui: error:")]
    assert len(lines) == 1 and "cut short" in lines[0] and "lost" in lines[0]
    deadline = time.monotonic() + 20
    while node_spectui_processes(node) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert node_spectui_processes(node) == []


@pytest.mark.slow
def test_a_conversation_keeps_its_cache_on_the_node_between_turns(node, tmp_path):
    folder = tmp_path / "chat"
    proc = spectui(node, "chat", "--host", "node-a", "--threads", "1", "--max-tokens", "16", "--record-dir", str(folder),
                   stdin="Name a colour.\nName another one.\n")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    turns = sorted(folder.glob("turn-*.spectui"))
    assert len(turns) == 2
    second = read_recording(turns[1])
    assert second.header.node == "node-a"
    assert next(e for e in second.events if type(e) is Prefill).n_cached > 0  # one engine on the node, kept


@pytest.mark.slow
def test_ctrl_c_here_stops_the_run_on_the_node_cleanly(node, tmp_path, calibrations):
    record = tmp_path / "stopped.spectui"
    run = start_long_run(node, record)
    try:
        wait_for_steps(run, record, 10)
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err  # asked to stop: not a fault
    end = read_recording(record).events[-1]
    assert type(end) is End and end.reason == "interrupted" and end.error == "" and end.n_tokens < 400
    deadline = time.monotonic() + 20
    while node_spectui_processes(node) and time.monotonic() < deadline:  # the channel closed: the node exits
        time.sleep(0.2)
    assert node_spectui_processes(node) == []


@pytest.mark.slow
def test_tune_runs_on_the_node_keeps_its_result_there_and_reports_here(node, calibrations):
    cache = Path(second_home(node.folder)[0])
    seed_calibrations(calibrations, cache)  # the session's (tests/conftest.py): node-b measures its curve, not these again
    # a context too short for the long curve: what is shown is where tune runs and keeps its result
    proc = spectui(node, "tune", "--host", "node-b", "--prompt", "Repeat: the quick brown fox.", "--max-tokens", "16",
                   "--reps", "0", "--threads", "1", "--ctx", "1024", "--json", timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["curve"]["relative"][0] == 1.0 and doc["tiers"]  # measured on the node, printed here
    stored = [p for p in cache.rglob("*.json") if "tune" in str(p.relative_to(cache))]
    assert stored, f"node-b's tune result belongs in node-b's cache ({cache})"


@pytest.mark.slow
def test_soak_and_quality_run_on_the_node(node, tmp_path):
    soak = spectui(node, "soak", "--host", "node-a", "--duration", "4", "--prompt", "Name a colour.", "--max-tokens", "16",
                   "--threads", "1", "--out", str(tmp_path / "soak"), "--json")  # fmt: skip
    assert soak.returncode in (0, 1) and json.loads(soak.stdout)["folder"] == str(tmp_path / "soak"), soak.stderr  # 1: judged
    recordings = [read_recording(p) for p in sorted((tmp_path / "soak").glob("*.spectui"))]
    assert recordings and all(r.complete and r.header.node == "node-a" for r in recordings)
    assert any(type(e) is MemorySample for r in recordings for e in r.events)  # the node's memory, sampled there
    quality = spectui(node, "quality", "--host", "node-a", "--only", "quality-json-capital", "--threads", "1",
                      "--out", str(tmp_path / "quality"), "--json")  # fmt: skip
    assert quality.returncode == 0, quality.stderr
    graded = sorted((tmp_path / "quality").glob("*.spectui"))
    assert len(graded) == 2 and all(read_recording(p).header.node == "node-a" for p in graded)  # AR and speculative
