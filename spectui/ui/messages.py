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
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from spectui.sessions.notes import Note


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
