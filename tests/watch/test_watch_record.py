"""A watch is recorded, and the recording replays and reports: record -> replay -> report, against
the stand-in server of ``standin.py`` (a real HTTP server on 127.0.0.1, the metric texts of
tests/data/metrics); and a watch killed with SIGKILL keeps every reading it had written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from spectui.recording.reader import read_recording
from spectui.recording.schema import End
from spectui.recording.watch_records import WatchReading
from spectui.watch.record import read_watch
from tests.conftest import run_cli
from tests.watch.standin import assert_only_reads


def close(a: object, b: object) -> bool:
    """Equal, numbers to a part in 10^5 (a recording keeps times in whole microseconds)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-5)
    return a == b


def test_record_replay_report(llama_standin, tmp_path):
    out = tmp_path / "w.spectui"
    live = run_cli("watch", llama_standin.url, "--json", "--samples", "4", "--interval", "0.2", "-o", str(out), timeout=60)
    assert live.returncode == 0, live.stderr
    events = [json.loads(line) for line in live.stdout.splitlines()]
    assert events[0]["recording"] == str(out)
    live_end = events[-1]

    rec = read_recording(out)
    assert rec.complete and rec.header.watch is not None
    info = rec.header.watch
    assert info.server == "llama-server" and info.url == llama_standin.url and info.identity["build"] == "b9999-standin"
    assert info.identity["model"] == "SmolLM2.gguf" and info.counts_at_request_end
    # the stand-in runs in this test's process, which listens on the port: its numbers are joined
    assert info.process.endswith(f"pid {os.getpid()}"), info
    readings = [e for e in rec.events if type(e) is WatchReading]
    assert len(readings) == 4 and all(r.process is not None and r.process.rss_bytes > 0 for r in readings)
    end = rec.events[-1]
    assert type(end) is End and end.reason == "length"

    # replay --json: the live watch's samples and summary, folded again from the recording
    replay = run_cli("replay", str(out), "--json", timeout=60)
    assert replay.returncode == 0, replay.stderr
    lines = [json.loads(line) for line in replay.stdout.splitlines()]
    assert [x["event"] for x in lines] == ["sample"] * 4 + ["end"]
    for recorded, seen in zip(lines[:4], events[1:5]):
        # the same figures, but for times kept to the microsecond
        assert close(recorded.get("interval"), seen.get("interval")) and recorded["counters"] == seen["counters"]
    assert close(lines[-1], live_end)

    report = run_cli("report", str(out), timeout=60)
    assert report.returncode == 0, report.stderr
    text = report.stdout
    assert f"llama-server at {llama_standin.url}" in text and "4 readings every 0.2 s" in text
    assert "ran to its --samples / --duration" in text and "1 (each counted from zero)" in text
    totals = read_watch(rec).totals
    assert f"{totals.generated_tokens:.0f} tokens" in text
    assert f"{totals.acceptance_rate:.3f}" in text
    assert " ".join(f"{p:.2f}" for p in totals.per_position) in text
    assert "peak RSS" in text and "Traceback" not in report.stderr
    doc = json.loads(run_cli("report", str(out), "--json", timeout=60).stdout)
    assert doc["kind"] == "watch" and doc["summary"]["acceptance_rate"] == pytest.approx(totals.acceptance_rate)
    # a watch holds no session: what compares sessions refuses it in one line
    for args in (("diff", str(out), str(out)), ("gate", "--baseline", str(out), "--candidate", str(out)), ("export", str(out), "--otel-json")):
        refused = run_cli(*args, timeout=60)
        assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "is a watch's recording (spectui watch), not a session's" in refused.stderr
    assert_only_reads(llama_standin)


def test_a_killed_watch_keeps_every_reading(vllm_standin, tmp_path):
    out = tmp_path / "killed.spectui"
    proc = subprocess.Popen(
        [sys.executable, "-m", "spectui", "watch", vllm_standin.url, "--json", "--interval", "0.1", "-o", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    printed = 0
    deadline = time.monotonic() + 60
    while printed < 5 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        printed += '"sample"' in line
    # every sample is written before it is printed: the five printed are on disk
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert printed == 5
    rec = read_recording(out)
    readings = [e for e in rec.events if type(e) is WatchReading]
    assert not rec.complete and len(readings) >= 5 and not any(type(e) is End for e in rec.events)
    report = run_cli("report", str(out), timeout=60)
    assert report.returncode == 0 and "incomplete (no end record: the watch was killed" in report.stdout


def test_sigterm_ends_the_recording_cleanly(vllm_standin, tmp_path):
    out = tmp_path / "term.spectui"
    proc = subprocess.Popen(
        [sys.executable, "-m", "spectui", "watch", vllm_standin.url, "--headless", "--interval", "0.1", "-o", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    while "gen " not in proc.stdout.readline():
        pass
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert "watched " in stdout and f"to {out}" in stderr
    rec = read_recording(out)
    assert rec.complete and rec.events[-1].reason == "interrupted"  # type: ignore[union-attr]
