"""Pure parsers of what macOS prints, one per reader in ``macos.py``.

Each turns a command's text (or an API's raw value) into numbers and nothing else, so it is
tested on any OS against outputs captured on real Macs (``tests/data/macos/``, each with where
it came from). The readers call them on live output; the ctypes paths use the same
conversions (``swap_bytes_from_counts``, ``thermal_state_level``).
"""

from __future__ import annotations

import re

#: NSProcessInfo.thermalState (Apple's ``ProcessInfo.ThermalState``), by raw value
THERMAL_STATES = ("nominal", "fair", "serious", "critical")
#: the thermal state from which Apple says the system itself reduces performance: entering it
#: counts as a throttle event on Apple silicon, where pmset reports no CPU speed limit
THROTTLED_STATE = 2

_VM_STAT_LINE = re.compile(r'^"?([^":]+)"?:\s+(\d+)\.?\s*$', re.M)
_PAGE_SIZE = re.compile(r"page size of (\d+) bytes")


def parse_vm_stat(text: str) -> tuple[int | None, dict[str, int]]:
    """``vm_stat`` -> (page size in bytes, {counter name: pages}), e.g. ``"Swapins"``."""
    page = _PAGE_SIZE.search(text)
    counts = {m.group(1).strip(): int(m.group(2)) for m in _VM_STAT_LINE.finditer(text)}
    return (int(page.group(1)) if page else None), counts


def swap_bytes_from_counts(swapins: int, swapouts: int, page_size: int) -> tuple[int, int]:
    """``vm_statistics64.swapins``/``swapouts`` (pages) -> bytes. Not ``pageins``: those count
    every page read from a file, a memory-mapped model included (what psutil reports as
    ``swap_memory().sin`` on macOS)."""
    return swapins * page_size, swapouts * page_size


def vm_stat_swap_bytes(text: str) -> tuple[int, int] | None:
    """(bytes swapped in, bytes swapped out) since boot from ``vm_stat``; None if it lacks them."""
    page_size, counts = parse_vm_stat(text)
    if page_size is None or "Swapins" not in counts or "Swapouts" not in counts:
        return None
    return swap_bytes_from_counts(counts["Swapins"], counts["Swapouts"], page_size)


def parse_pmset_therm(text: str) -> tuple[int | None, int | None]:
    """(CPU speed limit percent, thermal warning level) from ``pmset -g therm`` (or the same
    lines in ``pmset -g thermlog``, where the last one counts). Apple silicon prints no speed
    limit, only "No thermal warning level has been recorded" (level 0)."""
    limits = re.findall(r"CPU_Speed_Limit\s*=\s*(\d+)", text)
    level = re.search(r"(?:thermal|performance) warning level\s*(?:=|is)?\s*(\d+)", text, re.I)
    if level is None and re.search(r"No thermal warning level", text, re.I):
        level_value: int | None = 0
    else:
        level_value = int(level.group(1)) if level else None
    return (int(limits[-1]) if limits else None), level_value


def parse_pmset_batt(text: str) -> bool | None:
    """``Now drawing from 'AC Power'`` / ``'Battery Power'`` -> True / False."""
    m = re.search(r"drawing from '([^']+)'", text)
    return None if m is None else m.group(1).startswith("AC")


def parse_pmset_lowpower(text: str) -> bool | None:
    """``pmset -g``: the ``lowpowermode`` line (macOS 12+), None where it is not printed."""
    m = re.search(r"^\s*lowpowermode\s+(\d)", text, re.M)
    return None if m is None else m.group(1) == "1"


def parse_sysctl(text: str) -> dict[str, str]:
    """``sysctl name ...`` output (``name: value`` lines) -> {name: value}."""
    out = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() and " " not in name.strip():
            out[name.strip()] = value.strip()
    return out


def thermal_state_level(raw: int) -> int | None:
    """NSProcessInfo.thermalState's raw value -> ``MemorySample.thermal_level`` (0 nominal,
    1 fair, 2 serious, 3 critical); None for a value Apple has not defined."""
    return raw if 0 <= raw < len(THERMAL_STATES) else None
