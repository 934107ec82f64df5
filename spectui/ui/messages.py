"""App-wide messages: the engine thread's notes, as Textual messages.

The engine thread (``spectui.sessions.runner``) knows nothing of Textual: it hands plain notes
(``spectui.sessions.notes``) to a ``post`` function, which the app makes by wrapping each note
in ``EngineNote`` and calling ``App.post_message`` (thread-safe, never blocks the engine). A
replay posts its wake-ups the same way, from the UI thread.

No ``can_replace`` here: the ``Outbox`` already coalesces a session's events (one wake-up
pending at most), and status and finish notes must each arrive.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from spectui.sessions.notes import Note


@dataclass
class EngineNote(Message):
    """A note from the engine thread (``SessionEvents``, ``SessionStatus``, ``SessionFinished``)."""

    note: Note
