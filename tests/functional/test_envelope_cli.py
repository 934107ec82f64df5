"""The acceptance brief end to end on the real embedded model: a run beside a busy process
says so in its report, in ``diff`` and in ``gate``; a soak whose draft is forced to disagree
fails by the window rule, one at normal acceptance does not."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import run_cli
from tests.functional.test_soak import two_prompts  # noqa: F401 - a fixture

FAST = ["--headless", "--mode", "spec", "--max-tokens", "48", "--threads", "1", "--prompt", "Count from one to thirty, in words."]


@pytest.fixture
def busy_core():
    """Another process keeping one core busy for the length of a test."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_a_run_beside_a_busy_process_says_so_in_report_diff_and_gate(tmp_path, model_path, request):
    quiet, shared = tmp_path / "quiet.spectui", tmp_path / "shared.spectui"
    proc = run_cli("run", *FAST, "--record", str(quiet))
    assert proc.returncode == 0, proc.stderr
    busy = request.getfixturevalue("busy_core")
    proc = run_cli("run", *FAST, "--record", str(shared))
    busy.kill()
    assert proc.returncode == 0, proc.stderr

    report = run_cli("report", str(shared)).stdout
    for section in ("-- conditions", "-- envelope"):
        assert section in report
    row = {line.split()[0]: line for line in report.splitlines() if line.startswith("  ")}
    assert "SHARED machine" in report and "python" in row["busiest"]
    assert "power" in row and "thermal" in row and "throttling" in row  # shown, available or not
    assert "headroom" in row and "(limit >= " in row["headroom"]
    doc = json.loads(run_cli("report", "--json", str(shared)).stdout)
    env = doc["header"]["config"]["envelope"]
    assert env["min_headroom_mib"] > 0 and env["max_swap_in_mib"] == 200 and env["max_red_pressure_s"] == 60
    facts = doc["envelope"]["facts"]
    assert facts["other_cpu_mean"] > 0.25 and any(p["name"].startswith("python") for p in facts["other_processes"])

    diff = run_cli("diff", str(quiet), str(shared))
    assert diff.returncode == 0, diff.stderr
    assert "-- run conditions" in diff.stdout and "SHARED machine" in diff.stdout
    d = json.loads(run_cli("diff", "--json", str(quiet), str(shared)).stdout)
    assert d["candidate"]["conditions"]["other load"] == "shared"
    if d["baseline"]["conditions"]["other load"] == "quiet":  # the build machine is shared too
        assert {"path": "other load", "baseline": "quiet", "candidate": "shared", "note": ""} in d["conditions"]

    gate = run_cli("gate", "--json", "--baseline", str(quiet), "--candidate", str(shared))
    assert gate.returncode in (0, 1), gate.stderr
    checks = {c["name"]: c for c in json.loads(gate.stdout)["checks"]}
    # one check per line of the brief's checklist
    for name in ("headroom", "red pressure", "swap-ins", "thermal", "power", "other load", "acceptance drift", "outputs"):
        assert name in checks, name
    assert all(checks[n]["brief"] for n in ("headroom", "red pressure", "swap-ins", "thermal", "power", "other load", "acceptance drift"))
    assert checks["other load"]["flagged"] is True and checks["other load"]["value"] > 0.25
    assert checks["headroom"]["passed"] is True and checks["swap-ins"]["passed"] is True


def soak(out, *extra: str) -> subprocess.CompletedProcess:
    return run_cli(
        "soak", "--mode", "spec", "--k", "4", "--max-tokens", "16", "--threads", "1", "--window", "2",
        "--duration", "10", "--out", str(out), "--json", *extra, timeout=240,
    )


def test_soak_with_a_disagreeing_draft_fails_by_the_window_rule(two_prompts, tmp_path, model_path):  # noqa: F811
    # the embedded model drafts for itself, sampled hot: its drafts rarely match greedy targets
    proc = soak(tmp_path / "low", "--draft", model_path, "--draft-temperature", "5")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["low_acceptance_windows"] > 2
    assert any(r.startswith("acceptance below 0.4 in") for r in doc["reasons"]), doc["reasons"]
    assert {c["name"] for c in doc["envelope_checks"]} >= {"headroom", "red pressure", "swap-ins", "throttling", "power", "other load"}


def test_soak_at_normal_acceptance_passes_the_window_rule(two_prompts, tmp_path, model_path):  # noqa: F811
    # the same model drafting greedily for a greedy target: its drafts are the target's tokens
    proc = soak(tmp_path / "normal", "--draft", model_path)
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["acceptance_rate"] > 0.8 and doc["low_acceptance_windows"] == 0
    assert not any("acceptance" in r for r in doc["reasons"]), doc["reasons"]
    assert not any(r.startswith("envelope:") for r in doc["reasons"]), doc["reasons"]
    text = run_cli("soak", "--analyze", str(tmp_path / "normal"), "--window", "2")
    assert "acceptance drift" in text.stdout and "envelope and drift:" in text.stdout
