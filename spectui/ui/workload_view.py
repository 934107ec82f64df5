"""The dashboard's workload view: ``spectui workload`` in a terminal.

``WorkloadApp`` runs the workload and keeps where it stands; its screen
(``screens/workload.py``) shows, refreshed as requests end: the plan; a progress bar with the
request count; which request each client has in flight; the table of levels, the level running
filling in as its requests end; each setting's speedup against load as bars with its knee
line; the partings from AR, each with its verdict; and where the recordings are.

Threads: the workload (``WorkloadRun``) runs in one Textual thread worker; its ``on_update``
hook posts a snapshot (``WorkloadUpdate`` of ``ui/messages.py``) with ``post_message``
(thread-safe, never blocks) whose ``can_replace`` lets Textual fold a burst into the newest,
so the load's clients never wait for the UI.

``q`` (or ctrl+c) sets the workload's stop event: the requests in flight end (each recording
complete), nothing new is sent, the app quits with 130 (0 if the workload had completed).
"""

from __future__ import annotations

import threading
from pathlib import Path

from spectui.ui.background import BackgroundJobApp
from spectui.ui.messages import WorkloadUpdate
from spectui.ui.screens.workload import WorkloadScreen
from spectui.ui.themes import register_themes
from spectui.workload.plan import WorkloadPlan
from spectui.workload.result import WorkloadResult
from spectui.workload.run import Opener, Snapshot, WorkloadRun

#: after the app closed, how long to wait for the workload thread to stop its servers
JOIN_TIMEOUT_S = 60.0


class WorkloadApp(BackgroundJobApp):
    """Runs one workload in a thread worker and shows it on a ``WorkloadScreen``."""

    CSS_PATH = "app.tcss"
    TITLE = "spectui workload"
    JOB = "workload"

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
        self.run_and_report(lambda: WorkloadRun(self.plan, self.folder, self.opener, stop=self.stop, noise=self.noise,
                                         on_update=lambda snap: self.post_message(WorkloadUpdate(snap)))(), self.done)

    def on_workload_update(self, msg: WorkloadUpdate) -> None:
        self.show(msg.snapshot)

    def show(self, snapshot: Snapshot) -> None:
        """Take a snapshot and redraw (also the tests' way in)."""
        self.snapshot = snapshot
        self._redraw()

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
