"""The sweep view (``spectui.ui.sweep``): the real ``run_sweep`` on the embedded model in the
app, stopping it with ``q`` in the middle, and snapshots of its layout.

The live tests run the tiniest real plan (one short prompt, AR and K=2, one round, 16 tokens)
on one llama.cpp thread. Where a test must press ``q`` while a run is in flight, a
``GatedEngine`` holds the second run after a few real steps until the stop arrives, so the test
never races the model. The snapshots feed the screen a table aggregated from the checked-in
recordings (real runs, no engine), so nothing on them depends on this machine.
"""

from __future__ import annotations

import os
import threading

import pytest
from textual.widgets import ProgressBar

from spectui.format import DASH
from spectui.lab.sweep import SweepPlan, SweepProgress, SweepResult, make_points
from spectui.lab.sweep_report import COLUMNS, format_table
from spectui.lab.sweep_table import SweepRun, aggregate
from spectui.metrics.stats import summarize
from spectui.prompts import list_prompts
from spectui.recording.reader import read_recording
from spectui.recording.schema import Step
from spectui.ui.launch import make_sweep_app
from spectui.ui.screens.sweep import SweepScreen

from .conftest import FIXED_AR, FIXED_SPEC, REPO, WAIT_S, GatedEngine, real_config, visible, wait_thread, wait_until

SIZE = (120, 30)
PROMPT_NAME = "short-greeting"  # a short prompt: a short prefill on a busy machine


def tiny_plan() -> tuple[SweepPlan, list]:
    """One prompt, AR then K=2, one round: two runs."""
    prompts = [p for p in list_prompts() if p.name == PROMPT_NAME]
    assert prompts, f"prompts/{PROMPT_NAME}.txt is missing"
    plan = SweepPlan(
        base=real_config(),  # n-gram drafter, greedy, one llama.cpp thread
        prompts=[PROMPT_NAME],
        tiers={PROMPT_NAME: prompts[0].tier},
        points=make_points(k_values="2"),
        repeats=1,
    )
    return plan, prompts


def report_cells(result: SweepResult, tier: str) -> dict[str, list[str]]:
    """The cells ``format_table`` prints for a tier: point label -> the row's non-empty cells."""
    lines = format_table(result).splitlines()
    start = lines.index(next(line for line in lines if line.startswith(f"== tier {tier} ")))
    header, rows = lines[start + 1], []
    assert header.split()[0] == COLUMNS[0][0]
    for line in lines[start + 3 :]:
        if not line or line.startswith("knee:"):
            break
        rows.append(line.split())  # no cell has a space; the CI cell is empty with one run
    return {cells[0]: cells for cells in rows}


@pytest.mark.asyncio
async def test_sweep_runs_in_the_view_and_fills_the_table(tmp_path):
    plan, prompts = tiny_plan()
    app = make_sweep_app(plan, prompts, str(tmp_path), max_tokens=16)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.state in ("done", "stopped", "error"), "the sweep to end")
        assert app.state == "done", app.error
        screen = app.screen
        assert isinstance(screen, SweepScreen)
        bar = screen.query_one("#sweep-bar", ProgressBar)
        assert bar.total == plan.total_runs == 2
        assert bar.progress == bar.total

        result = app.result
        assert result is not None and result.complete
        tier = plan.tiers[PROMPT_NAME]
        shown = screen.table_cells(tier)
        printed = report_cells(result, tier)
        assert sorted(printed) == ["AR", "K=2"]
        for label in ("AR", "K=2"):
            key = "ar=AR" if label == "AR" else "k=2"
            assert [c for c in shown[key] if c] == printed[label]

        text = await visible(pilot)
        assert f"done in {result.elapsed_s:.0f} s" in text
        assert "knee: " in text
        for run in result.runs:  # every run recorded, and its recording is a whole run
            events = read_recording(tmp_path / run.file).events
            assert summarize(events).n_tokens > 0
        await pilot.press("q")
    assert app.return_value == 0


class HoldSecondRun(GatedEngine):
    """The real engine; the first run goes through, the second is held after two real steps
    until the test releases it (so the test sees the screen while the stop is pending)."""

    def __init__(self, engine) -> None:  # noqa: ANN001
        super().__init__(engine, hold_after=2)
        self.release = threading.Event()

    def run(self, config, *, stop=None):  # noqa: ANN001, ANN201
        self.runs += 1
        steps = 0
        for ev in self.engine.run(config, stop=stop):
            yield ev
            if self.runs > 1 and type(ev) is Step:
                steps += 1
                if steps == self.hold_after:
                    self.holding.set()
                    self.release.wait(WAIT_S)


@pytest.mark.asyncio
async def test_q_stops_after_the_run_in_flight_and_keeps_the_recordings(tmp_path):
    from spectui.engine.embedded import Engine

    engines: list[HoldSecondRun] = []

    def load(config):  # noqa: ANN001, ANN202
        engines.append(HoldSecondRun(Engine.load(config)))
        return engines[-1]

    plan, prompts = tiny_plan()
    app = make_sweep_app(plan, prompts, str(tmp_path), max_tokens=16, load_engine=load)
    async with app.run_test(size=SIZE) as pilot:
        await wait_thread(lambda: bool(engines) and engines[0].holding.is_set(), "the second run to be held")
        await wait_until(pilot, lambda: app.progress is not None and app.progress.done == 1, "the first run's row")
        assert "run 2/2:" in await visible(pilot, "#sweep-run")
        cells = app.screen.table_cells(plan.tiers[PROMPT_NAME])  # filled in place: AR done, K=2 not yet
        assert cells["ar=AR"][1] == "1" and cells["k=2"][1:] == [DASH] * (len(COLUMNS) - 1)
        await pilot.press("q")
        assert app.stop.is_set()
        assert "stopping after this run" in await visible(pilot, "#sweep-status")
        engines[0].release.set()  # the held run goes on, sees the stop at its next step
        await wait_until(pilot, lambda: not app.is_running, "the app to quit once the sweep ended")
    assert app.return_value == 130
    assert app.state == "stopped", app.error
    assert engines[0].closed  # the sweep thread closed the engine before the app went
    result = app.result
    assert result is not None and not result.complete
    # the finished run stays in the table and on disk; the cut one stays on disk only
    assert [run.prompt for run in result.runs] == [PROMPT_NAME] and result.runs[0].knob == "ar"
    first = read_recording(tmp_path / result.runs[0].file).events
    assert summarize(first).n_tokens > 0 and first[-1].reason != "interrupted"
    cut = sorted(set(f.name for f in tmp_path.glob("*.spectui")) - {result.runs[0].file})
    assert len(cut) == 1 and read_recording(tmp_path / cut[0]).events[-1].reason == "interrupted"
    assert (tmp_path / "sweep.json").is_file()


# -- snapshots: the layout, fed a table aggregated from the checked-in recordings ----------------


def fixed_result(*, done: int) -> tuple[SweepPlan, SweepResult, SweepProgress]:
    """Two tiers (memo, copy) x AR, K=4, one round; the first ``done`` runs reuse the checked-in
    AR and K=4 recordings (real runs of the embedded model), so the numbers are measured ones."""
    spec_config = read_recording(FIXED_SPEC).header.config
    plan = SweepPlan(
        base=spec_config,
        prompts=["load-technical-memo", "load-typo-fix"],
        tiers={"load-technical-memo": "memo", "load-typo-fix": "copy"},
        points=make_points(k_values=str(spec_config.draft.fixed_k)),
        repeats=1,
    )
    order = [(name, point) for name in plan.prompts for point in plan.points]
    runs, summaries = [], {}
    for i, (name, point) in enumerate(order[:done]):
        path = FIXED_AR if point.knob == "ar" else FIXED_SPEC
        runs.append(
            SweepRun(index=i, round=0, tier=plan.tiers[name], prompt=name, knob=point.knob, value=point.value,
                     file=os.path.relpath(path, REPO))
        )
        summaries[i] = summarize(read_recording(path).events)
    rows, knees = aggregate(runs, summaries)
    elapsed = 10.0 * done  # a made-up clock: these runs were not timed as one sweep
    result = SweepResult(
        plan=plan, folder="recordings/sweep-fixed", runs=runs, rows=rows, knees=knees,
        complete=done == plan.total_runs, elapsed_s=elapsed,
    )
    nxt = "" if done == len(order) else f"{order[done][0]} {order[done][1].label} (round 1)"
    eta = elapsed / done * (len(order) - done) if done else float("nan")
    return plan, result, SweepProgress(done=done, total=len(order), elapsed_s=elapsed, eta_s=eta, current=nxt)


def fixed_app(done: int):  # noqa: ANN201
    plan, result, progress = fixed_result(done=done)

    def no_engine(_config):  # noqa: ANN001, ANN202 - the snapshot must never load a model
        raise AssertionError("the snapshot loaded an engine")

    app = make_sweep_app(plan, [], result.folder, max_tokens=160, load_engine=no_engine, autostart=False)

    async def feed(pilot) -> None:  # noqa: ANN001
        await pilot.pause()
        app.show(progress, result)  # the path the sweep thread's updates take
        if result.complete:
            app.finish(result)
        await pilot.pause()

    return app, feed


@pytest.fixture
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)  # themes/ is read relative to the repository


@pytest.mark.usefixtures("_repo_cwd")
class TestSweepSnapshots:
    def test_mid_sweep(self, snap_compare):
        app, feed = fixed_app(done=2)
        assert snap_compare(app, terminal_size=(120, 30), run_before=feed)

    def test_done_80_columns(self, snap_compare):
        app, feed = fixed_app(done=4)
        assert snap_compare(app, terminal_size=(80, 24), run_before=feed)

