"""A recording as a timeline: when each event happened, for replay at the original pace.

Events carry session times (microseconds since the ``Header``) in different fields; a
``Step`` is placed at its last token's time (the block is complete then: that is when a live
run posts it). Times are made non-decreasing, because the memory sampler's thread may stamp
a sample a moment before a step that it is written after.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

import msgspec

from spectui.recording.schema import End, Event, Header, MemorySample, PolicyChange, Prefill, Step


def event_time_us(ev: Event) -> int:
    if type(ev) is Step:
        return ev.t_us[-1] if ev.t_us else 0
    if type(ev) is Prefill:
        return ev.t_end_us
    if isinstance(ev, (MemorySample, PolicyChange, End)):
        return ev.t_us
    return 0  # Header


def shift_event(ev: Event, d_us: int) -> Event:
    """``ev`` with its times ``d_us`` earlier (an interleaved session's clock, see
    ``spectui.sessions.runner``); the header is t=0 and stays."""
    if type(ev) is Step:
        return msgspec.structs.replace(ev, t_us=[t - d_us for t in ev.t_us])
    if type(ev) is Prefill:
        return msgspec.structs.replace(ev, t_start_us=ev.t_start_us - d_us, t_end_us=ev.t_end_us - d_us)
    if isinstance(ev, (MemorySample, PolicyChange, End)):
        return msgspec.structs.replace(ev, t_us=ev.t_us - d_us)
    return ev


class Timeline:
    def __init__(self, events: Sequence[Event]) -> None:
        self.events = list(events)
        times, last = [], 0
        for ev in self.events:
            last = max(last, event_time_us(ev))
            times.append(last)
        self.times = times
        self.step_ends = [i + 1 for i, ev in enumerate(self.events) if type(ev) is Step]

    def __len__(self) -> int:
        return len(self.events)

    @property
    def duration_us(self) -> int:
        return self.times[-1] if self.times else 0

    def time_at(self, n: int) -> int:
        """Session time once the first ``n`` events have happened."""
        return self.times[n - 1] if n > 0 else 0

    def count_at(self, t_us: float) -> int:
        """How many events have happened by session time ``t_us``."""
        n = bisect_right(self.times, t_us)
        # The header opens the session at t=0 whatever the clock: it is always shown.
        return max(n, 1 if self.events and type(self.events[0]) is Header else 0)

    def next_block_end(self, n: int) -> int:
        """The event count just past the next ``Step`` after the first ``n`` events (the end
        of the timeline if there is none)."""
        i = bisect_right(self.step_ends, n)
        return self.step_ends[i] if i < len(self.step_ends) else len(self.events)

    def blocks_done(self, n: int) -> int:
        return bisect_right(self.step_ends, n)
