"""The load: N closed-loop clients, or open-loop Poisson arrivals, over a workload's units.

A **closed loop** of N clients: each client takes the next unit (a request on its own, or a
whole conversation, its turns in order) and sends its next request the moment its last one
ended, so N requests are in flight while there is work. An **open loop** at R requests a
second: units arrive at Poisson times (a seeded generator: every setting meets the same
arrivals), each sent when it arrives whatever is in flight, so a server slower than the
arrivals queues them, and the queue shows in TTFT.

``send`` runs one request to its end and returns its outcome; a ``LevelStopped`` from it (the
server died) stops the level: requests in flight finish (each ends with its reason), nothing
new is sent, and the level says why. ``stop`` (Ctrl-C) does the same.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from spectui.workload.result import RequestOutcome
from spectui.workload.source import WorkRequest

#: ``send(request, client, queue_ms)``
Send = Callable[[WorkRequest, int, float], RequestOutcome]
#: at most this many open-loop units in flight: a rate far past what a server takes must not
#: start thousands of threads on this machine
MAX_IN_FLIGHT = 256


class LevelStopped(Exception):
    """The level cannot go on (the server is gone): its message says why, in one line."""


class _Level:
    def __init__(self, send: Send, stop: threading.Event) -> None:
        self.send = send
        self.stop = stop
        self.outcomes: list[RequestOutcome] = []
        self.lock = threading.Lock()
        self.stopped = ""

    def run_unit(self, unit: Sequence[WorkRequest], client: int, queue_ms: float = 0.0) -> None:
        for r in unit:
            if self.stop.is_set():
                return
            try:
                outcome = self.send(r, client, queue_ms)
            except LevelStopped as exc:
                with self.lock:
                    self.stopped = self.stopped or str(exc)
                self.stop.set()
                return
            queue_ms = 0.0  # a later turn is sent the moment the one before ended
            with self.lock:
                self.outcomes.append(outcome)


def closed_loop(units: Sequence[Sequence[WorkRequest]], clients: int, send: Send, stop: threading.Event) -> tuple[list[RequestOutcome], float, str]:
    """(outcomes in the order they ended, wall seconds, why it stopped early or "")."""
    level = _Level(send, stop)
    todo = list(units)
    taken = threading.Lock()

    def client(number: int) -> None:
        while not stop.is_set():
            with taken:
                if not todo:
                    return
                unit = todo.pop(0)
            level.run_unit(unit, number)

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,), name=f"spectui-client-{i}", daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return level.outcomes, time.perf_counter() - started, level.stopped


def arrivals(n: int, rate: float, seed: int) -> list[float]:
    """Seconds from the start at which ``n`` units arrive, Poisson at ``rate`` a second."""
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=n)
    return [float(t) for t in np.cumsum(gaps) - gaps[0]]  # the first arrives at once


def open_loop(
    units: Sequence[Sequence[WorkRequest]], rate: float, send: Send, stop: threading.Event, *, seed: int = 0
) -> tuple[list[RequestOutcome], float, str]:
    """(outcomes, wall seconds, why it stopped early or "") at ``rate`` units a second."""
    level = _Level(send, stop)
    threads: list[threading.Thread] = []
    started = time.perf_counter()
    for i, (unit, at) in enumerate(zip(units, arrivals(len(units), rate, seed))):
        if stop.wait(max(0.0, at - (time.perf_counter() - started))):
            break
        while sum(t.is_alive() for t in threads) >= MAX_IN_FLIGHT and not stop.wait(0.01):
            pass
        late_ms = max(0.0, (time.perf_counter() - started - at) * 1000)
        t = threading.Thread(target=level.run_unit, args=(unit, i, late_ms), name=f"spectui-arrival-{i}", daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    return level.outcomes, time.perf_counter() - started, level.stopped
