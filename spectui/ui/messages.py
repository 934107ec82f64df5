"""App-wide messages: the engine thread's notes, and what a screen asks the dashboard to do.

The engine thread (``spectui.sessions.runner``) knows nothing of Textual: it hands plain notes
(``spectui.sessions.notes``) to a ``post`` function, which the app makes by wrapping each note
in ``EngineNote`` and calling ``App.post_message`` (thread-safe, never blocks the engine). A
replay posts its wake-ups the same way, from the UI thread.

No ``can_replace`` here: the ``Outbox`` already coalesces a session's events (one wake-up
pending at most), and status and finish notes must each arrive.

A screen that asks for a run (or a stop, a diff, another way to compare) posts one of the
requests below; it bubbles up to the app (``SpectuiApp.on_*``), which has the controller do it.
A screen never names an app action by string, and never holds the controller.

The other apps' and screens' messages live here too, each named for what it carries, so its
handler's name says it (``on_sweep_update``): a background job's progress and end from its
thread worker (the sweep, workload and tune --workload views, the tune screen), the watch feed's
samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.message import Message

from spectui.sessions.notes import Note

if TYPE_CHECKING:  # the types of fields only: the dashboard need not import the sweep or the workload
    from spectui.lab.sweep import SweepProgress, SweepResult
    from spectui.tune.result import TuneResult
    from spectui.tune.traffic_search import Status, Trial
    from spectui.watch.sampler import WatchSample
    from spectui.workload.run import Snapshot


@dataclass
class EngineNote(Message):
    """A note from the engine thread (``SessionEvents``, ``SessionStatus``, ``SessionFinished``)."""

    note: Note


class RunRequested(Message):
    """Start a run with the next run's settings (the main screen's ``r``)."""


class StopRequested(Message):
    """Stop the run in progress."""


class CompareRequested(Message):
    """Run the pair to compare live: AR then speculative, or interleaved."""


class InterleaveToggled(Message):
    """The next live pair runs interleaved block by block instead of one after the other, or back."""


class DiffRequested(Message):
    """Show ``spectui diff`` of the compared pair."""


# -- the sweep view (``spectui.ui.sweep``) ------------------------------------------------------


@dataclass
class SweepUpdate(Message):
    """From the sweep thread after each run: the progress and the table so far."""

    progress: SweepProgress
    result: SweepResult

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SweepUpdate)  # only the newest table matters


@dataclass
class JobFinished(Message):
    """A background job's thread is done (the sweep's, the workload's: ``ui/background.py``):
    its final result, or the error that ended it."""

    result: Any = None
    error: BaseException | None = None


# -- the workload view (``spectui.ui.workload_view``) -------------------------------------------


@dataclass
class WorkloadUpdate(Message):
    """From the workload thread as requests end: where the workload stands."""

    snapshot: Snapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, WorkloadUpdate)  # only the newest snapshot matters


# -- the tune --workload view (``spectui.ui.tune_traffic_view``) -------------------------------


@dataclass
class TuneTrafficUpdate(Message):
    """From the tune's thread as it moves on: what it does now (its progress line), the search's
    latest ``Status``, every trial so far, and whether the search is still running."""

    phase: str
    status: Status | None
    trials: tuple[Trial, ...]
    searching: bool

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TuneTrafficUpdate)  # each carries every trial so far: the newest is enough


# -- the tune screen (``spectui.ui.screens.tune``) ----------------------------------------------


@dataclass
class TuneLoaded(Message):
    """The stored tune result for the target's key (None: there is none), or why there can be none."""

    key: str | None
    result: TuneResult | None
    error: str = ""


@dataclass
class TuneProgress(Message):
    """A tune from the dashboard moved on: ``done`` of ``total`` steps, what it does now."""

    done: int
    total: int
    text: str


@dataclass
class TuneFinished(Message):
    """A tune from the dashboard ended: its result (None: it failed, ``error`` says why)."""

    result: TuneResult | None
    error: str = ""


# -- the watch dashboard (``spectui.ui.watch_app``) ---------------------------------------------


@dataclass
class WatchSampled(Message):
    """A sample from the feed's thread."""

    sample: WatchSample


@dataclass
class WatchEnded(Message):
    """The feed stopped by itself (its bound, the end of a recording), and why."""

    why: str
