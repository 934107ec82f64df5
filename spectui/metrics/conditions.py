"""A run's conditions in words: power, thermal state, other processes' load.

What ``spectui report`` shows and ``spectui diff`` compares. Each value is coarse on purpose
(AC or battery, throttled or not, shared or quiet): two runs whose temperatures differ by a
degree ran under the same conditions, one beside a busy process did not.
"""

from __future__ import annotations

from spectui.metrics.envelope import EnvelopeFacts

NOT_AVAILABLE = "not available"


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
    state = "SHARED machine" if f.other_load_flagged else "quiet"
    return f"{state}: other processes {f.other_cpu_mean:.0%} of the CPU (peak {f.other_cpu_max or 0:.0%})"


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
