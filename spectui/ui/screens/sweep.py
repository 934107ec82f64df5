"""The sweep view's screen: the plan, a progress bar with the ETA and the run in flight, one
table per prompt tier that fills in as runs finish (the columns are ``sweep_report.COLUMNS``,
so the view and the printed table show the same cells), the knee of each tier's K curve, and
the status line. It reads a ``SweepView`` (``spectui.ui.sweep.SweepApp`` is one) and redraws
from it; the app runs the sweep and says when.
"""

from __future__ import annotations

from typing import Protocol

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, ScrollableContainer, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable, Footer, ProgressBar, Static

from spectui.config import RunConfig
from spectui.format import DASH
from spectui.lab.sweep import SweepPlan, SweepProgress, SweepResult
from spectui.lab.sweep_report import COLUMNS
from spectui.lab.sweep_table import SweepPoint
from spectui.ui.labels import backend_label, model_label


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
    drafting = base.draft.label(model=model_label(base.draft.flag))
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
