"""What the sweep and workload views share: a job in a thread worker that ``q`` stops.

``q`` (or ctrl+c) sets the job's ``stop`` event and quits once the job has ended (at once if it
has); ctrl+q and the command palette's quit do the same, so no run is ever left behind. A
subclass says whether its job completed (``completed``) and how to redraw (``redraw_now``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.binding import Binding

from spectui.ui.messages import JobFinished

#: Exit codes of a view, as the headless commands': the job completed, or was stopped.
EXIT_COMPLETE = 0
EXIT_STOPPED = 130


class BackgroundJobApp(App[int]):
    BINDINGS = [
        Binding("q", "stop_and_quit", "Quit"),
        Binding("ctrl+c", "stop_and_quit", "Quit", show=False, priority=True),
    ]

    #: what the job names itself in a failure's notice ("sweep", "workload")
    JOB = "job"

    def __init__(self) -> None:
        super().__init__()
        self.stop = threading.Event()
        self.state = "idle"  # idle (not started), running, stopping, done, stopped, error
        self.quit_when_done = False
        self.result: Any = None  # the job's result, with its ``complete``
        self.error: BaseException | None = None

    @property
    def completed(self) -> bool:
        """Whether the job ran to its end (the exit code says so)."""
        return self.result is not None and bool(self.result.complete)

    def run_and_report(self, work: Callable[[], Any], done: threading.Event) -> None:
        """In the job's thread: run ``work`` and post its result, or the error that ended it
        (shown in the view, raised again once the app closed); ``done`` is set either way."""
        try:
            self.post_message(JobFinished(result=work()))
        except BaseException as exc:  # noqa: BLE001 - every end reaches the view
            self.post_message(JobFinished(error=exc))
        finally:
            done.set()

    def on_job_finished(self, msg: JobFinished) -> None:
        self.finish(msg.result, msg.error)

    def finish(self, result: Any, error: BaseException | None = None) -> None:
        """The job ended: its result, or the error that ended it; quit if ``q`` asked to."""
        if error is not None:
            self.state, self.error = "error", error
            self.notify(str(error) or type(error).__name__, title=f"the {self.JOB} failed", severity="error", timeout=10)
        elif result is not None:
            self.result = result
            self.state = "done" if result.complete else "stopped"
            self.took(result)
        self.redraw_now()
        if self.quit_when_done:
            self.exit(self.exit_code)

    def took(self, result: Any) -> None:
        """What a view keeps of its job's final result beyond ``result`` (nothing by default)."""

    def redraw_now(self) -> None:
        """Draw the view's state (the state changed)."""
        raise NotImplementedError

    @property
    def exit_code(self) -> int:
        return EXIT_COMPLETE if self.completed else EXIT_STOPPED

    @property
    def running(self) -> bool:
        return self.state in ("running", "stopping")

    def on_unmount(self) -> None:
        self.stop.set()  # however the app ends, the job ends at its next step

    def action_stop_and_quit(self) -> None:
        """Stop after the work in flight and quit once the job ended (at once if it has)."""
        if not self.running:
            self.exit(self.exit_code)
            return
        self.quit_when_done = True
        self.stop.set()
        self.state = "stopping"
        self.redraw_now()

    async def action_quit(self) -> None:  # ctrl+q, the command palette: never leave a run behind
        self.action_stop_and_quit()
