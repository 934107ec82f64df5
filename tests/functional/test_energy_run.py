"""Energy per token on real runs of the embedded model: an AR and a speculative session recorded
while ``SPECTUI_RAPL_ROOT`` points the RAPL reader at a fixture tree whose package counter a
test thread advances (as the kernel's would), then ``report``, ``diff`` and ``gate`` on them as a
user runs them; and a run on a machine without counters, which records why. NVML: only where
an NVIDIA GPU answers (a lent device), never CI."""

from __future__ import annotations

import json

import pytest

from spectui.metrics.energy import open_energy
from spectui.metrics.energy_nvml import NvmlReader
from spectui.metrics.energy_session import RAPL_ROOT_ENV, session_energy
from spectui.recording.reader import read_recording
from spectui.sessions.record import record_session
from tests.backends.test_sessions import config_for
from tests.conftest import run_cli
from tests.unit.test_energy_session import AdvancingCounter

pytestmark = pytest.mark.slow

WATTS = 15.0


@pytest.fixture(scope="module")
def recorded(engine, tmp_path_factory) -> dict[str, str]:
    """An AR and an n-gram speculative session of 24 tokens, recorded over a counter at 15 W."""
    folder = tmp_path_factory.mktemp("energy-runs")
    paths = {}
    with pytest.MonkeyPatch.context() as mp, AdvancingCounter(folder / "powercap", WATTS):
        mp.setenv(RAPL_ROOT_ENV, str(folder / "powercap"))
        for mode in ("ar", "spec"):
            paths[mode] = str(folder / f"{mode}.spectui")
            list(record_session(engine, config_for(engine, mode=mode, max_tokens=24), paths[mode]))
    return paths


def test_a_real_run_records_joules_per_token(recorded):
    for path in recorded.values():
        e = session_energy(read_recording(path).events)
        assert e is not None and e.why_not == "" and e.sources.startswith("RAPL"), e
        assert e.j_per_token is not None and e.j_per_token > 0 and e.readings >= 2
        assert e.decode_watts is not None and WATTS / 3 < e.decode_watts < WATTS * 3  # late wake-ups on a loaded machine


def test_report_diff_and_gate_show_it(recorded):
    report = run_cli("report", recorded["ar"])
    assert report.returncode == 0, report.stderr
    assert "J/token" in next(x for x in report.stdout.splitlines() if x.strip().startswith("energy"))
    assert json.loads(run_cli("report", "--json", recorded["spec"]).stdout)["energy"]["j_per_token"] > 0

    diff = run_cli("diff", recorded["ar"], recorded["spec"])
    assert diff.returncode == 0, diff.stderr
    row = next(x for x in diff.stdout.splitlines() if x.strip().startswith("J/token"))
    assert row.rstrip().endswith("x")  # the candidate / baseline ratio
    assert json.loads(run_cli("compare", "--json", recorded["ar"], recorded["spec"]).stdout)["energy"]["ratio"] > 0

    gate = ["gate", "--baseline", recorded["ar"], "--candidate", recorded["spec"], "--json"]
    energy = lambda out: {c["name"]: c for c in json.loads(out.stdout)["checks"]}["energy"]  # noqa: E731
    assert energy(run_cli(*gate, "--max-energy-ratio", "100"))["passed"] is True
    tight = run_cli(*gate, "--max-energy-ratio", "0.001")
    assert energy(tight)["passed"] is False and tight.returncode == 1
    bad = run_cli(*gate, "--max-energy-ratio", "-1")
    assert bad.returncode == 2 and bad.stderr.strip() == "spectui: error: max-energy-ratio must be > 0, got -1.0"


def test_a_run_without_counters_records_why(engine, tmp_path, monkeypatch):
    monkeypatch.delenv(RAPL_ROOT_ENV, raising=False)
    if open_energy().available:
        pytest.skip("this machine has an energy counter: the 'not available here' case needs a bare VM")
    path = tmp_path / "bare.spectui"
    list(record_session(engine, config_for(engine, mode="ar", max_tokens=4), path))
    e = session_energy(read_recording(path).events)
    assert e is not None and e.why_not.startswith("not available here: ") and e.joules is None and e.j_per_token is None
    report = run_cli("report", str(path))
    assert any(x.split(None, 1) == ["energy", e.why_not] for x in report.stdout.splitlines()), report.stdout


def test_nvml_measures_a_run_where_a_gpu_answers(engine, tmp_path):
    """A lent GPU machine only: NVML's total energy over a real (CPU) run grows, idle power at least."""
    try:
        NvmlReader().close()
    except Exception as exc:  # noqa: BLE001 - NotAvailable, or a driver without the counter
        pytest.skip(f"no NVIDIA GPU with an energy counter here ({exc})")
    path = tmp_path / "nvml.spectui"
    list(record_session(engine, config_for(engine, mode="ar", max_tokens=16), path))
    e = session_energy(read_recording(path).events)
    assert e is not None and "NVML" in e.sources and e.joules is not None and e.joules > 0 and e.j_per_token is not None
