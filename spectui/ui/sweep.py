"""The dashboard's sweep view: ``spectui sweep`` in a terminal.

A progress bar with the ETA and the run in flight, then one table per prompt tier that fills
in as runs finish (the columns are ``sweep_report.COLUMNS``, so the view and the printed table
show the same cells), the knee of each tier's K curve, and at the end where the recordings are.

Threads: the sweep (``lab.sweep.run_sweep``) runs in one Textual *thread* worker. Its
``on_run`` hook, called in that thread after every whole run, posts the progress and a
snapshot of the table with ``post_message`` (thread-safe, never blocks). The message's
``can_replace`` lets Textual fold a burst of them into the newest, so a slow UI skips stale
updates instead of queueing them, and the engine never waits for the UI (``call_from_thread``
would make it wait: never used here). The view hears about whole runs
only, never tokens; between runs a 1 Hz timer moves the elapsed time and the ETA.

``q`` (or ctrl+c) sets the sweep's stop event: the run in flight ends at its next step, the
sweep ends there with what it recorded, and the app quits with 130 (0 if it had completed).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import msgspec
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, ScrollableContainer, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, ProgressBar, Static

from spectui.config import RunConfig
from spectui.format import DASH
from spectui.lab.sweep import SweepPlan, SweepPoint, SweepProgress, SweepResult, run_sweep
from spectui.lab.sweep_report import COLUMNS
from spectui.prompts import PromptSpec
from spectui.sessions.open import EngineFactory
from spectui.ui.background import BackgroundJobApp
from spectui.ui.labels import backend_label, model_label
from spectui.ui.themes import register_themes

#: How long ``launch.run_sweep_view`` waits, after the app closed, for the sweep thread to close the
#: engines (the run in flight ends at its next step; a step is milliseconds to seconds).
JOIN_TIMEOUT_S = 60.0


def clock(seconds: float) -> str:
    """``1m05s`` (``—`` when unknown): the headless progress line's ETA format."""
    if seconds != seconds:
        return DASH
    s = max(0, int(round(seconds)))
    return f"{s // 60}m{s % 60:02d}s"


def _row_key(point: SweepPoint) -> str:
    return f"{point.drafter}@{point.knob}={point.value}" if point.drafter else f"{point.knob}={point.value}"


def tier_prompts(plan: SweepPlan) -> dict[str, list[str]]:
    """Tier -> its prompt names (sorted, as ``format_table`` lists them), tiers in plan order."""
    out: dict[str, list[str]] = {}
    for name in plan.prompts:
        out.setdefault(plan.tiers[name], []).append(name)
    return {tier: sorted(names) for tier, names in out.items()}


def plan_lines(plan: SweepPlan, folder: str, max_tokens: int | None) -> tuple[str, str]:
    """The header: what is swept (tiers, points, repeats, runs, folder), then the base setup."""
    tiers = ", ".join(tier_prompts(plan))
    points = ", ".join(p.label for p in dict.fromkeys(plan.points))
    first = (
        f"sweep · tiers {tiers} · points {points} · {plan.repeats} repeat{'s' * (plan.repeats != 1)} · "
        f"{plan.total_runs} runs → {folder}"
    )
    base: RunConfig = plan.base
    # the base drafting as config labels it: a cost-aware K reads "K=1..16 adaptive", not its start
    drafting = base.draft.label(model=model_label(base.draft.source))
    sampling = "greedy" if base.sampling.temperature == 0 else f"T={base.sampling.temperature:g}"
    budget = f"max {max_tokens} tokens" if max_tokens else "each prompt's token ceiling"
    backend = backend_label(base.backend.name)
    second = f"{model_label(base.target)} · {backend} · {drafting} · {sampling} · {budget}"
    return first, second


def _cells(row) -> list[Text]:  # noqa: ANN001 - SweepRow
    # format_table's alignment: the point on the left, the numbers on the right
    return [Text(get(row), justify="left" if i == 0 else "right") for i, (_, get) in enumerate(COLUMNS)]


class SweepView(Protocol):
    """What the sweep screen may read (``SweepApp`` is one)."""

    plan: SweepPlan
    folder: str
    max_tokens: int | None
    state: str
    progress: SweepProgress | None
    result: SweepResult | None

    def progress_text(self, since: float = 0.0) -> str: ...

    def status_text(self) -> str: ...


class SweepScreen(Screen[None]):
    """Header, progress, a table per tier with its knee line, the status line, the footer.

    ``redraw`` is the one path from the view's state to the screen; a table cell is written
    only when its text changed.
    """

    AUTO_FOCUS = "#sweep-tables"  # arrows and page keys scroll the tables

    def __init__(self, view: SweepView) -> None:
        super().__init__()
        self.view = view
        self._sections: dict[str, tuple[DataTable[Text], Static]] = {}
        self._drawn: dict[tuple[str, str], tuple[str, ...]] = {}  # (tier, row key | "knee") -> texts

    def compose(self) -> ComposeResult:
        view = self.view
        first, second = plan_lines(view.plan, view.folder, view.max_tokens)
        yield Static(first, id="sweep-plan", markup=False)
        yield Static(second, id="sweep-base", markup=False)
        with Horizontal(id="sweep-progress"):
            yield ProgressBar(total=view.plan.total_runs, show_eta=False, id="sweep-bar")
            yield Static("", id="sweep-run", markup=False)
        with ScrollableContainer(id="sweep-tables"):  # one scroll, both ways, for every table
            for tier, names in tier_prompts(view.plan).items():
                with Vertical(classes="sweep-tier"):
                    yield Static(f"tier {tier} ({', '.join(names)})", classes="sweep-tier-title", markup=False)
                    table: DataTable[Text] = DataTable(show_cursor=False, cursor_type="none", classes="sweep-table")
                    table.can_focus = False  # the scroll container takes the keys
                    knee = Static("", classes="sweep-knee", markup=False)
                    self._sections[tier] = (table, knee)
                    yield table
                    yield knee
        yield Static("", id="sweep-status", markup=False)
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        view = self.view
        has_k = any(p.knob == "k" for p in view.plan.points)
        for table, knee in self._sections.values():
            for i, (name, _) in enumerate(COLUMNS):
                table.add_column(Text(name, justify="left" if i == 0 else "right"), key=name)
            # every point's row from the start, empty until its first run: the table fills in
            for point in dict.fromkeys(view.plan.points):
                pending = [Text(point.label)] + [Text(DASH, justify="right") for _ in COLUMNS[1:]]
                table.add_row(*pending, key=_row_key(point))
            knee.display = has_k  # no K knob, no knee
        self.redraw()

    def redraw(self) -> bool:
        """Draw the view's state; False if the widgets are not there (yet, or any more)."""
        view = self.view
        try:
            bar = self.query_one("#sweep-bar", ProgressBar)
            if view.progress is not None:
                bar.update(total=view.progress.total, progress=view.progress.done)
            # one fixed row each: no layout pass (a relayout measures every table again)
            self.query_one("#sweep-run", Static).update(view.progress_text(), layout=False)
            self.query_one("#sweep-status", Static).update(view.status_text(), layout=False)
            self.set_class(view.state in ("stopping", "stopped"), "-stopped")
            self.set_class(view.state == "error", "-error")
            if view.result is not None:
                self._draw_result(view.result)
        except NoMatches:
            return False
        return True

    def _draw_result(self, result: SweepResult) -> None:
        for row in result.rows:
            section = self._sections.get(row.tier)
            if section is None:
                continue
            table = section[0]
            key = _row_key(SweepPoint(row.knob, row.value, row.drafter))
            cells = _cells(row)
            texts = tuple(c.plain for c in cells)
            drawn = self._drawn.get((row.tier, key))
            if drawn == texts:
                continue
            if key not in table.rows:
                table.add_row(*cells, key=key)
            else:
                for (name, _), cell, old in zip(COLUMNS, cells, drawn or (None,) * len(COLUMNS)):
                    if cell.plain != old:
                        table.update_cell(key, name, cell, update_width=True)
            self._drawn[(row.tier, key)] = texts
        for tier, (_, knee_line) in self._sections.items():
            # one knee per K curve: a grid has one per drafter
            details = [k.detail for k in result.knees if k.tier == tier]
            text = "\n".join(f"knee: {d}" for d in details) if details else f"knee: {DASH} (once K points have run)"
            if self._drawn.get((tier, "knee")) != (text,):
                knee_line.update(text)
                self._drawn[(tier, "knee")] = (text,)

    def table_cells(self, tier: str) -> dict[str, list[str]]:
        """A tier's table as text, row key -> cells (what the tests compare with the report)."""
        table = self._sections[tier][0]
        return {
            str(key.value): [c.plain if isinstance(c, Text) else str(c) for c in table.get_row(key)]
            for key in table.rows
        }


class SweepApp(BackgroundJobApp):
    """Runs one sweep plan in a thread worker and shows it on a ``SweepScreen``."""

    CSS_PATH = "app.tcss"
    TITLE = "spectui sweep"
    JOB = "sweep"

    @dataclass
    class Update(Message):
        """From the sweep thread after each run: the progress and the table so far."""

        progress: SweepProgress
        result: SweepResult

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, SweepApp.Update)  # only the newest table matters

    @dataclass
    class Finished(Message):
        """The sweep thread is done: its final result, or the error that ended it."""

        result: SweepResult | None = None
        error: BaseException | None = None

    def __init__(
        self,
        plan: SweepPlan,
        prompts: Sequence[PromptSpec],
        folder: str,
        *,
        max_tokens: int | None = None,
        load_engine: EngineFactory | None = None,
        autostart: bool = True,
    ) -> None:
        super().__init__()
        self.plan = plan
        self.prompts = list(prompts)
        self.folder = str(folder)
        self.max_tokens = max_tokens
        self.load_engine = load_engine
        self.autostart = autostart
        self.sweep_done = threading.Event()  # set by the sweep thread as its very last act
        self.progress: SweepProgress | None = None
        self.result: SweepResult | None = None
        self._received_at = time.monotonic()  # when ``progress`` arrived: the ETA counts down from it
        register_themes(self)

    def get_default_screen(self) -> SweepScreen:
        return SweepScreen(self)

    def on_mount(self) -> None:
        if self.autostart:
            self.start()

    def start(self) -> None:
        self.state = "running"
        self.run_worker(self._sweep_thread, name="spectui-sweep", group="sweep", thread=True, exit_on_error=False)
        self.set_interval(1.0, self._tick)

    # -- the sweep thread -----------------------------------------------------------------------

    def _sweep_thread(self) -> None:
        try:
            kwargs = {"load_engine": self.load_engine} if self.load_engine is not None else {}
            result = run_sweep(
                self.plan,
                self.prompts,
                self.folder,
                max_tokens=self.max_tokens,
                stop=self.stop,
                on_run=self._on_run,
                **kwargs,
            )
            self.post_message(self.Finished(result=result))
        except BaseException as exc:  # noqa: BLE001 - shown in the view, raised again once the app closed
            self.post_message(self.Finished(error=exc))
        finally:
            self.sweep_done.set()

    def _on_run(self, progress: SweepProgress, result: SweepResult) -> None:
        """In the sweep thread, once per run."""
        # run_sweep replaces rows and knees wholesale and appends to runs: a copy of the runs
        # list is a consistent snapshot
        self.post_message(self.Update(progress, msgspec.structs.replace(result, runs=list(result.runs))))

    # -- the UI thread --------------------------------------------------------------------------

    def on_sweep_app_update(self, msg: Update) -> None:
        self.show(msg.progress, msg.result)

    def show(self, progress: SweepProgress, result: SweepResult) -> None:
        """Take a progress report and the table so far, and redraw (also the snapshot's way in)."""
        self.progress, self.result = progress, result
        self._received_at = time.monotonic()
        self._redraw()

    def on_sweep_app_finished(self, msg: Finished) -> None:
        self.finish(msg.result, msg.error)

    def took(self, result: SweepResult) -> None:
        if self.progress is not None:
            done = dict(elapsed_s=result.elapsed_s, eta_s=0.0, current="")
            self.progress = msgspec.structs.replace(self.progress, **done)

    def redraw_now(self) -> None:
        self._redraw()

    def _redraw(self) -> None:
        screen = self.screen
        if isinstance(screen, SweepScreen):
            screen.redraw()

    def refresh_now(self) -> None:
        """Redraw at once (the dashboard's name for it: the tests' ``visible`` calls it)."""
        self._redraw()

    def _tick(self) -> None:
        if self.state in ("running", "stopping") and isinstance(self.screen, SweepScreen):
            line = self.progress_text(time.monotonic() - self._received_at)
            self.screen.query_one("#sweep-run", Static).update(line, layout=False)

    def progress_text(self, since: float = 0.0) -> str:
        """``run 12/54: load-typo-fix K=4 (round 2) · ETA 3m10s · elapsed 5m02s``; ``since`` is how long
        ago the progress arrived (the timer's count-down between runs)."""
        p = self.progress
        if p is None:
            return f"run 1/{self.plan.total_runs}: starting…"
        elapsed = clock(p.elapsed_s + since)
        if self.state in ("done", "stopped", "error") or not p.current:
            return f"{p.done}/{p.total} runs in {elapsed}"
        eta = p.eta_s - since if p.eta_s == p.eta_s else math.nan
        return f"run {p.done + 1}/{p.total}: {p.current} · ETA {clock(eta)} · elapsed {elapsed}"

    def status_text(self) -> str:
        where = f"recordings in {self.folder}"
        if self.state == "stopping":
            return "stopping after this run…"
        if self.state == "error":
            return f"error: {self.error} · {where} · q quits"
        if self.result is not None and self.state in ("done", "stopped"):
            r = self.result
            if self.state == "done":
                return f"done in {r.elapsed_s:.0f} s · {where} · q quits"
            return f"stopped: {len(r.runs)} of {r.plan.total_runs} runs in {r.elapsed_s:.0f} s · {where} · q quits"
        return f"q stops after the run in flight · {where}"
