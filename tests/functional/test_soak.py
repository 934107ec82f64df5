"""``spectui soak`` on the real embedded model: a short soak, its folder, --analyze, SIGINT."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time

import pytest

from spectui.recording.reader import read_recording
from tests.conftest import REPO, run_cli

PROMPTS = {
    "copy-echo": "# tier: copy\n# max_tokens: 64\nRepeat this sentence exactly: the quick brown fox jumps over the lazy dog.\n",
    "short-hello": "# tier: short\n# max_tokens: 64\nSay hello to a new colleague in one friendly sentence.\n",
    # quality-* prompts grade output, not load: a soak leaves them out
    "quality-json": "# tier: quality\n# max_tokens: 64\nReturn a JSON object with one key.\n",
}


@pytest.fixture
def two_prompts(tmp_path, monkeypatch):
    folder = tmp_path / "prompts"
    folder.mkdir()
    for name, text in PROMPTS.items():
        (folder / f"{name}.txt").write_text(text)
    monkeypatch.setenv("SPECTUI_PROMPTS", str(folder))  # the CLI subprocess inherits it
    return folder


def soak_args(out, *extra: str) -> list[str]:
    # short sessions, one thread: other decoders may share the two cores (two-thread llama.cpp
    # processes sharing them slow each other down several times over)
    return ["soak", "--mode", "spec", "--k", "4", "--max-tokens", "6", "--threads", "1", "--window", "2", "--out", str(out), *extra]


def test_short_soak_reports_a_slope_and_analyze_reproduces_it(two_prompts, tmp_path, model_path):
    out = tmp_path / "soak"
    proc = run_cli(*soak_args(out, "--duration", "10", "--json"), timeout=240)  # five 2 s windows
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["folder"] == str(out)
    assert math.isfinite(doc["slope_mib_min"])
    assert doc["fit_samples"] >= 3 and doc["memory_samples"] >= doc["fit_samples"]
    assert doc["peak_rss_mib"] > 50  # the model's weights alone are ~90 MB
    assert doc["passed"] == (proc.returncode == 0)
    assert 8 < doc["duration_s"] < 60  # the soak clock starts at the first header, just after the timer
    assert len(doc["windows"]) >= 4 and all(w["end_s"] > w["start_s"] for w in doc["windows"])
    assert sum(w["tokens"] for w in doc["windows"]) == doc["tokens"] > 0
    assert 0 <= doc["acceptance_rate"] <= 1

    files = sorted(out.glob("*.spectui"))
    assert len(files) == doc["sessions"] >= 2
    recs = [read_recording(f) for f in files]
    assert all(r.complete for r in recs)
    names = [r.header.config.prompt_name for r in recs]
    assert names[:2] == ["copy-echo", "short-hello"]  # cycled, in order, quality-* left out
    assert "quality-json" not in names
    assert {r.header.config.max_tokens for r in recs} == {6}
    assert "sessions recorded to" in proc.stderr

    again = run_cli("soak", "--analyze", str(out), "--window", "2", "--json")
    assert again.returncode == proc.returncode, again.stderr
    assert json.loads(again.stdout) == doc

    text = run_cli("soak", "--analyze", str(out), "--window", "2")
    assert "slope" in text.stdout and "MiB/min" in text.stdout and "verdict" in text.stdout


def test_sigint_keeps_the_finished_recordings(two_prompts, tmp_path, model_path):
    out = tmp_path / "soak"
    proc = subprocess.Popen(
        [sys.executable, "-m", "spectui", *soak_args(out, "--duration", "300")],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while len(list(out.glob("*.spectui"))) < 3:  # two sessions finished, a third running
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the soak never got going"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode in (0, 1), stderr
    assert "soak stopped after" in stderr and "Traceback" not in stderr
    files = sorted(out.glob("*.spectui"))
    assert len(files) >= 3
    assert all(read_recording(f).complete for f in files)
    assert f"{len(files)} sessions" in stdout and "verdict" in stdout


def test_bad_input_is_one_line(tmp_path):
    (tmp_path / "old.spectui").write_bytes(b"x")
    for args, fragment in [
        (["soak", "--out", str(tmp_path)], "already holds recordings"),
        (["soak", "--analyze", str(tmp_path / "nowhere")], "not found"),
        (["soak", "--duration", "-5"], "--duration"),
        (["soak", "--max-slope-mb-min", "-1", "--analyze", str(tmp_path)], "slope"),
    ]:
        proc = run_cli(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in proc.stderr, (args, proc.stderr)
