"""App-wide messages: what a session worker tells the UI.

Workers call ``App.post_message`` only (thread-safe, never blocks the engine thread). Every
message carries the ``run_id`` of the session that sent it, so the UI can drop what a stopped
session still had in flight after a newer one started.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual.message import Message

from spectui.recording.schema import Event


@dataclass
class SessionEvent(Message):
    """One event of the running session (header, prefill, step, memory sample, end)."""

    run_id: int
    event: Event


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
