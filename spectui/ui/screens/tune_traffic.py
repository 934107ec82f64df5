"""The tune --workload view's screen: what the tune is (workload, load, runtime, model, the space
by method), what it does now, the search's rung and the budget it has left, how many settings
were tried and dropped and which one leads, every trial as a row and all of them as a plot of
speedup by rung (1.0x, the runtime's AR, marked); once the check has run, the advice line and
the check half's table, the figures ``spectui tune`` prints (``spectui.tune.traffic_report``).

It reads a ``TrafficTuneView`` (``spectui.ui.tune_traffic_view.TrafficTuneApp`` is one) and
redraws from it when the app says. The trials are the search's trail on the tuning half, never
a result: the screen says so, as the printed report does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from rich.text import Text
from textual.app import ComposeResult
from textual.color import Color, ColorParseError
from textual.containers import ScrollableContainer
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from spectui.charts import Axis, Panel, Series, define_theme, render
from spectui.format import DASH
from spectui.tune.traffic_report import AR, TUNED, VERDICTS, TrafficResult, advice, advised
from spectui.tune.traffic_search import ETA, Status, Trial, survivors

#: a trial's mark: its candidate went on to the next rung (or runs at this one), stopped here,
#: failed to run, or won the search
IN, DROPPED, FAILED, WINNER = "in", "dropped", "failed", "winner"

TRIAL_COLUMNS = ("rung", "setting", "share", "speedup", "seconds", "")
TRIAL_RIGHT = {0, 2, 3, 4}
CHECK_COLUMNS = ("setting", "speedup", "95% CI", "/".join(v for v, _ in VERDICTS))
CHECK_RIGHT = {1, 2}


def trial_marks(trials: Sequence[Trial], rung_now: int, over: bool) -> list[str]:
    """Each trial's mark, by the search's own rule (``traffic_search``): a rung before the one
    running is complete, and its best quarter went on (``survivors``), even those not measured at
    the next rung yet; once the search is ``over``, the best of the highest rung won."""
    by_rung: dict[int, list[Trial]] = {}
    for t in trials:
        by_rung.setdefault(t.rung, []).append(t)
    went_on = {r: set(survivors(at, max(1, math.ceil(len(at) / ETA)))) for r, at in by_rung.items()}
    latest = {t.candidate: t.rung for t in trials}
    measured = [r for r, at in by_rung.items() if any(math.isfinite(t.speedup) for t in at)]
    top = max(measured, default=None)
    best = survivors(by_rung[top], 1) if top is not None else []
    marks = []
    for t in trials:
        if t.error or not math.isfinite(t.speedup):
            marks.append(FAILED)
        elif latest[t.candidate] > t.rung:
            marks.append(IN)
        elif over:
            marks.append(WINNER if t.rung == top and t.candidate in best else DROPPED)
        elif t.rung < rung_now:
            marks.append(IN if t.candidate in went_on[t.rung] else DROPPED)
        else:
            marks.append(IN)
    return marks


def dropped_count(trials: Sequence[Trial], marks: Sequence[str]) -> int:
    """Settings out of the search: those whose latest trial is dropped or failed."""
    latest = {t.candidate: m for t, m in zip(trials, marks)}
    return sum(1 for m in latest.values() if m in (DROPPED, FAILED))


def _x(v: float) -> str:
    return f"{v:.2f}x" if math.isfinite(v) else DASH


def trial_row(t: Trial, mark: str) -> tuple[str, ...]:
    why = mark
    if mark == FAILED and t.error:  # a setting q cut short did not fail: it was stopped
        why = t.error if t.error == "stopped" else f"{FAILED}: {t.error}"
    return (str(t.rung + 1), t.candidate.label(), f"{t.share:.0%}", _x(t.speedup), f"{t.seconds:.0f} s", why)


def check_rows(result: TrafficResult) -> list[tuple[str, ...]]:
    """The check half's table as ``spectui tune`` prints it: each setting but AR, its speedup,
    95% interval and verdict counts."""
    out: list[tuple[str, ...]] = []
    for r in result.rows:
        if r.role == AR:
            continue
        lo, hi = result.interval(r)
        ci = f"{lo:.2f}-{hi:.2f}" if math.isfinite(lo) else DASH
        label = f"{r.label} (tuned)" if r.role == TUNED else r.label
        out.append((label, _x(r.value), ci, "/".join(str(c) for c in r.counts().values())))
    return out


def search_panel(trials: Sequence[Trial], marks: Sequence[str], rungs: int) -> Panel:
    """Every trial's speedup over AR at its rung, spread across its rung's column so that close
    figures stay apart, the settings that went on apart from those dropped, and 1.0x marked."""
    rungs = max([rungs, *(t.rung + 1 for t in trials)])
    per_rung: dict[int, int] = {}
    xs: dict[str, list[float]] = {IN: [], DROPPED: []}
    ys: dict[str, list[float]] = {IN: [], DROPPED: []}
    for t, m in zip(trials, marks):
        if m == FAILED:
            continue
        n = sum(1 for u in trials if u.rung == t.rung)
        i = per_rung[t.rung] = per_rung.get(t.rung, -1) + 1
        spread = 0.0 if n == 1 else (i / (n - 1) - 0.5) * 0.6
        key = DROPPED if m == DROPPED else IN
        xs[key].append(t.rung + 1 + spread)
        ys[key].append(t.speedup)
    shares = {t.rung: t.share for t in trials}
    labels = [f"{r + 1} ({shares[r]:.0%})" if r in shares else str(r + 1) for r in range(rungs)]
    # no legend (plotext draws its box over the first rung's points): the title says what is what
    series = [Series([0.5, rungs + 0.5], [1.0, 1.0], marker="─"),
              Series(xs[IN], ys[IN], marker="o", lines=False),
              Series(xs[DROPPED], ys[DROPPED], marker="x", lines=False)]
    return Panel("speedup over AR by rung: o in · x dropped · ─ AR", series,
                 x=Axis(lim=(0.5, rungs + 0.5), ticks=list(range(1, rungs + 1)), labels=labels,
                        label="rung (its share of the tuning half)"), theme="spectui-search")


def time_panel(trials: Sequence[Trial], budget_s: float) -> Panel:
    """The minutes the search has spent, trial by trial, under the whole tune's budget."""
    spent, total = [], 0.0
    for t in trials:
        total += t.seconds / 60
        spent.append(total)
    xs = list(range(1, len(trials) + 1))
    span = [0.5, max(len(trials), 1) + 0.5]
    return Panel("minutes spent: o after each trial · ─ the budget",
                 [Series(span, [budget_s / 60] * 2, marker="─"), Series(xs, spent, marker="o", lines=False)],
                 x=Axis(lim=(span[0], span[1]), label="trial"), theme="spectui-search")


class SearchPlot(Static):
    """The search as plotext charts (``spectui.charts``) side by side, its speedups by rung and the
    minutes it spent, in the app theme's colours; built again when a trial ends or the widget
    changes size, never on a timer."""

    #: what the plot says before a trial has ended
    EMPTY = "the plot of the search fills in as settings are measured (speedup over AR by rung)"

    def __init__(self, **kwargs) -> None:  # noqa: ANN003 - Textual's widget keywords (id, classes, ...), passed on
        super().__init__(self.EMPTY, markup=False, **kwargs)
        self.trials: tuple[Trial, ...] = ()
        self.marks: tuple[str, ...] = ()
        self.rungs = 1
        self.budget_s = 0.0
        self._key: tuple | None = None

    def show(self, trials: Sequence[Trial], marks: Sequence[str], rungs: int, budget_s: float) -> None:
        self.trials, self.marks, self.rungs, self.budget_s = tuple(trials), tuple(marks), rungs, budget_s
        self._build()

    def on_resize(self) -> None:
        self._build()

    def _build(self) -> None:
        size = self.content_size
        if size.width < 20 or size.height < 8:
            return
        key = (self.trials, self.marks, self.rungs, self.budget_s, size.width, size.height, self.app.theme)
        if key == self._key:
            return
        self._key = key
        if not any(m != FAILED for m in self.marks):
            self.update(self.EMPTY)
            return
        colours = self.app.theme_variables

        def rgb(var: str) -> tuple[int, int, int]:
            try:
                c = Color.parse(colours.get(var, "#808080"))
            except ColorParseError:  # a theme's own variable that is not a plain colour
                c = Color(128, 128, 128)
            return (c.r, c.g, c.b)

        # AR's line a shade off the text, the settings that went on in success's colour, the dropped in warning's
        define_theme("spectui-search", text=rgb("foreground"), sequence=[rgb("foreground-darken-2"), rgb("success"), rgb("warning")])
        panels = [search_panel(self.trials, self.marks, self.rungs), time_panel(self.trials, self.budget_s)]
        ansi = render(panels, width=size.width, height=size.height, cols=2, colour=True)
        self.update(Text.from_ansi(ansi, no_wrap=True, end=""))


class TrafficTuneView(Protocol):
    """What the screen may read (``TrafficTuneApp`` is one)."""

    plan: TrafficResult  # what the tune is: its header fields (the figures are ``result``'s)
    state: str
    phase: str
    search_status: Status | None
    trials: tuple[Trial, ...]
    searching: bool
    result: TrafficResult | None

    def status_text(self) -> str: ...


class TrafficTuneScreen(Screen[None]):
    """Header, phase, the search's counts and leader, the advice and the check's table, the
    plot of the search and its trials, the status line."""

    AUTO_FOCUS = "#tt-body"

    def __init__(self, app_view: TrafficTuneView) -> None:
        super().__init__()
        self.view = app_view
        self._trial_cells: list[tuple[str, ...]] = []
        self._check_drawn = False

    def compose(self) -> ComposeResult:
        r = self.view.plan
        by_method = ", ".join(f"{m} {n}" for m, n in r.space_by_method.items())
        yield Static(f"tune --workload {r.workload} · at {r.load} · {r.runtime} · {r.model or '?'} · space {r.space}"
                     f"{f' ({by_method})' if by_method else ''} · tuning half {len(r.tuning)} requests, check half"
                     f" {len(r.check)} · budget {r.budget_s / 60:g} min", id="tt-plan", markup=False)
        yield Static("starting…", id="tt-phase", markup=False)
        yield Static("", id="tt-search", markup=False)
        yield Static("", id="tt-leading", markup=False)
        with ScrollableContainer(id="tt-body"):
            yield Static("", id="tt-advice", markup=False)
            check: DataTable[Text] = DataTable(show_cursor=False, cursor_type="none", id="tt-check")
            check.can_focus = False
            yield check
            yield SearchPlot(id="tt-plot")
            table: DataTable[Text] = DataTable(show_cursor=False, cursor_type="none", id="tt-trials")
            table.can_focus = False
            yield table
        yield Static("", id="tt-status", markup=False)
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        for table_id, names, right in (("#tt-trials", TRIAL_COLUMNS, TRIAL_RIGHT), ("#tt-check", CHECK_COLUMNS, CHECK_RIGHT)):
            table = self.query_one(table_id, DataTable)
            for i, name in enumerate(names):
                table.add_column(Text(name, justify="right" if i in right else "left"), key=name or "mark")
        self.query_one("#tt-check", DataTable).display = False
        self.redraw()

    # -- what the app calls ----------------------------------------------------------------------

    def redraw(self) -> bool:
        view = self.view
        try:
            over = view.result is not None or (bool(view.trials) and not view.searching)
            status = view.search_status
            rung_now = status.rung if status is not None else max((t.rung for t in view.trials), default=0)
            rungs = status.rungs if status is not None else rung_now + 1
            marks = trial_marks(view.trials, rung_now, over)
            self.query_one("#tt-phase", Static).update(self._phase(status, over), layout=False)
            self.query_one("#tt-search", Static).update(self._counts(status, marks, over), layout=False)
            self.query_one("#tt-leading", Static).update(self._leading(status, marks, over), layout=False)
            self._draw_trials(marks)
            self.query_one("#tt-plot", SearchPlot).show(view.trials, marks, rungs, view.plan.budget_s)
            if view.result is not None:
                self._draw_check(view.result)
            self.query_one("#tt-status", Static).update(view.status_text(), layout=False)
            self.set_class(view.state in ("stopping", "stopped"), "-stopped")
            self.set_class(view.state == "error", "-error")
        except NoMatches:  # not mounted yet, or being torn down
            return False
        return True

    def redraw_status(self) -> None:
        """The status line alone (its elapsed time moves between the tune's reports)."""
        try:
            self.query_one("#tt-status", Static).update(self.view.status_text(), layout=False)
        except NoMatches:
            pass

    # -- the lines ---------------------------------------------------------------------------------

    def _phase(self, status: Status | None, over: bool) -> str:
        view = self.view
        if view.result is not None:
            r = view.result
            took = f"searched {r.search_s / 60:.1f} min, checked {r.check_s / 60:.1f} min"
            return f"ended: {r.stopped} ({took})" if r.stopped else f"done: {took}"
        if view.searching and status is not None:
            return f"now: the search on the tuning half, rung {status.rung + 1} of {status.rungs}"
        return f"now: {view.phase}" if view.phase else "starting…"

    def _counts(self, status: Status | None, marks: Sequence[str], over: bool) -> str:
        trials = self.view.trials
        tried = len({t.candidate for t in trials})
        space = status.space if status is not None else self.view.plan.space
        counts = f"tried {tried} of {space} · dropped {dropped_count(trials, marks)} · {len(trials)} trial{'s' * (len(trials) != 1)}"
        if status is None:
            return f"search: not started · {counts}"
        result = self.view.result
        if result is not None:  # the tune's own account of its time, not the search's last estimate
            reached = len({t.rung for t in trials})
            took = f"took {(result.search_s + result.check_s) / 60:.1f} of {result.budget_s / 60:g} min"
            return f"search: {reached} rung{'s' * (reached != 1)} · {counts} · {took}"
        rung = f"rung {status.rung + 1}/{status.rungs}" if not over else "ended"
        budget = f"budget left {max(status.budget_left_s, 0) / 60:.1f} min (the check's time kept aside)"
        return f"search: {rung} · {counts} · {budget}"

    def _leading(self, status: Status | None, marks: Sequence[str], over: bool) -> str:
        winner = next((t for t, m in zip(self.view.trials, marks) if m == WINNER), None)
        if over and winner is not None:
            return f"won the search: {winner.candidate.label()} {_x(winner.speedup)} AR on the tuning half"
        if status is not None and status.leading and math.isfinite(status.leading_speedup):
            return f"leading: {status.leading} {_x(status.leading_speedup)} AR on the tuning half"
        return "leading: none yet"

    def _draw_trials(self, marks: Sequence[str]) -> None:
        table = self.query_one("#tt-trials", DataTable)
        cells = [trial_row(t, m) for t, m in zip(self.view.trials, marks)]
        for i, row in enumerate(cells):
            if i < len(self._trial_cells) and self._trial_cells[i] == row:
                continue
            texts = [Text(c, justify="right" if j in TRIAL_RIGHT else "left") for j, c in enumerate(row)]
            key = str(i)
            if key not in table.rows:
                table.add_row(*texts, key=key)
            else:
                for name, text in zip(TRIAL_COLUMNS, texts):
                    table.update_cell(key, name or "mark", text, update_width=True)
        self._trial_cells = cells

    def _draw_check(self, result: TrafficResult) -> None:
        if self._check_drawn:
            return
        self._check_drawn = True
        pick = advised(result)
        lines = [advice(result)]
        if pick is not None and pick.command:
            lines.append(f"  {pick.command}")
        elif result.row(TUNED) is not None:
            lines.append("  run the server without --spec-type (AR)")
        if result.rows:
            lines += ["", "on the check half (requests the search never saw), each over the runtime's AR on the same text:"]
        self.query_one("#tt-advice", Static).update("\n".join(lines))
        table = self.query_one("#tt-check", DataTable)
        for i, row in enumerate(check_rows(result)):
            table.add_row(*[Text(c, justify="right" if j in CHECK_RIGHT else "left") for j, c in enumerate(row)], key=str(i))
        table.display = bool(table.row_count)

    # -- what the tests read -----------------------------------------------------------------------

    def cells(self, table_id: str) -> list[list[str]]:
        table = self.query_one(table_id, DataTable)
        return [[c.plain if isinstance(c, Text) else str(c) for c in table.get_row(k)] for k in table.rows]
