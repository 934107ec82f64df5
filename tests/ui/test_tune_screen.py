"""The tune screen: ``t`` in the dashboard shows the latest stored ``spectui tune`` result for
the dashboard's target (the curve, the plan per tier, the settings, the charts), says so
when there is none, and runs a short tune from the screen as a job on the dashboard's engine
thread, on the engine its sessions use.

The stored result is real: a short ``run_tune`` on the embedded model (one prompt, 16
tokens, no check rounds, a context too short for the long curve), kept in a temporary
``XDG_CACHE_HOME``. Only the tune-now test loads an engine in the dashboard.
"""

from __future__ import annotations

import msgspec
import pytest
from textual.widgets import Static

from spectui.prompts import find_prompt
from spectui.tune import store
from spectui.tune.report import to_json
from spectui.ui.launch import make_app
from spectui.ui.screens import tune as tune_screen
from spectui.ui.screens.tune import TuneScreen, target_key
from spectui.ui.state import RunState
from tests.conftest import seed_calibrations

from .conftest import real_config, visible, wait_until

SIZE = (160, 60)


def config():
    c = real_config()
    # no long-context curve (the context is too short for it): seconds, not a minute
    return msgspec.structs.replace(c, backend=msgspec.structs.replace(c.backend, n_ctx=1024))


def tiny_plan():
    from spectui.tune.runner import TunePlan

    return TunePlan(specs=[find_prompt("short-greeting")], max_tokens=16, reps=0)


# ``tuned``: the session's real tune result (tests/conftest.py), made with these settings and
# this plan; the tune-kill test keeps it as the previous result


@pytest.fixture
def cache(tmp_path, monkeypatch, calibrations):
    seed_calibrations(calibrations, tmp_path / "cache")  # no tune result in it, only calibrations
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def no_engine(_config):  # noqa: ANN001, ANN202 - the tune screen never uses the dashboard's engine
    raise AssertionError("the dashboard loaded an engine")


def detail(app) -> str:  # noqa: ANN001
    return str(app.screen.query_one("#tune-detail", Static).render())


@pytest.mark.asyncio
async def test_t_shows_the_stored_result(tuned, cache):
    assert store.save_result(tuned) is not None
    # the key the screen computes without a model is the one the engine stored under
    assert target_key(config()) == tuned.key
    app = make_app(config(), record=False, engine_factory=no_engine)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TuneScreen) and app.screen.loaded, "the stored result", 60)
        screen = app.screen
        assert screen.key == tuned.key and screen.result is not None
        # the stored result read back is the object the run built (NaN is null in JSON: compare as JSON)
        assert to_json(screen.result) == to_json(tuned)
        text = await visible(pilot)
        assert f"tune: {screen._target()}" in text
        assert "(Q4_1), 1 threads, drafter ngram" in text and tuned.measured_at in text
        assert "verify cost: evaluating n tokens at once" in text
        row = next(line for line in text.splitlines() if "prompt depth" in line)
        assert f"{tuned.curve.cost(2):.2f}" in row and f"{tuned.curve.cost(16):.2f}" in row
        assert "long context" not in text  # none measured
        plan = tuned.tiers[0]
        tier_row = next(line for line in text.splitlines() if line.strip().startswith(plan.tier + " ") and plan.best.label() in line)
        assert f"{plan.best_speedup:.2f}x" in tier_row  # predicted; measured "-" (no check rounds)
        # and what the weights allow: the copying and perfect-drafter ceilings
        assert "copying at best" in text and "perfect drafter" in text
        assert tier_row.split()[-2:] == [f"{plan.copy_ceiling:.2f}x", f"{plan.perfect_ceiling:.2f}x"], tier_row
        body = detail(app)
        assert plan.verdict in body and plan.verdict[:40] in text
        assert "settings to use" in body and "spectui run --mode spec" in body
        assert "verify cost (one-token evaluations)" in body and "predicted speedup vs AR" in body  # the charts
        await pilot.press("escape")
        assert not isinstance(app.screen, TuneScreen)


@pytest.mark.asyncio
async def test_no_result_says_so_and_refuses_to_tune_during_a_session(cache):
    app = make_app(config(), record=False, engine_factory=no_engine)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TuneScreen) and app.screen.loaded, "the empty state", 60)
        text = await visible(pilot)
        assert "no result for" in text and "Press r to tune now" in text
        assert app.screen.result is None
        app.controller.state = RunState.RUNNING  # a session under way
        await pilot.press("r")
        await pilot.pause()
        assert app.screen.tuning is None
        assert any("a session is running" in n.message for n in app._notifications)
        app.controller.state = RunState.IDLE
        await pilot.press("t")
        assert not isinstance(app.screen, TuneScreen)


@pytest.mark.asyncio
async def test_r_tunes_from_the_screen_and_stores_the_result(cache, monkeypatch):
    monkeypatch.setattr(tune_screen, "short_plan", tiny_plan)
    app = make_app(config(), record=False)
    seen: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TuneScreen) and app.screen.loaded, "the empty state", 60)
        screen = app.screen
        await pilot.press("r")
        assert screen.tuning is not None
        # the UI keeps answering while the engine measures: progress lands in the title
        await wait_until(pilot, lambda: seen.append(screen.status) or screen.result is not None or "failed" in screen.status,
                         "the tune to finish")
        assert screen.result is not None, screen.status
        assert any(s.startswith("tuning ") and "verify cost" in s for s in seen)
        stored = store.load_result(screen.key)
        assert stored is not None and stored.measured_at == screen.result.measured_at
        assert stored.tiers[0].tier == "short"
        text = await visible(pilot)
        assert "plan per tier" in text and "r tunes again" in text
        assert app.controller.runner.loads == 1  # the tune ran on the dashboard's engine thread
