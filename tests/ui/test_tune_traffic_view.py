"""The tune --workload view's layout, from a prepared tune that never runs (no model, no server):
what the tune reports through its own hooks (``progress``, ``on_status``, ``on_trial``) reaches
the screen as rows, counts, the leader, the budget and a plot; a result saved and loaded as
``tune-traffic.json`` ends it with the advice and the check's table; ``q`` stops the tune."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from textual.screen import Screen

from spectui.config import RunConfig
from spectui.prompts import prompts_dir
from spectui.runtime.methods import METHODS
from spectui.tune.traffic_report import AR, DEFAULT, TUNED, CheckRow, RequestRow, TrafficResult, advice, load, save
from spectui.tune.traffic_search import Status, Trial
from spectui.tune.traffic_space import Applicable, build_space
from spectui.ui.messages import JobFinished
from spectui.ui.screens.tune_traffic import DROPPED, FAILED, IN, WINNER, TrafficTuneScreen, trial_marks
from spectui.ui.tune_traffic_view import TrafficTuneApp
from spectui.workload.source import read_workload
from spectui.workload.tuning import TrafficTune

pytestmark = pytest.mark.ui

NGRAM = tuple(n for n in METHODS if n.startswith("ngram"))
SIZE = (160, 60)
COMMAND = "llama-server -m m.gguf --spec-type ngram-simple --spec-ngram-size-n 6"


def prepared(folder: Path) -> TrafficTune:
    """A tune as ``spectui tune --workload mixed-12`` prepares it: checked, nothing run."""
    workload = read_workload(prompts_dir() / "workloads" / "mixed-12.jsonl")
    cands = build_space(Applicable(accepted=NGRAM))
    return TrafficTune(base=RunConfig(), workload=workload, candidates=cands, folder=folder, budget_s=900.0,
                       space_by_method={"ngram-mod": 36, "ngram-simple": 12})


def first_rung(tune: TrafficTune) -> list[Trial]:
    """Rung 1 of 2 on a quarter of the tuning half: one setting leads, one fails to start, and
    the best quarter of the five (two) go on."""
    a, b, c, d, e = [c for c in tune.candidates if not c.is_default][:5]  # each with a knob of its own
    return [Trial(0, a, 1 / 4, 1.30, 21.0, 3), Trial(0, b, 1 / 4, 0.90, 19.0, 3), Trial(0, c, 1 / 4, 1.10, 20.0, 3),
            Trial(0, d, 1 / 4, math.nan, 2.0, 3, error="llama-server exited before it was ready"),
            Trial(0, e, 1 / 4, 0.85, 18.0, 3)]


def saved_result(folder: Path, trials: list[Trial]) -> TrafficResult:
    """A finished tune's result, through the file ``--analyze`` reads."""
    a = trials[0].candidate

    def requests(speedup: float, exact: str = "identical") -> list[RequestRow]:
        return [RequestRow(index=i, exact=exact, ms=100.0 + i, ar_ms=(100.0 + i) * speedup) for i in (1, 3, 5, 7)]

    rows = [CheckRow(role=AR, label="AR", requests=requests(1.0, "reference")),
            CheckRow(role=TUNED, label=a.label(), candidate=a.to_dict(), speedup=1.28, requests=requests(1.28),
                     command=COMMAND),
            CheckRow(role=DEFAULT, label="ngram-simple as shipped", speedup=0.81, requests=requests(0.81, "near-tie"))]
    result = TrafficResult(workload="mixed-12", path="w.jsonl", model="SmolLM2", clients=1, budget_s=900.0, search_s=240.0,
                           check_s=120.0, space=83, space_by_method={"ngram-mod": 36}, tuning=[0, 2, 4, 6], check=[1, 3, 5, 7],
                           trials=[t.to_dict() for t in trials], rows=rows, complete=True)
    save(result, folder)
    return load(folder)


def text_of(screen: Screen) -> str:
    return "\n".join(str(w.render()) for w in screen.query("Static"))


@pytest.mark.asyncio
async def test_the_view_shows_the_search_as_the_tune_reports_it(tmp_path: Path) -> None:
    tune = prepared(tmp_path)
    app = TrafficTuneApp(tune, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        tune.progress("AR on the tuning half (8 requests)")  # the tune's own hooks, as its thread calls them
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TrafficTuneScreen)
        text = text_of(screen)
        assert "tune --workload mixed-12 · at 1 client · llama-server · SmolLM2" in text and "space 83 (ngram-mod 36, ngram-simple 12)" in text
        assert "now: AR on the tuning half (8 requests)" in text and "leading: none yet" in text

        tune.searching = True
        rung1 = first_rung(tune)
        for t in rung1:
            tune.on_trial(t)
        a, b, c, d, e = (t.candidate for t in rung1)
        tune.on_status(Status(rung=1, rungs=2, tried=5, eliminated=3, space=83, leading=a.label(), leading_speedup=1.30,
                              budget_left_s=360.0))
        tune.on_trial(Trial(1, a, 1.0, 1.25, 60.0, 4))
        await pilot.pause()
        await pilot.pause()
        text = text_of(screen)
        assert "now: the search on the tuning half, rung 2 of 2" in text
        assert "rung 2/2 · tried 5 of 83 · dropped 3 · 6 trials · budget left 6.0 min" in text
        assert f"leading: {a.label()} 1.30x AR on the tuning half" in text
        assert screen.cells("#tt-trials") == [
            ["1", a.label(), "25%", "1.30x", "21 s", IN], ["1", b.label(), "25%", "0.90x", "19 s", DROPPED],
            ["1", c.label(), "25%", "1.10x", "20 s", IN],  # the best quarter goes on, measured next
            ["1", d.label(), "25%", "—", "2 s", f"{FAILED}: llama-server exited before it was ready"],
            ["1", e.label(), "25%", "0.85x", "18 s", DROPPED],
            ["2", a.label(), "100%", "1.25x", "60 s", IN]]
        plot = screen.query_one("#tt-plot")
        drawn = str(plot.render())
        assert "speedup over AR by rung" in drawn and "minutes spent" in drawn

        # the search ends, the check runs, the tune's thread hands over its result
        tune.on_trial(Trial(1, c, 1.0, 1.05, 58.0, 4))
        tune.searching = False
        tune.progress("the check half (4 requests): AR, the winner and 1 default(s)")
        app.post_message(JobFinished(result=saved_result(tmp_path, [*rung1, Trial(1, a, 1.0, 1.25, 60.0, 4)])))
        await pilot.pause()
        await pilot.pause()
        text = text_of(screen)
        result = load(tmp_path)
        assert advice(result) in text and COMMAND in text
        assert f"won the search: {a.label()} 1.25x AR" in text and "done: searched 4.0 min, checked 2.0 min" in text
        rows = screen.cells("#tt-check")
        assert [r[0] for r in rows] == [f"{a.label()} (tuned)", "ngram-simple as shipped"]
        assert rows[0][1] == "1.28x" and rows[0][3] == "4/0/0/0/0" and rows[1][3] == "0/4/0/0/0"
        assert screen.cells("#tt-trials")[-2:] == [["2", a.label(), "100%", "1.25x", "60 s", WINNER],
                                                   ["2", c.label(), "100%", "1.05x", "58 s", DROPPED]]
        assert "search: 2 rungs · tried 5 of 83 · dropped 4 · 7 trials · took 6.0 of 15 min" in text and "done · recorded in" in text
        await pilot.press("q")
    assert app.return_value == 0


@pytest.mark.asyncio
async def test_q_sets_the_tunes_stop_event_and_a_stopped_tune_exits_130(tmp_path: Path) -> None:
    """While the tune runs, q asks it to stop (its own event: the search starts no other setting)
    and the app quits once its thread hands over what was measured."""
    tune = prepared(tmp_path)
    app = TrafficTuneApp(tune, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        app.state = "running"  # as if its thread were measuring a setting
        await pilot.press("q")
        assert tune.stop.is_set() and app.state == "stopping"
        assert "stopping: the setting being measured finishes" in text_of(app.screen)
        stopped = TrafficResult(workload="mixed-12", path="", trials=[t.to_dict() for t in first_rung(tune)],
                                stopped="stopped: what was measured is kept")
        app.post_message(JobFinished(result=stopped))
        await pilot.pause()
    assert app.return_value == 130


def test_a_trials_mark_follows_the_searchs_rule(tmp_path: Path) -> None:
    """Mid-rung, a setting of the best quarter that has not run yet at the next rung is in; once
    the search stopped early, the best of its highest rung won and the rest are dropped."""
    tune = prepared(tmp_path)
    rung1 = first_rung(tune)
    assert trial_marks(rung1, 0, over=False) == [IN, IN, IN, FAILED, IN]
    assert trial_marks(rung1, 1, over=False) == [IN, DROPPED, IN, FAILED, DROPPED]
    assert trial_marks(rung1, 1, over=True) == [WINNER, DROPPED, DROPPED, FAILED, DROPPED]


@pytest.mark.asyncio
async def test_a_tune_whose_runtime_will_not_start_shows_why_and_q_quits(tmp_path: Path) -> None:
    """The tune's thread ends on an error before anything is measured (its opener refuses, so no
    server starts): the view says what it was doing and why it ended, and q quits with 130."""
    from spectui.errors import SpectuiError

    def refuse(*_: object) -> tuple:
        raise SpectuiError("llama-server exited before it was ready")

    tune = prepared(tmp_path)
    tune.opener = refuse
    app = TrafficTuneApp(tune)
    async with app.run_test(size=SIZE) as pilot:
        assert app.done.wait(30)
        for _ in range(50):
            await pilot.pause(0.05)
            if app.state == "error":
                break
        assert app.state == "error" and "exited before it was ready" in str(app.error)
        text = text_of(app.screen)
        assert "now: AR on the tuning half (8 requests)" in text and "error: llama-server exited before it was ready" in text
        await pilot.press("q")
    assert app.return_value == 130
