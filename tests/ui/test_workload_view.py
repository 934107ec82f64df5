"""The workload view's layout, from a saved workload's figures (no model, no server): the table
shows the printed table's cells, the level running fills in, the bars and knees and partings."""

from __future__ import annotations

from pathlib import Path

import pytest

from spectui.config import RunConfig
from spectui.prompts import prompts_dir
from spectui.ui.screens.workload import WorkloadScreen
from spectui.ui.workload_view import WorkloadApp
from spectui.workload.plan import LLAMA_SERVER, Setting, WorkloadPlan
from spectui.workload.report import level_row
from spectui.workload.result import LevelResult, RequestOutcome, WorkloadResult
from spectui.workload.run import Snapshot
from spectui.workload.source import read_workload

pytestmark = [pytest.mark.ui, pytest.mark.asyncio]


def levels() -> list[LevelResult]:
    def level(setting: str, ar: bool, clients: int, speedup: float, exact: str) -> LevelResult:
        return LevelResult(setting=setting, family=LLAMA_SERVER, ar=ar, clients=clients, speedup=speedup, output_tok_s=80.0,
                           requests=[RequestOutcome(index=0, exact=exact, parted_at=2, why="parts at token 2: the load's batching")],
                           counts={exact: 1})
    return [level("llama-server AR", True, 1, float("nan"), "reference"), level("llama-server ngram-mod", False, 1, 1.4, "identical"),
            level("llama-server AR", True, 2, float("nan"), "batched"), level("llama-server ngram-mod", False, 2, 0.9, "batched")]


async def test_the_view_shows_the_printed_rows_and_the_knee(tmp_path: Path) -> None:
    workload = read_workload(prompts_dir() / "workloads" / "mixed-12.jsonl")
    settings = (Setting("llama-server AR", LLAMA_SERVER, RunConfig(mode="ar")), Setting("llama-server ngram-mod", LLAMA_SERVER, RunConfig()))
    plan = WorkloadPlan(workload=workload, settings=settings, clients=(1, 2))
    app = WorkloadApp(plan, tmp_path, lambda *_: (None, None, lambda: ""), autostart=False)  # type: ignore[arg-type, return-value]
    done = levels()
    result = WorkloadResult(workload="mixed-12", path="", n_requests=12, settings=[s.label for s in settings], levels=done[:3],
                            knees={"llama-server ngram-mod": "llama-server ngram-mod pays up to 1 client here: 1.40x at 1"})
    async with app.run_test(size=(160, 40)) as pilot:
        app.show(Snapshot(done=40, total=48, in_flight={0: 5, 1: 7}, result=result))
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, WorkloadScreen)
        cells = screen.table_cells()
        assert list(cells.values()) == [level_row(lv) for lv in done[:3]]
        text = " ".join(str(w.render()) for w in screen.query("Static"))
        assert "client 0: request 5" in text and "client 1: request 7" in text and "40/48 requests" in text
        assert "pays up to 1 client" in text and "1.40x" in text
        assert "request 0: batched: parts at token 2" in text


async def test_a_workload_that_fails_to_start_shows_why_and_q_quits(tmp_path: Path) -> None:
    """The job's thread ends on an error: the view keeps it and says so (one notice), q quits."""
    from spectui.errors import SpectuiError

    def refuse(*_: object) -> tuple:
        raise SpectuiError("llama-server exited before it was ready")

    workload = read_workload(prompts_dir() / "workloads" / "mixed-12.jsonl")
    plan = WorkloadPlan(workload=workload, settings=(Setting("llama-server AR", LLAMA_SERVER, RunConfig(mode="ar")),))
    app = WorkloadApp(plan, tmp_path, refuse)  # type: ignore[arg-type]
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.done.wait(30)
        for _ in range(50):
            await pilot.pause(0.05)
            if app.state == "error":
                break
        assert app.state == "error" and "exited before it was ready" in str(app.error)
        await pilot.press("q")
    assert app.return_value == 130
