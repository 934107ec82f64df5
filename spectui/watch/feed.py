"""Where a watch's samples come from: a server read live, or a recording played back.

Both hand each ``WatchSample`` to ``on_sample`` on a thread of their own (never the caller's:
a dashboard posts it as a message, the headless watch puts it on a queue) and call ``on_end``
with a line saying why they stopped. ``request_stop`` never waits; ``finish`` (after the screen
is gone) waits for the thread and, live, closes the recording with its ``End``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence

from spectui.metrics.watch_rates import WatchTotals
from spectui.recording.schema import FinishReason
from spectui.server.client import ServerClient
from spectui.watch.process import ProcessProbe
from spectui.watch.record import WatchRecorder
from spectui.watch.sampler import WatchSample, WatchSampler
from spectui.watch.source import WatchTarget

OnSample = Callable[[WatchSample], None]
OnEnd = Callable[[str], None]


class LiveFeed:
    """A ``WatchSampler`` on the server, each sample recorded (on the sampler's thread) before
    it is handed on."""

    def __init__(
        self,
        client: ServerClient,
        target: WatchTarget,
        *,
        interval_s: float,
        max_samples: int | None = None,
        duration_s: float | None = None,
        probe: ProcessProbe | None = None,
        recorder: WatchRecorder | None = None,
        energy: Callable[[], float | None] | None = None,
    ) -> None:
        self.recorder = recorder
        self.probe = probe
        self._on_sample: OnSample = lambda _s: None
        self._stopped_by_user = False
        self.sampler = WatchSampler(
            client, target, self._take, interval_s=interval_s, max_samples=max_samples, duration_s=duration_s,
            process=probe.read if probe is not None and probe.found else None, energy=energy,
        )  # fmt: skip

    def _take(self, sample: WatchSample) -> None:
        if self.recorder is not None:
            self.recorder.write(sample)
        self._on_sample(sample)

    @property
    def done(self) -> threading.Event:
        return self.sampler.done

    @property
    def totals(self) -> WatchTotals:
        return self.sampler.totals

    def start(self, on_sample: OnSample, on_end: OnEnd | None = None) -> None:
        self._on_sample = on_sample
        self.sampler.start()
        if on_end is not None:
            threading.Thread(target=self._wait_end, args=(on_end,), name="spectui-watch-end", daemon=True).start()

    def _wait_end(self, on_end: OnEnd) -> None:
        self.sampler.done.wait()
        if not self._stopped_by_user:
            n = self.sampler.core.n
            on_end(f"the watch ended after {n} readings (its --samples / --duration)")

    def request_stop(self) -> None:
        self._stopped_by_user = True
        self.sampler.request_stop()

    def finish(self) -> None:
        """Wait for the sampler, then end the recording: ``length`` when the watch ran to its
        bound, ``interrupted`` when it was stopped (q, Ctrl-C)."""
        self.sampler.stop()
        if self.recorder is not None:
            reason: FinishReason = "interrupted" if self._stopped_by_user else "length"
            self.recorder.close(self.sampler.totals, reason)


class ReplayFeed:
    """A recording's samples, each at its recorded time divided by ``speed`` (``inf``: at once)."""

    def __init__(self, samples: Sequence[WatchSample], *, speed: float = 1.0) -> None:
        if not speed > 0:
            raise ValueError("speed must be > 0")
        self.samples = list(samples)
        self.speed = speed
        self.done = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, on_sample: OnSample, on_end: OnEnd | None = None) -> None:
        self._thread = threading.Thread(target=self._run, args=(on_sample, on_end), name="spectui-watch-replay", daemon=True)
        self._thread.start()

    def _run(self, on_sample: OnSample, on_end: OnEnd | None) -> None:
        t0 = time.monotonic()
        try:
            for sample in self.samples:
                if not math.isinf(self.speed):
                    delay = t0 + sample.t_s / self.speed - time.monotonic()
                    if delay > 0 and self._stop.wait(delay):
                        return
                if self._stop.is_set():
                    return
                on_sample(sample)
            if on_end is not None:
                on_end(f"end of the recording: {len(self.samples)} readings")
        finally:
            self.done.set()

    def request_stop(self) -> None:
        self._stop.set()

    def finish(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
