"""``RunKind``, the interface every kind of run offers the controller, and ``Dashboard``, what a
run kind may use of the controller (see the package docstring). No Textual here.

Data flow, per token: the engine thread appends each event to its session's ``Outbox`` and
posts a ``SessionEvents`` wake-up only when none is pending. The controller hands the note to
the kind that owns its run id; the kind keeps the outbox and ``drain`` folds what it holds into
the run (cheap, no drawing). The app drains on the wake-up and on every repaint tick, so a
200 tok/s run costs about 12 wake-ups a second, not 200. A replay hands its due events to an
``Outbox`` in the same way from the UI thread, so one folding path serves both.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from spectui.config import RunConfig
from spectui.engine.host.noise import CALIBRATION_NOTICE
from spectui.metrics.live import LiveRun
from spectui.recording.schema import End, Event
from spectui.sessions.notes import Note, Outbox, SessionEvents, SessionFinished, SessionStatus
from spectui.sessions.runner import CALIBRATING, SessionRunner
from spectui.ui.chat import ChatState
from spectui.ui.state import Baselines, RunState

#: names a run's recording file (``SessionRequest.record_to``)
RecordingNamer = Callable[[RunConfig], Path]


class ControllerHost(Protocol):
    """What the controller needs from whoever shows it (the Textual app; a test)."""

    def post_note(self, note: Note) -> None:
        """Hand ``note`` to the UI thread, which passes it to ``DashboardController.on_note``.
        Called on the engine thread: must be thread-safe and must never block."""

    def notify(self, message: str, *, title: str = "", severity: Any = "information", timeout: float | None = None) -> None:
        """Tell the user something that does not fit the header (a failed run, a bad file)."""

    def replay_mode_changed(self) -> None:
        """A replay started or ended: the replay keys come or go."""


class Dashboard(Protocol):
    """What a run kind may use of the controller (``DashboardController`` is one)."""

    host: ControllerHost
    #: the dashboard's engine service (a run may name another: ``pairs.QueuedRun.runner``)
    runner: SessionRunner
    baselines: Baselines
    chat: ChatState
    #: the run on the main screen
    live: LiveRun
    state: RunState

    def new_run_id(self, owner: RunKind) -> int:
        """A fresh run id, whose notes are routed to ``owner`` until it is forgotten."""

    def forget_run(self, run_id: int) -> None:
        """Route no more notes of ``run_id`` (a finished run, a replay's old position)."""

    def show(self, live: LiveRun) -> None:
        """Put ``live`` on the main screen, without a recording yet and with no breach marked."""

    def set_state(self, state: RunState, detail: str = "") -> None: ...

    def failed(self, error: str) -> None:
        """A run failed: the error state, and a notification saying why."""

    def touch(self) -> None:
        """Something the header or the details show changed: the next repaint draws it all."""

    def fold(self, event: Event, live: LiveRun) -> None:
        """Feed ``event`` to ``live`` and to its declared envelope (a breach is notified)."""

    def recorded(self, live: LiveRun, path: Path | None) -> None:
        """``live``'s recording is ``path`` (None: not recorded)."""

    def remember_models(self, live: LiveRun) -> None:
        """Keep the names of the models ``live`` ran, for the header of the next run."""

    def recording_namer(self, namer: RecordingNamer | None = None) -> RecordingNamer | None:
        """What names a new run's recording: ``namer`` (a conversation's), else a new file in
        the recordings folder; None when the dashboard does not record."""


class RunKind:
    """One kind of run: it starts its runs (or plays its recording), owns their run ids, their
    outboxes and their stop event, and folds the notes the controller routes to it.

    The interface the controller uses is ``on_note``, ``drain``, ``stop`` and ``superseded``;
    a kind fills in ``on_finished`` (and ``on_end``, ``on_status`` where it differs)."""

    def __init__(self, dash: Dashboard) -> None:
        self.dash = dash
        self.runs: dict[int, LiveRun] = {}  # run id -> the run its events fold into
        self.outboxes: dict[int, Outbox] = {}  # run id -> its events in flight to the UI
        self.stop_event = threading.Event()

    # -- the interface ----------------------------------------------------------------------

    def on_note(self, note: Note) -> None:
        """A note of one of this kind's runs (the controller routed it here by run id)."""
        live = self.runs.get(note.run_id)
        if live is None:
            return
        if type(note) is SessionEvents:
            self.outboxes[note.run_id] = note.outbox
            self.drain(clear_wake=False)  # the next tick clears it: one wake per tick
        elif type(note) is SessionStatus:
            self.on_status(note, live)
        elif type(note) is SessionFinished:
            self.on_finished(note, live)

    def drain(self, *, clear_wake: bool) -> None:
        """Fold every event the outboxes hold into its run. ``clear_wake``: let their producers
        post a wake-up again (once per repaint tick)."""
        for run_id, outbox in list(self.outboxes.items()):
            live = self.runs.get(run_id)
            while outbox and live is not None:
                ev = outbox.popleft()
                self.dash.fold(ev, live)
                if type(ev) is End:
                    self.on_end(ev, live)
            if clear_wake:
                outbox.wake_pending = False

    def stop(self) -> None:
        """Stop the runs: each ends after its current step."""
        self.stop_event.set()

    def superseded(self) -> None:
        """Another run took the screen: this kind's notes are no longer routed here."""
        self.stop()

    # -- what each kind decides -------------------------------------------------------------

    def on_status(self, note: SessionStatus, live: LiveRun) -> None:
        if note.state == "running":
            self.dash.recorded(live, Path(note.detail) if note.detail else None)
            self.dash.set_state(RunState.RUNNING)
            return
        self.dash.set_state(RunState(note.state), note.detail)
        if note.detail == CALIBRATING:  # the header says what and how long; this says why
            self.dash.host.notify(CALIBRATION_NOTICE.removeprefix("spectui: "), title="calibrating", timeout=10)

    def on_end(self, end: End, live: LiveRun) -> None:
        """``live``'s ``End`` was folded."""

    def on_finished(self, note: SessionFinished, live: LiveRun) -> None:
        """The engine thread is done with ``live``'s session (its last note)."""
        raise NotImplementedError

    # -- for the kinds ----------------------------------------------------------------------

    def new_run(self, live: LiveRun) -> int:
        """A run id for ``live``, routed to this kind."""
        run_id = self.dash.new_run_id(self)
        self.runs[run_id] = live
        return run_id

    def drop_run(self, run_id: int) -> None:
        """``run_id`` is over: nothing more of it is folded."""
        self.runs.pop(run_id, None)
        self.outboxes.pop(run_id, None)
        self.dash.forget_run(run_id)
