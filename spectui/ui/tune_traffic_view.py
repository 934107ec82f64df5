"""The dashboard's tune view: ``spectui tune --workload`` in a terminal.

``TrafficTuneApp`` runs a prepared ``TrafficTune`` (``spectui.workload.tuning``) and keeps where
it stands; its screen (``screens/tune_traffic.py``) shows the settings tried, dropped and
leading, the budget left, every trial and a plot of the search, then the advice and the check
half's table, and waits for ``q``.

Threads: the tune runs in one Textual thread worker. Its hooks (``progress``, ``on_status``,
``on_trial``), called on that thread, keep what it reported in a ``Feed`` and post all of it as
one ``TuneTrafficUpdate`` (``ui/messages.py``) with ``post_message`` (thread-safe, never
blocks); ``can_replace`` folds a burst into the newest, so the tune never waits for the UI.

``q`` (or ctrl+c) sets the tune's stop event: the setting being measured ends with its requests
in flight, the search starts no other, what was measured is saved (``tune-traffic.json``
included) and the app quits with 130 (0 if the tune had completed, check included).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from textual.message import Message

from spectui.tune.traffic_report import TrafficResult
from spectui.tune.traffic_search import Status, Trial
from spectui.ui.background import BackgroundJobApp
from spectui.ui.messages import TuneTrafficUpdate
from spectui.ui.screens.tune_traffic import TrafficTuneScreen
from spectui.ui.themes import register_themes
from spectui.workload.tuning import TrafficTune

#: after the app closed, how long to wait for the tune's thread to stop its server
JOIN_TIMEOUT_S = 60.0
#: the status line's elapsed time moves this often while the tune runs
TICK_S = 1.0


class Feed:
    """The tune's hooks, on its thread: what it reported so far, posted whole at each report."""

    def __init__(self, tune: TrafficTune, post: Callable[[Message], object]) -> None:
        self.tune, self.post = tune, post
        self.phase = ""
        self.status: Status | None = None
        self.trials: list[Trial] = []
        tune.progress, tune.on_status, tune.on_trial = self.line, self.searched, self.measured

    def line(self, text: str) -> None:
        self.phase = text
        self._post()

    def searched(self, status: Status) -> None:
        self.status = status
        self._post()

    def measured(self, trial: Trial) -> None:
        self.trials.append(trial)
        self._post()

    def _post(self) -> None:
        self.post(TuneTrafficUpdate(phase=self.phase, status=self.status, trials=tuple(self.trials), searching=self.tune.searching))


class TrafficTuneApp(BackgroundJobApp):
    """Runs one tune --workload in a thread worker and shows it on a ``TrafficTuneScreen``."""

    CSS_PATH = "app.tcss"
    TITLE = "spectui tune --workload"
    JOB = "tune"

    def __init__(self, tune: TrafficTune, *, autostart: bool = True) -> None:
        super().__init__()
        self.tune = tune
        tune.stop = self.stop  # q stops the search; the stderr progress line gives way to the view
        self.feed = Feed(tune, self.post_message)
        self.plan: TrafficResult = tune.result
        self.autostart = autostart
        self.done = threading.Event()
        self.phase = ""
        self.search_status: Status | None = None
        self.trials: tuple[Trial, ...] = ()
        self.searching = False
        self.started: float | None = None
        self.result: TrafficResult | None = None
        register_themes(self)

    def get_default_screen(self) -> TrafficTuneScreen:
        return TrafficTuneScreen(self)

    def on_mount(self) -> None:
        if self.autostart:
            self.state, self.started = "running", time.monotonic()
            self.set_interval(TICK_S, self._tick)
            self.run_worker(self._work, name="spectui-tune-workload", group="tune", thread=True, exit_on_error=False)

    def _work(self) -> None:
        self.run_and_report(self.tune, self.done)

    def on_tune_traffic_update(self, msg: TuneTrafficUpdate) -> None:
        self.show(msg.phase, msg.status, msg.trials, searching=msg.searching)

    def show(self, phase: str, status: Status | None, trials: tuple[Trial, ...], *, searching: bool) -> None:
        """Take where the tune stands and redraw."""
        self.phase, self.search_status, self.trials, self.searching = phase, status, trials, searching
        self._redraw()

    def took(self, result: TrafficResult) -> None:
        self.searching = False

    def redraw_now(self) -> None:
        self._redraw()

    def _tick(self) -> None:
        if self.running and isinstance(self.screen, TrafficTuneScreen):
            self.screen.redraw_status()

    def _redraw(self) -> None:
        if isinstance(self.screen, TrafficTuneScreen):
            self.screen.redraw()

    def status_text(self) -> str:
        where = f"recorded in {self.tune.folder}"
        if self.state == "stopping":
            return f"stopping: the setting being measured finishes, what was measured is kept… · {where}"
        if self.state == "error":
            return f"error: {self.error} · {where} · q quits"
        if self.state == "done":
            return f"done · {where} · q quits and prints the result"
        if self.state == "stopped":
            stopped = self.result.stopped if self.result is not None else ""
            return f"stopped{': ' + stopped if stopped else ''} · {where} · q quits"
        elapsed = "" if self.started is None else f"{(time.monotonic() - self.started) / 60:.1f} of {self.plan.budget_s / 60:g} min · "
        return f"{elapsed}q stops and keeps what was measured · {where}"
