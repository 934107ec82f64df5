"""The dashboard's workload view: ``spectui workload`` in a terminal.

What it shows, refreshed as requests end: the plan; a progress bar with the request count;
which request each client has in flight; the table of levels (``spectui.workload.report``'s
rows, so the view and the printed table show the same cells), the level running filling in
as its requests end; each setting's speedup against load as bars (1.0x marked) with its knee
line; the partings from AR, each with its verdict; and where the recordings are.

Threads: the workload (``WorkloadRun``) runs in one Textual thread worker; its ``on_update``
hook posts a snapshot with ``post_message`` (thread-safe, never blocks) whose ``can_replace``
lets Textual fold a burst into the newest, so the load's clients never wait for the UI.

``q`` (or ctrl+c) sets the workload's stop event: the requests in flight end (each recording
complete), nothing new is sent, the app quits with 130 (0 if the workload had completed).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, ScrollableContainer
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, ProgressBar, Static

from spectui.ui.background import BackgroundJobApp
from spectui.ui.themes import register_themes
from spectui.workload.plan import WorkloadPlan
from spectui.workload.report import HEADER, RIGHT, level_row, partings, speedup_bars
from spectui.workload.result import WorkloadResult
from spectui.workload.run import Opener, Snapshot, WorkloadRun

#: after the app closed, how long to wait for the workload thread to stop its servers
JOIN_TIMEOUT_S = 60.0


class WorkloadScreen(Screen[None]):
    """Plan, progress, clients in flight, the level table, speedup bars, partings, status."""

    AUTO_FOCUS = "#workload-body"

    def __init__(self, app_view: WorkloadApp) -> None:
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


class WorkloadApp(BackgroundJobApp):
    """Runs one workload in a thread worker and shows it on a ``WorkloadScreen``."""

    CSS_PATH = "app.tcss"
    TITLE = "spectui workload"
    JOB = "workload"

    @dataclass
    class Update(Message):
        snapshot: Snapshot

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, WorkloadApp.Update)  # only the newest snapshot matters

    @dataclass
    class Finished(Message):
        result: WorkloadResult | None = None
        error: BaseException | None = None

    def __init__(self, plan: WorkloadPlan, folder: Path, opener: Opener, *, noise=None, autostart: bool = True) -> None:  # noqa: ANN001 - WorkloadRun's noise hook
        super().__init__()
        self.plan, self.folder, self.opener, self.noise = plan, folder, opener, noise
        self.autostart = autostart
        self.done = threading.Event()
        self.snapshot: Snapshot | None = None
        self.result: WorkloadResult | None = None
        register_themes(self)

    def get_default_screen(self) -> WorkloadScreen:
        return WorkloadScreen(self)

    def on_mount(self) -> None:
        if self.autostart:
            self.state = "running"
            self.run_worker(self._work, name="spectui-workload", group="workload", thread=True, exit_on_error=False)

    def _work(self) -> None:
        try:
            run = WorkloadRun(self.plan, self.folder, self.opener, stop=self.stop, noise=self.noise,
                              on_update=lambda snap: self.post_message(self.Update(snap)))
            self.post_message(self.Finished(result=run()))
        except BaseException as exc:  # noqa: BLE001 - shown in the view, raised again once the app closed
            self.post_message(self.Finished(error=exc))
        finally:
            self.done.set()

    def on_workload_app_update(self, msg: Update) -> None:
        self.show(msg.snapshot)

    def show(self, snapshot: Snapshot) -> None:
        """Take a snapshot and redraw (also the tests' way in)."""
        self.snapshot = snapshot
        self._redraw()

    def on_workload_app_finished(self, msg: Finished) -> None:
        self.finish(msg.result, msg.error)

    def took(self, result: WorkloadResult) -> None:
        done = self.snapshot.done if self.snapshot is not None else 0
        total = self.snapshot.total if self.snapshot is not None else done
        self.snapshot = Snapshot(done=done, total=total, in_flight={}, result=result)

    def redraw_now(self) -> None:
        self._redraw()

    def _redraw(self) -> None:
        if isinstance(self.screen, WorkloadScreen):
            self.screen.redraw()

    def status_text(self) -> str:
        where = f"recordings in {self.folder}"
        if self.state == "stopping":
            return "stopping: the requests in flight finish…"
        if self.state == "error":
            return f"error: {self.error} · {where} · q quits"
        if self.state == "done":
            return f"done · {where} · q quits"
        if self.state == "stopped":
            stopped = self.result.stopped if self.result is not None else ""
            return f"stopped{': ' + stopped if stopped else ''} · {where} · q quits"
        return f"q stops after the requests in flight · {where}"
