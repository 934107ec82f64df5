"""Energy: joules over an interval, and joules per generated token, where the machine offers a
counter, sampled on a thread of its own so the decode loop never waits for a reading.

Counters (one module each, behind ``energy_base.EnergyReader``): Linux RAPL (``energy_rapl``),
NVIDIA GPUs through NVML (``energy_nvml``) and Apple silicon's IOReport channels
(``energy_apple``); the last two import their optional packages only when opened.
``open_energy`` opens every counter this machine has and keeps, for each it could not open,
the reason; with none it says "not available here: ..." with every reason (a VM has no RAPL, a
laptop no NVIDIA GPU), never a made-up zero.

``EnergySampler`` follows ``spectui.metrics.memory.MemorySampler``'s shape: a daemon thread on
a fixed grid calling ``on_sample`` with each ``EnergySample`` (cumulative joules since it
started, timestamps on the engine's ``t0_ns`` origin so they line up with ``Step`` times), a
first reading at start and a last at stop so a run between the two is covered. The joules of a
window come from those samples (``energy_between`` interpolates the cumulative counter), not
from a reading taken on the decode thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from spectui.metrics.energy_apple import AppleReader
from spectui.metrics.energy_base import EnergyReader, NotAvailable
from spectui.metrics.energy_nvml import NvmlReader
from spectui.metrics.energy_rapl import DEFAULT_ROOT, RaplReader

__all__ = [
    "EnergyInterval", "EnergyProbe", "EnergyReader", "EnergySample", "EnergySampler", "NotAvailable", "energy_between",
    "open_energy",
]  # fmt: skip


@dataclass
class EnergyProbe:
    """The counters opened on this machine, and why each other one could not be."""

    readers: list[EnergyReader] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    @property
    def available(self) -> bool:
        return bool(self.readers)

    @property
    def why_not(self) -> str:
        """The one line a report shows where energy is missing."""
        return "not available here: " + "; ".join(self.reasons) if not self.readers else ""

    @property
    def sources(self) -> str:
        return " + ".join(r.source for r in self.readers)

    def total_joules(self) -> float | None:
        """Every counter opened, summed: cumulative joules (each reader handles its own
        wrap-around); None when there is none or a reading fails."""
        if not self.readers:
            return None
        try:
            return sum(sum(r.read_joules().values()) for r in self.readers)
        except OSError:
            return None

    def close(self) -> None:
        for r in self.readers:
            r.close()


def open_energy(
    *, rapl_root: str = DEFAULT_ROOT, openers: Sequence[Callable[[], EnergyReader]] | None = None
) -> EnergyProbe:
    """Open every energy counter this machine offers. ``openers`` replaces the default list
    (RAPL under ``rapl_root``, NVML, Apple silicon); each raises ``NotAvailable`` with its reason."""
    probe = EnergyProbe()
    for opener in openers if openers is not None else (lambda: RaplReader(rapl_root), NvmlReader, AppleReader):
        try:
            probe.readers.append(opener())
        except NotAvailable as exc:
            probe.reasons.append(str(exc))
    return probe


@dataclass(frozen=True)
class EnergySample:
    """Cumulative joules since the sampler started: in total (the counted domains of every
    reader) and per domain (``"RAPL package-0"``, ``"NVML gpu0"``)."""

    t_us: int
    joules: float
    by_domain: dict[str, float]


@dataclass(frozen=True)
class EnergyInterval:
    seconds: float
    joules: float

    @property
    def watts(self) -> float | None:
        return self.joules / self.seconds if self.seconds > 0 else None

    def per_token(self, tokens: int) -> float | None:
        """Joules per generated token; None when nothing was generated."""
        return self.joules / tokens if tokens > 0 else None


def _at(samples: Sequence[EnergySample], t_us: int) -> float | None:
    """The cumulative joules at ``t_us``, linear between the samples around it; None outside them."""
    if not samples or t_us < samples[0].t_us or t_us > samples[-1].t_us:
        return None
    for a, b in zip(samples, samples[1:]):
        if a.t_us <= t_us <= b.t_us:
            if b.t_us == a.t_us:
                return b.joules
            return a.joules + (b.joules - a.joules) * (t_us - a.t_us) / (b.t_us - a.t_us)
    return samples[-1].joules  # a single sample, exactly at t_us


def energy_between(samples: Sequence[EnergySample], t0_us: int, t1_us: int) -> EnergyInterval | None:
    """The joules spent between two times (a run's first and last step), from the sampler's
    readings; None when the samples do not cover the window (the sampler started late or is
    still running past its last reading)."""
    j0, j1 = _at(samples, t0_us), _at(samples, t1_us)
    if j0 is None or j1 is None or t1_us < t0_us:
        return None
    return EnergyInterval((t1_us - t0_us) / 1e6, j1 - j0)


class EnergySampler:
    """Calls ``on_sample`` with an ``EnergySample`` every ``interval_s`` on a daemon thread,
    from a reading at ``start()`` to one at ``stop()``; keeps them in ``samples``. Failed
    readings are counted in ``errors`` (last in ``last_error``) and never stop the thread."""

    def __init__(
        self,
        t0_ns: int,
        probe: EnergyProbe,
        on_sample: Callable[[EnergySample], None] | None = None,
        interval_s: float = 0.5,
    ) -> None:
        if not probe.available:
            raise NotAvailable(probe.why_not)
        self.t0_ns = t0_ns
        self.probe = probe
        self.on_sample = on_sample
        self.interval_s = interval_s
        self.samples: list[EnergySample] = []
        self.errors = 0
        self.last_error: BaseException | None = None
        self._lock = threading.Lock()  # sample_now may run on the thread and at stop() at once
        self._stop = threading.Event()
        self._wake = threading.Event()  # stop() and wake(): read now rather than at the next tick
        self._thread: threading.Thread | None = None

    def sample_now(self) -> EnergySample:
        with self._lock:
            now = time.perf_counter_ns()
            by_domain: dict[str, float] = {}
            total = 0.0
            for reader in self.probe.readers:
                values = reader.read_joules()
                for domain, joules in values.items():
                    by_domain[f"{reader.source} {domain}"] = joules
                total += sum(values[d] for d in reader.counted if d in values)
            sample = EnergySample((now - self.t0_ns) // 1000, total, by_domain)
            self.samples.append(sample)
            return sample

    def _take(self) -> None:
        try:
            sample = self.sample_now()
            if self.on_sample is not None:
                self.on_sample(sample)
        except Exception as e:  # noqa: BLE001 - the sampler must outlive any failure
            self.errors += 1
            self.last_error = e

    def between(self, t0_us: int, t1_us: int) -> EnergyInterval | None:
        with self._lock:
            return energy_between(list(self.samples), t0_us, t1_us)

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("EnergySampler already started")
        self._thread = threading.Thread(target=self._run, name="spectui-energy", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Have the thread take a reading now (a window starts: a session's first token); the
        caller only sets an event and never waits for the counters."""
        self._wake.set()

    def stop(self) -> None:
        """Stop the thread and take the last reading, so a window ending now is covered."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._take()

    def _run(self) -> None:
        next_at = time.perf_counter()
        while not self._stop.is_set():
            self._take()
            next_at += self.interval_s
            delay = next_at - time.perf_counter()
            if delay < 0:
                next_at, delay = time.perf_counter(), 0.0
            if self._wake.wait(delay):  # woken: read at once, and keep the grid from here
                self._wake.clear()
                next_at = time.perf_counter()

    def __enter__(self) -> EnergySampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
