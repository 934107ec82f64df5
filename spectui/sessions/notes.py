"""What the engine thread tells whoever started a session: plain dataclasses, no UI toolkit.

``SessionRunner`` hands these to the ``post`` function of each request (the dashboard wraps
them as Textual messages; a test or a script may just collect them). ``post`` must be
thread-safe and must never block the engine. Every note carries the ``run_id`` of its
session, so a receiver can drop what a stopped session still had in flight.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from spectui.recording.schema import Event


class Outbox(deque):
    """A live session's events on their way to a reader, without a note per event.

    The engine thread appends and posts a ``SessionEvents`` wake-up only when none is pending;
    the reader drains the outbox on that note (and whenever it likes) and clears
    ``wake_pending`` once it wants to be woken again. So a reader that clears it once per
    repaint tick wakes at most once per tick whatever the token rate, and an event waits at
    most one tick. (``deque.append`` and ``popleft`` are atomic: no lock.)
    """

    wake_pending: bool = False

    def put(self, event: Event) -> bool:
        """Append ``event``; True if the caller should post a wake-up."""
        self.append(event)
        if self.wake_pending:
            return False
        self.wake_pending = True
        return True


@dataclass
class SessionEvents:
    """Wake-up: the session's outbox has events."""

    run_id: int
    outbox: Outbox = field(default_factory=Outbox)


@dataclass
class SessionStatus:
    """A change of the session's state: ``loading`` (detail: what), ``running`` (detail: the
    recording's path, "" when not recording)."""

    run_id: int
    state: str
    detail: str = ""


@dataclass
class SessionFinished:
    """The engine thread is done with the session: the recording is closed (``path``) or the
    session never started (``error``, one line)."""

    run_id: int
    path: Path | None = None
    error: str = ""


Note = SessionEvents | SessionStatus | SessionFinished
