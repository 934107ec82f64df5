"""Linux RAPL through the powercap sysfs tree: ``/sys/class/powercap/intel-rapl:*``.

Each zone directory has ``name`` (``package-0``, ``core``, ``uncore``, ``dram``, ``psys``),
``energy_uj`` (a counter in microjoules) and ``max_energy_range_uj`` (where the counter wraps back
to zero). The kernel's powercap documentation describes the tree; AMD processors appear under
the same ``intel-rapl`` names. Since Linux 5.10 ``energy_uj`` is readable by root only (a
side channel), and most virtual machines expose no zone at all: both are "not available", said
as such.

What counts toward the machine's total: the packages (``intel-rapl:N``, named ``package-N``),
plus DRAM zones, which RAPL measures beside the package rather than inside it. ``core`` and
``uncore`` are parts of their package, and ``psys`` (laptops) covers the whole platform
including the packages: they are read and reported as domains but not added, or the total would
count the same joules twice.

``root`` is a parameter so tests read a fixture tree the same way.
"""

from __future__ import annotations

import os
import re

from spectui.metrics.energy_base import EnergyReader, NotAvailable

DEFAULT_ROOT = "/sys/class/powercap"
_ZONE = re.compile(r"^intel-rapl:\d+(?::\d+)?$")


def _read_int(path: str) -> int:
    with open(path, encoding="ascii") as f:
        return int(f.read().strip())


class RaplReader(EnergyReader):
    """Cumulative joules per RAPL zone since the reader opened, wrap-arounds included: a zone
    whose counter reads lower than last time wrapped at its ``max_energy_range_uj``. Read more
    often than a counter can wrap twice (at 100 W a 262 kJ range wraps every ~44 minutes)."""

    source = "RAPL"

    def __init__(self, root: str = DEFAULT_ROOT) -> None:
        self.root = root
        try:
            entries = sorted(os.listdir(root))
        except OSError:
            entries = []
        zones = [e for e in entries if _ZONE.match(e)]
        if not zones:
            raise NotAvailable(f"no RAPL counters under {root} (most virtual machines have none)")
        self._zones: list[tuple[str, str, int, bool]] = []  # (domain, energy path, range, counted)
        self._last: dict[str, int] = {}
        self._joules: dict[str, float] = {}
        denied = 0
        for zone in zones:
            path = os.path.join(root, zone)
            try:
                with open(os.path.join(path, "name"), encoding="ascii") as f:
                    kind = f.read().strip()
                max_range = _read_int(os.path.join(path, "max_energy_range_uj"))
                first = _read_int(os.path.join(path, "energy_uj"))
            except PermissionError:
                denied += 1
                continue
            except (OSError, ValueError):
                continue  # a zone without a readable counter is not one to read
            domain = kind if zone.count(":") == 1 else f"{kind} ({zone})"
            if domain in self._joules:
                domain = f"{kind} ({zone})"
            counted = kind.startswith("package") or kind == "dram"
            self._zones.append((domain, os.path.join(path, "energy_uj"), max_range, counted))
            self._last[domain] = first
            self._joules[domain] = 0.0
        if not self._zones:
            if denied:
                raise NotAvailable(
                    f"RAPL counters under {root} are readable by root only (Linux 5.10 and later):"
                    " run as root, or grant read access to their energy_uj files"
                )
            raise NotAvailable(f"RAPL zones under {root} have no readable energy counter")
        self.domains = tuple(d for d, *_ in self._zones)
        self.counted = tuple(d for d, _, _, counted in self._zones if counted)

    def read_joules(self) -> dict[str, float]:
        for domain, path, max_range, _ in self._zones:
            raw = _read_int(path)
            last = self._last[domain]
            # the counter only grows until it wraps to zero at max_energy_range_uj
            delta = raw - last if raw >= last else raw + (max_range - last)
            self._joules[domain] += delta / 1e6
            self._last[domain] = raw
        return dict(self._joules)
