"""Stopping a run cleanly on a signal: Ctrl-C, a closed terminal or ``kill`` end the run after
its current step, so the recording it leaves is complete.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import FrameType


class StopOnSignal:
    """SIGINT / SIGHUP / SIGTERM end the run after the current step (a clean ``End``), so a
    recording cut short by Ctrl-C, a closed terminal or ``kill`` is still complete.

    A second SIGINT falls back to Python's default (KeyboardInterrupt) for a stuck run.
    """

    SIGNALS = tuple(s for s in (signal.SIGINT, getattr(signal, "SIGHUP", None), signal.SIGTERM) if s is not None)

    def __init__(self) -> None:
        self.event = threading.Event()
        self._old: dict[int, Callable[[int, FrameType | None], Any] | int | None] = {}

    def _handle(self, signum: int, _frame: object) -> None:
        if self.event.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.event.set()

    def __enter__(self) -> threading.Event:
        for s in self.SIGNALS:
            self._old[s] = signal.signal(s, self._handle)
        return self.event

    def __exit__(self, *exc: object) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)
