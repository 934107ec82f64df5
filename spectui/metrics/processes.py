"""What a server process and everything it started cost: CPU seconds and resident memory over
its whole process tree (llama-server's children included), read with psutil. A process that
ended or cannot be read gives None / NaN, never an error: these figures sit beside a run's
results and must not stop it."""

from __future__ import annotations

import math
from collections.abc import Iterator

import psutil


def _tree(pid: int) -> Iterator[psutil.Process]:
    try:
        proc = psutil.Process(pid)
        yield proc
        yield from proc.children(recursive=True)
    except psutil.Error:
        return


def tree_cpu_s(pid: int | None) -> float | None:
    """User plus system CPU seconds of ``pid`` and its descendants so far (None: unknown)."""
    if pid is None:
        return None
    try:
        return sum(sum(p.cpu_times()[:2]) for p in _tree(pid))
    except psutil.Error:
        return None


def tree_rss_mib(pid: int | None) -> float:
    """Resident memory of ``pid`` and its descendants, MiB (NaN: unknown)."""
    try:
        return sum(p.memory_info().rss for p in _tree(pid)) / (1 << 20) if pid is not None else math.nan
    except psutil.Error:
        return math.nan
