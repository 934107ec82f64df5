"""The dashboard's sweep view: ``spectui sweep`` in a terminal.

``SweepApp`` runs the sweep and keeps where it stands; its screen (``screens/sweep.py``) shows
a progress bar with the ETA and the run in flight, then one table per prompt tier that fills
in as runs finish, the knee of each tier's K curve, and at the end where the recordings are.

Threads: the sweep (``lab.sweep.run_sweep``) runs in one Textual *thread* worker. Its
``on_run`` hook, called in that thread after every whole run, posts the progress and a
snapshot of the table with ``post_message`` (thread-safe, never blocks). The message's
(``SweepUpdate`` of ``ui/messages.py``) ``can_replace`` lets Textual fold a burst of them into
the newest, so a slow UI skips stale updates instead of queueing them, and the engine never
waits for the UI (``call_from_thread`` would make it wait: never used here). The view hears
about whole runs only, never tokens; between runs a 1 Hz timer moves the elapsed time and the ETA.

``q`` (or ctrl+c) sets the sweep's stop event: the run in flight ends at its next step, the
sweep ends there with what it recorded, and the app quits with 130 (0 if it had completed).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence

import msgspec
from textual.widgets import Static

from spectui.format import DASH
from spectui.lab.sweep import SweepPlan, SweepProgress, SweepResult, run_sweep
from spectui.prompts import PromptSpec
from spectui.sessions.open import EngineFactory
from spectui.ui.background import BackgroundJobApp
from spectui.ui.messages import SweepUpdate
from spectui.ui.screens.sweep import SweepScreen
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


class SweepApp(BackgroundJobApp):
    """Runs one sweep plan in a thread worker and shows it on a ``SweepScreen``."""

    CSS_PATH = "app.tcss"
    TITLE = "spectui sweep"
    JOB = "sweep"

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
        kwargs = {"load_engine": self.load_engine} if self.load_engine is not None else {}
        self.run_and_report(lambda: run_sweep(self.plan, self.prompts, self.folder, max_tokens=self.max_tokens, stop=self.stop,
                                       on_run=self._on_run, **kwargs), self.sweep_done)

    def _on_run(self, progress: SweepProgress, result: SweepResult) -> None:
        """In the sweep thread, once per run."""
        # run_sweep replaces rows and knees wholesale and appends to runs: a copy of the runs
        # list is a consistent snapshot
        self.post_message(SweepUpdate(progress, msgspec.structs.replace(result, runs=list(result.runs))))

    # -- the UI thread --------------------------------------------------------------------------

    def on_sweep_update(self, msg: SweepUpdate) -> None:
        self.show(msg.progress, msg.result)

    def show(self, progress: SweepProgress, result: SweepResult) -> None:
        """Take a progress report and the table so far, and redraw (also the snapshot's way in)."""
        self.progress, self.result = progress, result
        self._received_at = time.monotonic()
        self._redraw()

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
