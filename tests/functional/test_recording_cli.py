"""Recordings made by real headless runs: complete, killed, interrupted, and reported."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from spectui.recording.output import output_text
from spectui.recording.reader import read_recording
from spectui.recording.schema import End, Header, MemorySample, Prefill, Step
from tests.conftest import REPO, run_cli

LONG = "Write a very long, detailed essay about the history of lighthouses, with many sections."


def test_recording_matches_output_and_reports(tmp_path):
    path = tmp_path / "run.spectui"
    proc = run_cli("run", "--headless", "--json", "--max-tokens", "40", "--record", str(path), "--prompt", "Say hello twice.")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    rec = read_recording(path)
    assert rec.complete and not rec.truncated
    kinds = [type(e) for e in rec.events]
    assert kinds[0] is Header and kinds[-1] is End and Prefill in kinds and MemorySample in kinds
    tokens = [t for e in rec.events if isinstance(e, Step) for t in e.tokens]
    assert tokens == doc["tokens"]
    assert doc["text"] == output_text(rec.events)  # streamed and read back: one text
    assert doc["recording"] == str(path)

    table = run_cli("report", str(path))
    assert table.returncode == 0, table.stderr
    for label in ("TTFT", "decode", "ITL p50 / p95 / p99", "acceptance rate", "peak RSS", "target sha256"):
        assert label in table.stdout
    as_json = json.loads(run_cli("report", "--json", str(path)).stdout)
    assert as_json["summary"]["n_tokens"] == len(tokens)
    assert as_json["header"]["artifacts"]["target"]["quant"] == "Q4_1"


def test_no_record_writes_nothing(tmp_path):
    env_dir = os.environ["SPECTUI_RECORDINGS"]
    before = set(os.listdir(env_dir)) if os.path.isdir(env_dir) else set()
    proc = run_cli("run", "--headless", "--no-record", "--max-tokens", "4", "--prompt", "Hi")
    assert proc.returncode == 0, proc.stderr
    after = set(os.listdir(env_dir)) if os.path.isdir(env_dir) else set()
    assert after == before
    assert "recorded to" not in proc.stderr


def _start(path, *extra):
    # 400 tokens: seconds of decoding, where the tests stop it after 10-20 steps; a run that
    # reaches under 512 tokens finds the session's calibration (tests/conftest.py), one that
    # reaches 2000 measured a deeper one first (~20 s)
    return subprocess.Popen(
        [sys.executable, "-m", "spectui", "run", "--headless", "--max-tokens", "400", "--mode", "ar",
         "--record", str(path), "--prompt", LONG, *extra],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _wait_for_steps(path, n: int, proc, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if path.exists():
            try:
                if sum(isinstance(e, Step) for e in read_recording(path).events) >= n:
                    return
            except Exception:  # noqa: BLE001 - a file still being written: read it again
                pass
        time.sleep(0.2)
    proc.kill()
    pytest.fail("the run never produced enough steps")


def test_sigkill_mid_decode_keeps_every_complete_record(tmp_path, calibrations):
    path = tmp_path / "killed.spectui"
    proc = _start(path)
    try:
        _wait_for_steps(path, 20, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    rec = read_recording(path)
    assert not rec.complete
    steps = [e for e in rec.events if isinstance(e, Step)]
    assert len(steps) >= 20
    assert type(rec.events[0]) is Header and any(isinstance(e, Prefill) for e in rec.events)
    report = run_cli("report", str(path))
    assert report.returncode == 0, report.stderr
    assert "incomplete" in report.stdout


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP])
def test_interrupt_and_hangup_end_the_recording_cleanly(tmp_path, sig, calibrations):
    path = tmp_path / "interrupted.spectui"
    proc = _start(path)
    try:
        _wait_for_steps(path, 10, proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    rec = read_recording(path)
    assert rec.complete and not rec.truncated
    end = rec.events[-1]
    assert isinstance(end, End) and end.reason == "interrupted"
    assert end.n_tokens == sum(len(e.tokens) for e in rec.events if isinstance(e, Step))


def test_report_errors_are_one_line(tmp_path):
    bogus = tmp_path / "x.spectui"
    bogus.write_bytes(b"not a recording at all")
    for args in (["report", str(bogus)], ["report", str(tmp_path / "missing.spectui")]):
        proc = run_cli(*args)
        assert proc.returncode == 2
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
