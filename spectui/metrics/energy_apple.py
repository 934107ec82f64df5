"""Apple silicon through IOReport's energy channels, read by ``zeus-apple-silicon`` (the
``energy`` extra; the ML.ENERGY project's reader, no sudo), imported only when asked.

``AppleEnergyMonitor.get_cumulative_energy()`` returns an ``AppleEnergyMetrics`` whose fields
are millijoules, each ``None`` where the chip lacks the channel (``bindings/zeus_ext.cpp``):
``cpu_total_mj`` (``cpu_mj`` in its first releases), ``gpu_mj``, ``ane_mj``, ``dram_mj``,
``gpu_sram_mj``. CPU, GPU, ANE and DRAM count toward the total; GPU SRAM is reported as a
domain but not added, since whether the GPU channel already includes it is not documented.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

from spectui.metrics.energy_base import EnergyReader, NotAvailable

#: (domain, the fields that may hold it, counted toward the total)
CHANNELS = (
    ("cpu", ("cpu_total_mj", "cpu_mj"), True),
    ("gpu", ("gpu_mj",), True),
    ("ane", ("ane_mj",), True),
    ("dram", ("dram_mj",), True),
    ("gpu_sram", ("gpu_sram_mj",), False),
)


def is_apple_silicon(plat: str = sys.platform, machine: str | None = None) -> bool:
    return plat == "darwin" and (machine or platform.machine()) == "arm64"


class AppleReader(EnergyReader):
    """Cumulative joules per IOReport channel since the reader opened."""

    source = "Apple IOReport"

    def __init__(self) -> None:
        if not is_apple_silicon():
            raise NotAvailable("not Apple silicon")
        try:
            from zeus_apple_silicon import AppleEnergyMonitor
        except ImportError:
            raise NotAvailable("no Apple silicon reader: zeus-apple-silicon is not installed (pip install 'spectui[energy]')") from None
        try:
            self._monitor = AppleEnergyMonitor()
            first = self._channels(self._monitor.get_cumulative_energy())
        except Exception as exc:  # noqa: BLE001 - a native reader's failure, said in one line
            raise NotAvailable(f"Apple silicon energy channels did not answer ({exc})") from None
        if not first:
            raise NotAvailable("Apple silicon energy channels: none reported on this chip")
        self._first = first
        self.domains = tuple(first)
        self.counted = tuple(d for d, _, counted in CHANNELS if counted and d in first)

    @staticmethod
    def _channels(metrics: Any) -> dict[str, float]:
        out: dict[str, float] = {}
        for domain, fields, _ in CHANNELS:
            for name in fields:
                value = getattr(metrics, name, None)
                if value is not None:
                    out[domain] = float(value)
                    break
        return out

    def read_joules(self) -> dict[str, float]:
        now = self._channels(self._monitor.get_cumulative_energy())
        return {d: (now[d] - self._first[d]) / 1e3 for d in self.domains if d in now}
