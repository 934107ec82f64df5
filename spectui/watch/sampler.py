"""The watch's thread: one ``poll`` per tick on a fixed grid, folded into intervals.

``WatchSampler`` follows ``spectui.metrics.memory.MemorySampler``'s shape: a daemon thread,
deadlines on a fixed grid (a slow answer does not push later readings back), ``on_sample``
called on the thread with each ``WatchSample`` (keep it cheap: a queue put, a message post),
failures counted rather than raised. The numbers come from ``WatchFold`` (pure), so a replay of
the recorded readings gives the same figures. It stops by itself after ``max_samples`` readings
or ``duration_s`` seconds, or at ``stop()``.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from spectui.metrics.prometheus import CounterReading
from spectui.metrics.watch_rates import WatchFold, WatchInterval, WatchTotals
from spectui.recording.watch_records import ProcessSample
from spectui.server.client import ServerClient
from spectui.watch.source import LiveSlots, Poll, WatchTarget, poll


@dataclass(frozen=True)
class WatchSample:
    """One tick: seconds since the first reading, the reading, the interval since the previous
    successful reading (None for the first and for a failed read), the live slots where read,
    a failed read's message, and the server process's numbers (a loopback server whose
    process was found: ``spectui.watch.process``)."""

    index: int
    t_s: float
    reading: CounterReading | None
    interval: WatchInterval | None
    live: LiveSlots | None = None
    error: str = ""
    process: ProcessSample | None = None
    #: this machine's energy since the first reading, joules, and its power since the previous
    #: reading, watts (a loopback server where a counter exists; None otherwise)
    joules: float | None = None
    watts: float | None = None


class WatchCore:
    """The pure half: polls in, samples out (the thread and a test drive it the same way)."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.fold = WatchFold()
        self.n = 0
        self._last_energy: tuple[float, float] | None = None  # (t_s, joules) of the previous reading

    def take(self, result: Poll, t_s: float, process: ProcessSample | None = None, joules: float | None = None) -> WatchSample:
        # times to the microsecond from the first reading, as the recording keeps them: a live
        # watch and its replay then fold the same numbers (a rate near a rounding edge, 314.55,
        # showed 314.6 live and 314.5 replayed)
        t_s = self.t0 + round((t_s - self.t0) * 1e6) / 1e6
        reading = result.reading
        if reading is not None:
            reading = dataclasses.replace(reading, t_s=round((reading.t_s - self.t0) * 1e6) / 1e6)
        step = self.fold.add(reading) if reading is not None else None
        watts = None
        if joules is not None:
            if self._last_energy is not None and t_s > self._last_energy[0]:
                watts = (joules - self._last_energy[1]) / (t_s - self._last_energy[0])
            self._last_energy = (t_s, joules)
        sample = WatchSample(self.n, t_s - self.t0, reading, step, result.live, result.error, process, joules, watts)
        self.n += 1
        return sample


class WatchSampler:
    """Polls ``target`` every ``interval_s`` on a daemon thread, starting at once, and calls
    ``on_sample`` with each ``WatchSample``; ``done`` is set when it has stopped. ``process``
    (``ProcessProbe.read``) is asked for the server process's numbers at each reading, ``energy``
    for this machine's cumulative joules."""

    def __init__(
        self,
        client: ServerClient,
        target: WatchTarget,
        on_sample: Callable[[WatchSample], None],
        *,
        interval_s: float = 1.0,
        max_samples: int | None = None,
        duration_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        process: Callable[[], ProcessSample | None] | None = None,
        energy: Callable[[], float | None] | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.client = client
        self.target = target
        self.on_sample = on_sample
        self.interval_s = interval_s
        self.max_samples = max_samples
        self.duration_s = duration_s
        self.clock = clock
        self.process = process
        self.energy = energy  # this machine's cumulative joules, read at each reading
        first = target.first
        # the reading that found the server is the first sample, and the watch's time origin
        self._pending = first
        self.core = WatchCore(first.reading.t_s if first is not None and first.reading is not None else clock())
        self.errors = 0
        self.last_error: BaseException | None = None
        self.done = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def totals(self) -> WatchTotals:
        """The whole watch so far."""
        return self.core.fold.totals

    def sample_now(self) -> WatchSample:
        result, self._pending = self._pending, None
        if result is None:
            result = poll(self.client, self.target, self.clock)
        t = result.reading.t_s if result.reading is not None else self.clock()
        joules = self.energy() if self.energy is not None else None
        return self.core.take(result, t, self.process() if self.process is not None else None, joules)

    def _finished(self, next_at: float) -> bool:
        """Whether the reading due at ``next_at`` is past the bounds (the last reading falls on
        the grid at ``duration_s``, and the thread ends then, not a tick later)."""
        if self.max_samples is not None and self.core.n >= self.max_samples:
            return True
        return self.duration_s is not None and next_at - self.core.t0 > self.duration_s + self.interval_s / 2

    def _run(self) -> None:
        next_at = self.clock()
        try:
            while not self._stop.is_set() and not self._finished(next_at):
                try:
                    self.on_sample(self.sample_now())
                except Exception as e:  # noqa: BLE001 - the watch outlives a bad callback
                    self.errors += 1
                    self.last_error = e
                next_at += self.interval_s
                delay = next_at - self.clock()
                if delay < 0:  # fell behind (a slow server): resync rather than burst
                    next_at, delay = self.clock(), 0.0
                if self._finished(next_at):
                    break
                self._stop.wait(delay)
        finally:
            self.done.set()

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("WatchSampler already started")
        self._thread = threading.Thread(target=self._run, name="spectui-watch", daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the thread to end after the reading in progress, without waiting (a UI thread
        must not wait out a slow server's answer); ``done`` is set when it has."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> WatchSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
