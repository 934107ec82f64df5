"""Other processes' load: the CPU busy outside this process, and who it was.

Other processes' load is system-wide busy CPU time minus this process's own CPU time, over
the time between samples (``OtherLoad``): two cheap reads (``/proc/stat``, this process's
``stat`` on Linux; the same through psutil elsewhere). Who the others were is a per-process
walk (``top_other_processes``), done once at a session's start and once at its end, never per
sample. The same code on every OS: psutil hides the differences.
"""

from __future__ import annotations

import os
import time

import psutil

from spectui.recording.schema import OtherProcess


class OtherLoad:
    """CPU busy outside this process, as a share of all cores, between successive calls.

    Busy is every ``psutil.cpu_times()`` field but idle, iowait and steal (steal is the
    hypervisor's, not a process on this machine). Our own time is this process's user +
    system time, every thread included, so the engine's threads never count as "other"."""

    def __init__(self, process: psutil.Process | None = None) -> None:
        self.process = process or psutil.Process()
        self.n_cpu = psutil.cpu_count() or 1
        self._prev: tuple[float, float, float] | None = None

    @staticmethod
    def _busy() -> float:
        t = psutil.cpu_times()
        idle = t.idle + getattr(t, "iowait", 0.0) + getattr(t, "steal", 0.0)
        total = sum(t)
        # guest time is already inside user on Linux: do not count it twice
        total -= getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
        return total - idle

    def read(self) -> int | None:
        """Percent of all cores busy in other processes since the previous call (None on the
        first call, which only sets the baseline)."""
        own_t = self.process.cpu_times()
        now = (time.perf_counter(), self._busy(), own_t.user + own_t.system)
        prev, self._prev = self._prev, now
        if prev is None:
            return None
        wall = now[0] - prev[0]
        if wall <= 0:
            return None
        other = (now[1] - prev[1]) - (now[2] - prev[2])
        return max(0, min(100, round(100 * other / (wall * self.n_cpu))))


#: (pid, start time) -> (name, user + system CPU seconds); the start time tells a reused pid
#: from the process that had it (names do not: kernel workers rename themselves)
CpuSnapshot = dict[tuple[int, float], tuple[str, float]]


def cpu_snapshot() -> CpuSnapshot:
    """Every process we may read, this one aside (~8 ms for ~70 processes)."""
    me = os.getpid()
    out: CpuSnapshot = {}
    for p in psutil.process_iter(["name", "cpu_times", "create_time"]):
        info = p.info
        times = info.get("cpu_times")
        if p.pid == me or times is None:
            continue
        out[(p.pid, info.get("create_time") or 0.0)] = (info.get("name") or f"pid {p.pid}", times.user + times.system)
    return out


def top_other_processes(before: CpuSnapshot, seconds: float, *, limit: int = 5, min_share: float = 0.01) -> list[OtherProcess]:
    """The processes that took the most CPU since ``before`` (a ``cpu_snapshot``), busiest
    first, as a share of all cores over ``seconds``; those under ``min_share`` are left out.
    A process started since ``before`` counts all its time."""
    if seconds <= 0:
        return []
    n_cpu = psutil.cpu_count() or 1
    loads = []
    for key, (name, cpu_s) in cpu_snapshot().items():
        was = before.get(key)
        used = cpu_s - (was[1] if was is not None else 0.0)
        pid = key[0]
        share = used / (seconds * n_cpu)
        if share >= min_share:
            loads.append(OtherProcess(name=name, pid=pid, cpu_share=round(min(1.0, share), 4)))
    loads.sort(key=lambda x: -x.cpu_share)
    return loads[:limit]
