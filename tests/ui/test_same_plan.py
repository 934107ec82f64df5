"""Same settings, same plan: a headless run and a dashboard run of one configuration draft
the same blocks and emit the same tokens.

The dashboard turns the fallback policy on by default and headless leaves it off; a policy
that has not acted must not change what is drafted (its top rung used to cap the cost-aware K
at the configured K: 41 tokens drafted instead of 56 on load-typo-fix). ``--deterministic``
prices blocks by the cost seed alone (``learn_cost`` off), so the K of every step is a
function of the output, the settings and this host's verify-cost curve. The curve is pinned
here (one a CPU thread measures with the shipped Q4_1): a host whose own measured curve says no
block pays (one CI host did: 0 tokens drafted) would otherwise compare two plans of plain AR.
"""

from __future__ import annotations

import pytest

from spectui.cli import build_parser
from spectui.cli.run_flags import config_from_args
from spectui.models.cost_curves import CACHE_NAME, CostCurve, curve_key, save_curve
from spectui.paths import cache_dir
from spectui.recording.reader import read_recording
from spectui.recording.schema import Step
from spectui.ui.launch import make_app

from .conftest import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.ui]

#: a copy: on one thread with the shipped Q4_1 (a block of n costs about 0.65 n tokens) the
#: cost-aware K drafts where a copy is sure; load-typo-fix's proposals never get that sure
FLAGS = ["run", "--prompt-name", "copy-quote-paragraph", "--mode", "spec", "--deterministic", "--max-tokens", "96"]
#: relative cost of a block of n tokens, n = 1..17 (the longest block a run measures a seed for)
PINNED_CURVE = (1.0, *(0.65 * n for n in range(2, 18)))


def plan_of(path) -> tuple[list[int], list[int], int]:
    """(K per step, tokens, tokens drafted) of a recording."""
    steps = [e for e in read_recording(path).events if type(e) is Step]
    return [s.k for s in steps], [t for s in steps for t in s.tokens], sum(s.drafted for s in steps)


@pytest.mark.asyncio
async def test_headless_and_dashboard_run_the_same_plan(tmp_path, model_path, calibrations):  # --deterministic: calibrated once
    from tests.conftest import run_cli

    # a short first run says which weights and settings the runs load: the curve's key
    probe = tmp_path / "probe.spectui"
    proc = run_cli(*FLAGS[:-1], "8", "--headless", "--record", str(probe))
    assert proc.returncode == 0, proc.stderr
    artifacts = read_recording(probe).header.artifacts
    key = curve_key(artifacts.target.sha256, artifacts.runtime["backend"],
                    int(artifacts.offload["n_threads"]), int(artifacts.offload["n_gpu_layers"]))
    stored = cache_dir() / CACHE_NAME
    before = stored.read_bytes() if stored.exists() else None
    save_curve(key, CostCurve(relative=PINNED_CURVE, source="tune"))
    try:
        await _compare_plans(tmp_path, run_cli)
    finally:  # the session's other tests see the curve this host measured
        if before is None:
            stored.unlink(missing_ok=True)
        else:
            stored.write_bytes(before)


async def _compare_plans(tmp_path, run_cli) -> None:  # noqa: ANN001
    headless = {}
    for fallback in ("off", "on"):
        path = tmp_path / f"headless-{fallback}.spectui"
        proc = run_cli(*FLAGS, "--headless", "--fallback", fallback, "--record", str(path))
        assert proc.returncode == 0, proc.stderr
        headless[fallback] = plan_of(path)

    args = build_parser().parse_args(FLAGS)
    config = config_from_args(args, fallback_default=True)  # what `spectui run` opens the dashboard with
    assert config.policy.enabled
    app = make_app(config, recordings_dir=tmp_path / "dashboard")
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("r")
        made = lambda: sorted((tmp_path / "dashboard").glob("*.spectui"))  # noqa: E731
        await wait_until(pilot, lambda: made() and not app.controller.running, "the dashboard's run")
        assert len(made()) == 1
        dashboard = plan_of(made()[0])

    ks, tokens, drafted = headless["off"]
    assert drafted > 0 and len(tokens) > 20
    assert headless["on"] == headless["off"], "the fallback policy changed the plan before it acted"
    assert dashboard == headless["off"], "the dashboard ran another plan than headless"
