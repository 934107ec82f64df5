"""The UI thread's CPU allowance while a session decodes: a token bucket that earns
``share`` of one core per second of wall time, holds at most ``burst_s`` of CPU, and is
charged what the thread used (``time.thread_time``: message handling, redraws, Textual's
compositor). A repaint that would overdraw it waits, so the stream updates less often
instead of slowing the engine. No Textual here.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: While a session decodes, the UI thread may use this share of one core. On a two-core machine
#: llama.cpp's threads own both cores, and every millisecond the UI takes is a millisecond of
#: decode lost (the benchmark holds dashboard decode speed to >= 0.98 of headless). A fast
#: machine never reaches the budget.
UI_CPU_BUDGET = 0.02
#: The most allowance saved up while idle, so a burst of repaints after a quiet spell is short.
UI_CPU_BURST_S = 0.05


class CpuBudget:
    def __init__(self, share: float = UI_CPU_BUDGET, burst_s: float = UI_CPU_BURST_S, *,
                 wall: Callable[[], float] = time.monotonic, cpu: Callable[[], float] = time.thread_time) -> None:
        self.share, self.burst_s = share, burst_s
        self._wall, self._cpu = wall, cpu
        self.allowance = burst_s
        self._mark = (wall(), cpu())

    def allows(self, *, busy: bool) -> bool:
        """Charge the thread's CPU since the last call; True if the allowance is left.
        Not ``busy`` (nothing decodes): the allowance is full, there is nothing to take CPU from."""
        now, used = self._wall(), self._cpu()
        then, used_then = self._mark
        self._mark = (now, used)
        if not busy:
            self.allowance = self.burst_s
            return True
        earned = (now - then) * self.share
        self.allowance = min(self.burst_s, self.allowance + earned - (used - used_then))
        return self.allowance > 0
