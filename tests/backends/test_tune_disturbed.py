"""A tune check taken while another process holds the CPU is measured again, and where the
machine stays shared it is reported as disturbed with the load figure, never as the machine's
answer (the signal ``spectui diff`` calls "SHARED machine": ``metrics.conditions``)."""

from __future__ import annotations

import subprocess
import sys

import psutil

from spectui.config import BackendConfig, RunConfig
from spectui.prompts import find_prompt
from spectui.tune.report import format_text, to_json
from spectui.tune.result import agreement
from spectui.tune.runner import REMEASURES, TunePlan, run_tune
from tests.conftest import seed_calibrations


def test_a_check_beside_busy_processes_is_measured_again_then_reported_disturbed(model_path, calibrations, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    seed_calibrations(calibrations, tmp_path / "cache")
    busy: list[subprocess.Popen] = []
    said: list[str] = []

    def progress(message: str) -> None:
        said.append(message)
        if message.startswith("check ") and not busy:  # a competing process on every core, from the check on
            busy.extend(subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(psutil.cpu_count() or 1))

    config = RunConfig(target=model_path, prompt="x", backend=BackendConfig(n_threads=1, n_ctx=1024))
    try:
        result = run_tune(config, TunePlan(specs=[find_prompt("load-typo-fix")], max_tokens=48, reps=1), progress)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    assert busy, said  # the check ran (the copy tier drafts)
    (tier,) = [p for p in result.tiers if p.measured is not None]
    assert set(tier.disturbed) == {"load-typo-fix"} and tier.disturbed["load-typo-fix"] > config.envelope.max_other_cpu
    assert sum("measuring again" in m and "SHARED machine: other processes" in m for m in said) == REMEASURES, said
    assert agreement(tier) is None  # no agreement is claimed from the load's figure
    text = format_text(result)
    assert f"{tier.tier}: checked while SHARED machine: other processes" in text and "not this machine's" in text, text
    doc = to_json(result)["tiers"][0]
    assert doc["agreement"] is None and doc["disturbed"]["load-typo-fix"] > 0.25
    assert doc["measured_while"].startswith("SHARED machine: other processes")
