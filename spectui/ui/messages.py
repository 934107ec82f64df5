"""App-wide messages: what a session worker tells the UI.

Workers call ``App.post_message`` only (thread-safe, never blocks the engine thread). Every
message carries the ``run_id`` of the session that sent it, so the UI can drop what a stopped
session still had in flight after a newer one started.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from textual.message import Message

from spectui.recording.schema import Event


@dataclass
class SessionEvent(Message):
    """One event of the running session (header, prefill, step, memory sample, end)."""

    run_id: int
    event: Event


class Outbox(deque):
    """A live session's events on their way to the UI, without a message per event.

    The engine thread appends and posts a ``SessionEvents`` wake-up only when none is pending;
    the UI drains the outbox on that message and on every repaint tick, and clears
    ``wake_pending`` after a tick's drain. So the UI wakes at most about once per repaint
    tick whatever the token rate, and an event waits at most one tick. (``deque.append`` and
    ``popleft`` are atomic: no lock.)
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
class SessionEvents(Message):
    """Wake-up: the session's outbox has events."""

    run_id: int
    outbox: Outbox = field(default_factory=Outbox)


@dataclass
class SessionStatus(Message):
    """A change of the session's state: ``loading``, ``running``."""

    run_id: int
    state: str
    detail: str = ""


@dataclass
class SessionFinished(Message):
    """The worker is done with the engine: the recording is closed (``path``) or the
    session never started (``error``, one line)."""

    run_id: int
    path: Path | None = None
    error: str = ""
