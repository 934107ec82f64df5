"""The one interface every OS's host readers implement, and what a reading holds.

``Host`` is what the memory sampler asks, whatever the OS: swap traffic, memory pressure, the
GPU's working-set limit, and (slower, refreshed on ``slow_every_s``) thermal state, throttling,
fans and power. Each answer is ``None`` (or ``-1.0`` for pressure) where the machine does not
expose it: "not available", never a made-up zero. The base class answers "not available" to
everything, which is what an OS without an implementation reports.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class HostReading:
    """One reading of the slow-moving host signals; ``None`` = not available."""

    throttle_count: int | None = None  # cumulative since boot (Linux) or events seen (macOS)
    cpu_freq_pct: int | None = None
    temperature_mc: int | None = None
    thermal_level: int | None = None
    fan_rpm: int | None = None
    on_ac_power: bool | None = None
    low_power_mode: bool | None = None


class Host:
    """A machine's signals, read without root. Subclasses override what their OS exposes."""

    #: ``sys.platform`` family this implementation reads ("linux", "darwin", or "other")
    platform = "other"
    #: how often ``slow()`` is worth calling: its sources cost more than a sample's budget
    slow_every_s = 1.0

    def slow(self) -> HostReading:
        """Thermal state, throttling, fans and power."""
        return HostReading()

    def swap_bytes(self) -> tuple[int, int] | None:
        """(bytes swapped in, bytes swapped out) since boot: anonymous memory read back from
        or written to swap, never file pages (a memory-mapped model read from disk is not
        swap)."""
        return None

    def pressure(self) -> float:
        """The OS's memory-pressure reading (``MemorySample.pressure``), -1.0 if none."""
        return -1.0

    def has_pressure(self) -> bool:
        """Whether ``pressure()`` reads a real source on this machine (probed once)."""
        return False

    def gpu_memory(self) -> tuple[int, int]:
        """(bytes this process's GPU allocations hold, the GPU's recommended working-set
        limit); (-1, 0) where there is no such limit (no Metal device)."""
        return -1, 0


def read_int(path: str) -> int | None:
    try:
        with open(path, "rb") as f:
            return int(f.read().strip() or b"x")
    except (OSError, ValueError):
        return None


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None
