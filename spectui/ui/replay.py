"""Replay control: where a recording's playback is, at what speed, paused or not.

The player only decides *which* events are due; the controller hands them to an ``Outbox``
as the engine thread does, so a replay goes through the same folding, ``LiveRun`` and repaint
as a live run. Wall time comes in as an argument (``tick(now)``), which keeps the player
testable without a clock. No Textual here.
"""

from __future__ import annotations

import math

from spectui.metrics.live import LiveRun
from spectui.recording.timeline import Timeline

SPEEDS = (0.5, 1.0, 2.0, 4.0, math.inf)
SEEK_S = 5.0


def speed_label(speed: float) -> str:
    return "max" if math.isinf(speed) else f"{speed:g}x"


def parse_speed(text: str) -> float:
    """``1``, ``2x``, ``0.5``, ``max`` -> a speed; ValueError otherwise."""
    t = text.strip().lower()
    if t in ("max", "inf"):  # before the "x" suffix comes off: "max" ends in one
        return math.inf
    value = float(t.removesuffix("x"))
    if not value > 0:
        raise ValueError(text)
    return value


class ReplayPlayer:
    def __init__(
        self, timeline: Timeline, *, speed: float = 1.0, paused: bool = False, at_end: bool = False, now: float = 0.0
    ) -> None:
        self.timeline = timeline
        self.speed = speed
        self.paused = paused or at_end
        self.shown = len(timeline) if at_end else 0  # events handed out so far
        # (wall time, session time in µs) the clock runs from
        self._anchor = (now, float(timeline.time_at(self.shown)))

    @property
    def finished(self) -> bool:
        return self.shown >= len(self.timeline)

    def position_us(self, now: float) -> float:
        wall, t = self._anchor
        if self.paused:
            return t
        if math.isinf(self.speed):
            return math.inf
        return t + (now - wall) * 1e6 * self.speed

    def _reanchor(self, now: float, t_us: float) -> None:
        self._anchor = (now, t_us)

    def tick(self, now: float) -> range:
        """Indices of the events due by ``now``."""
        if self.paused:
            return range(self.shown, self.shown)
        due = self.timeline.count_at(self.position_us(now))
        start, self.shown = self.shown, max(self.shown, due)
        if self.finished:  # the end pauses: space plays it again, seeking back stays put
            self.paused = True
            self._reanchor(now, float(self.timeline.duration_us))
        return range(start, self.shown)

    def set_speed(self, speed: float, now: float) -> None:
        self._reanchor(now, self.clock(now))
        self.speed = speed

    def faster(self, now: float) -> None:
        self.set_speed(next((s for s in SPEEDS if s > self.speed), SPEEDS[-1]), now)

    def slower(self, now: float) -> None:
        self.set_speed(next((s for s in reversed(SPEEDS) if s < self.speed), SPEEDS[0]), now)

    def toggle_pause(self, now: float) -> None:
        """Pause or go on; at the end, play again from the start."""
        if self.paused and self.finished:
            self.shown, self.paused = 0, False
            self._reanchor(now, 0.0)
            return
        self._reanchor(now, self.clock(now))
        self.paused = not self.paused

    def step_block(self, now: float) -> range:
        """Pause, and hand out the events up to the end of the next block."""
        self.paused = True
        start, self.shown = self.shown, self.timeline.next_block_end(self.shown)
        self._reanchor(now, self.timeline.time_at(self.shown))
        return range(start, self.shown)

    def seek(self, delta_s: float, now: float) -> int:
        """Move the clock by ``delta_s`` seconds of session time; returns the new number of
        events shown (fewer than before for a backward seek: the caller rebuilds)."""
        t = min(max(0.0, self.clock(now) + delta_s * 1e6), float(self.timeline.duration_us))
        self.shown = self.timeline.count_at(t)
        self._reanchor(now, t)
        return self.shown

    def clock(self, now: float) -> float:
        """Session time now (at max speed: the time of what has been handed out)."""
        t = self.position_us(now)
        return self.timeline.time_at(self.shown) if math.isinf(t) else t


def replay_detail(player: ReplayPlayer, live: LiveRun, now: float, *, truncated: bool = False) -> str:
    """The header's replay line: ``2x · 1.2/2.4 s · step 30/74 · 64 tokens`` (or ``paused``,
    ``end (length)``, ``truncated recording``)."""
    tl = player.timeline
    at = tl.time_at(player.shown) if player.paused or player.finished else min(player.clock(now), tl.duration_us)
    state = f"paused ({speed_label(player.speed)})" if player.paused else speed_label(player.speed)
    if player.finished:
        state = "end" + (f" ({live.end.reason})" if live.end is not None else " (no end record)")
    parts = [
        state,
        f"{at / 1e6:.1f}/{tl.duration_us / 1e6:.1f} s",
        f"step {tl.blocks_done(player.shown)}/{len(tl.step_ends)}",
        f"{live.n_tokens} tokens",
    ]
    if truncated:
        parts.append("truncated recording")
    return " · ".join(parts)
