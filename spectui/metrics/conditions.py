"""A run's conditions in words: power, thermal state, other processes' load.

What ``spectui report`` shows and ``spectui diff`` compares. Each value is coarse on purpose
(AC or battery, throttled or not, shared or quiet): two runs whose temperatures differ by a
degree ran under the same conditions, one beside a busy process did not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from spectui.config import EnvelopeConfig
from spectui.metrics.envelope import EnvelopeFacts
from spectui.metrics.host.load import OtherLoad
from spectui.recording.schema import Event, MemorySample

NOT_AVAILABLE = "not available"
#: other processes' mean share of all cores above which a machine is shared (the envelope's
#: default ``max_other_cpu``; a run's own envelope may say otherwise)
SHARED_ABOVE = EnvelopeConfig().max_other_cpu


@dataclass(frozen=True)
class MachineLoad:
    """What other processes took of the CPU while something was measured, judged once for every
    command: a speedup measured on a shared machine is the load's answer, not the machine's.
    ``spectui diff`` and ``report`` say it of a run; tune, sweep, compare, workload and the
    dashboard's compare say it of what they measured."""

    #: mean share of all cores (0..1) busy in other processes; None where not measured
    share: float | None
    limit: float = SHARED_ABOVE

    @property
    def shared(self) -> bool:
        return self.share is not None and self.share > self.limit

    def text(self) -> str:
        """``SHARED machine: other processes 50% of the CPU`` (or ``quiet: ...``)."""
        if self.share is None:
            return NOT_AVAILABLE
        return f"{'SHARED machine' if self.shared else 'quiet'}: other processes {self.share:.0%} of the CPU"

    def worst(self, other: MachineLoad) -> MachineLoad:
        """The busier of two measurements (a pair is as disturbed as its busier side)."""
        known = [x for x in (self, other) if x.share is not None]
        return max(known, key=lambda x: x.share or 0.0) if known else self


def machine_load(events: Iterable[Event], limit: float = SHARED_ABOVE) -> MachineLoad:
    """Other processes' load over a recorded run: the mean of its samples' readings."""
    return readings_load([ev.other_cpu_pct for ev in events if type(ev) is MemorySample], limit)


def readings_load(percents: Iterable[int | None], limit: float = SHARED_ABOVE) -> MachineLoad:
    """``MemorySample.other_cpu_pct`` readings (percent of all cores; None: not read) as a load."""
    known = [p for p in percents if p is not None]
    return MachineLoad(sum(known) / len(known) / 100 if known else None, limit)


class LoadSpan:
    """Other processes' load over a span of this process's work (a run measured without a
    memory sampler: tune's checks): ``start()``, the work, then ``load()``."""

    def __init__(self, limit: float = SHARED_ABOVE) -> None:
        self.limit = limit
        self._reader = OtherLoad()

    def start(self) -> LoadSpan:
        self._read()
        return self

    def load(self) -> MachineLoad:
        pct = self._read()
        return MachineLoad(None if pct is None else pct / 100, self.limit)

    def _read(self) -> int | None:
        try:
            return self._reader.read()
        except Exception:  # noqa: BLE001 - e.g. psutil refused in a locked-down container: not measured
            return None


def power_text(f: EnvelopeFacts) -> str:
    if f.on_ac_power is None and f.low_power_mode is None:
        return NOT_AVAILABLE
    source = "battery" if f.on_ac_power is False else "AC" if f.on_ac_power else "source not reported"
    low = {True: ", low-power mode on", False: ", low-power mode off", None: ""}[f.low_power_mode]
    return source + low


def throttling_text(f: EnvelopeFacts) -> str:
    if f.throttle_events is None:
        return NOT_AVAILABLE
    return "none" if f.throttle_events == 0 else f"{f.throttle_events} throttle events"


def thermal_text(f: EnvelopeFacts) -> str:
    """Temperature, clock, OS thermal level and fan, where the host exposes them."""
    parts = []
    if f.max_thermal_level is not None:
        parts.append(f"thermal level {f.max_thermal_level}")
    if f.max_temperature_c is not None:
        parts.append(f"max {f.max_temperature_c:.0f} C")
    if f.min_cpu_freq_pct is not None:
        parts.append(f"CPU clock down to {f.min_cpu_freq_pct}% of max")
    if f.max_fan_rpm is not None:
        parts.append(f"fan up to {f.max_fan_rpm} rpm")
    return ", ".join(parts) or NOT_AVAILABLE


def other_load_text(f: EnvelopeFacts) -> str:
    if f.other_cpu_mean is None:
        return NOT_AVAILABLE
    return f"{MachineLoad(f.other_cpu_mean, f.envelope.max_other_cpu).text()} (peak {f.other_cpu_max or 0:.0%})"


def busiest_text(f: EnvelopeFacts) -> str:
    return ", ".join(f"{p.name} (pid {p.pid}) {p.cpu_share:.0%}" for p in f.other_processes) or "none above 1%"


def conditions(f: EnvelopeFacts) -> dict[str, str]:
    """The conditions a diff compares, by name; values are coarse so only real changes differ."""
    shared = NOT_AVAILABLE if f.other_cpu_mean is None else ("shared" if f.other_load_flagged else "quiet")
    return {
        "power": power_text(f),
        "thermal throttling": throttling_text(f),
        "thermal level": NOT_AVAILABLE if f.max_thermal_level is None else str(f.max_thermal_level),
        "other load": shared,
    }
