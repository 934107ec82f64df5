"""The workload view's screen: the plan; a progress bar with the request count; which request
each client has in flight; the table of levels (``spectui.workload.report``'s rows, so the
view and the printed table show the same cells), the level running filling in as its requests
end; each setting's speedup against load as bars (1.0x marked) with its knee line; the
partings from AR, each with its verdict; and the status line. It reads a ``WorkloadView``
(``spectui.ui.workload_view.WorkloadApp`` is one) and redraws from it when the app says.
"""

from __future__ import annotations

from typing import Protocol

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, ScrollableContainer
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable, Footer, ProgressBar, Static

from spectui.workload.plan import WorkloadPlan
from spectui.workload.report import HEADER, RIGHT, level_row, partings, speedup_bars
from spectui.workload.result import WorkloadResult
from spectui.workload.run import Snapshot


class WorkloadView(Protocol):
    """What the workload screen may read (``WorkloadApp`` is one)."""

    plan: WorkloadPlan
    state: str
    snapshot: Snapshot | None

    def status_text(self) -> str: ...


class WorkloadScreen(Screen[None]):
    """Plan, progress, clients in flight, the level table, speedup bars, partings, status."""

    AUTO_FOCUS = "#workload-body"

    def __init__(self, app_view: WorkloadView) -> None:
        super().__init__()
        self.view = app_view
        self._rows: dict[str, tuple[str, ...]] = {}

    def compose(self) -> ComposeResult:
        plan = self.view.plan
        levels = ", ".join(f"{c} client{'s' if c != 1 else ''}" if c else f"{r:g}/s" for c, r in plan.levels())
        settings = ", ".join(s.label for s in plan.settings)
        yield Static(f"workload {plan.workload.name} · {len(plan.workload.requests)} requests · {levels} · "
                     f"{plan.server_slots} slot(s) · {settings}", id="workload-plan", markup=False)
        with Horizontal(id="workload-progress"):
            yield ProgressBar(total=1, show_eta=False, id="workload-bar")
            yield Static("starting…", id="workload-run", markup=False)
        yield Static("", id="workload-clients", markup=False)
        with ScrollableContainer(id="workload-body"):
            table: DataTable[Text] = DataTable(show_cursor=False, cursor_type="none", id="workload-table")
            table.can_focus = False
            yield table
            yield Static("", id="workload-bars", markup=False)
            yield Static("", id="workload-partings", markup=False)
        yield Static("", id="workload-status", markup=False)
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        table = self.query_one("#workload-table", DataTable)
        for i, name in enumerate(HEADER):
            table.add_column(Text(name, justify="right" if i in RIGHT else "left"), key=name)
        self.redraw()

    def redraw(self) -> bool:
        view = self.view
        try:
            snap = view.snapshot
            if snap is not None:
                self.query_one("#workload-bar", ProgressBar).update(total=max(snap.total, 1), progress=snap.done)
                self.query_one("#workload-run", Static).update(f"{snap.done}/{snap.total} requests", layout=False)
                flight = " · ".join(f"client {c}: request {i}" for c, i in sorted(snap.in_flight.items()))
                self.query_one("#workload-clients", Static).update(f"in flight: {flight or '—'}", layout=False)
                self._draw(snap.result)
            self.query_one("#workload-status", Static).update(view.status_text(), layout=False)
            self.set_class(view.state in ("stopping", "stopped"), "-stopped")
            self.set_class(view.state == "error", "-error")
        except NoMatches:
            return False
        return True

    def _draw(self, result: WorkloadResult) -> None:
        table = self.query_one("#workload-table", DataTable)
        for lv in result.levels:
            key = f"{lv.setting}|{lv.clients}|{lv.rate}|{lv.pass_no}"
            cells = tuple(level_row(lv))
            if self._rows.get(key) == cells:
                continue
            texts = [Text(c, justify="right" if i in RIGHT else "left") for i, c in enumerate(cells)]
            if key not in table.rows:
                table.add_row(*texts, key=key)
            else:
                for name, text in zip(HEADER, texts):
                    table.update_cell(key, name, text, update_width=True)
            self._rows[key] = cells
        bars = speedup_bars(result) + list(result.knees.values())
        self.query_one("#workload-bars", Static).update("\n".join(bars) or "speedup: — (once a setting and its AR have run a level)")
        self.query_one("#workload-partings", Static).update("\n".join(partings(result, limit=8)))

    def table_cells(self) -> dict[str, list[str]]:
        table = self.query_one("#workload-table", DataTable)
        return {str(k.value): [c.plain if isinstance(c, Text) else str(c) for c in table.get_row(k)] for k in table.rows}
