"""The machine around a run: thermal state, throttling, fans, power, and other processes' CPU.

Read without root, from what each OS exposes:

* Linux: ``/sys/devices/system/cpu/cpu*/thermal_throttle/{core,package}_throttle_count``
  (throttle events since boot), cpufreq ``scaling_cur_freq`` against ``cpuinfo_max_freq``,
  ``/sys/class/thermal/thermal_zone*/temp``, ``/sys/class/hwmon/hwmon*/fan*_input`` (RPM),
  ``/sys/class/power_supply/*/{type,online}`` and ``/sys/firmware/acpi/platform_profile``
  (``low-power``).
* macOS: ``pmset -g therm`` (CPU speed limit and thermal warning level), ``pmset -g batt``
  (AC or battery) and ``pmset -g`` (``lowpowermode``). pmset is a subprocess (~10 ms), so these
  are read every ``MAC_EVERY_S`` only.

Every reader returns ``None`` when its source is missing: a VM or container exposes no
thermal zones, a desktop no power supply. That is "not available", never zero, and a source
found missing once is not looked for again (a probe per sample would cost more than the
reading). Sources are globbed once, at construction.

Other processes' load is system-wide busy CPU time minus this process's own CPU time, over
the time between samples (``OtherLoad``): two cheap reads (``/proc/stat``, this process's
``stat``). Who the others were is a per-process walk (``top_other_processes``), done once at a
session's start and once at its end, never per sample.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from spectui.recording.schema import OtherProcess

#: pmset is a subprocess: on macOS the power and thermal readings refresh this often
MAC_EVERY_S = 10.0
#: Linux sysfs readings (a few files per CPU) refresh this often; between refreshes the last
#: values are repeated. Throttle counts are cumulative, so nothing is lost by reading less often.
SYSFS_EVERY_S = 1.0


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


def _read_int(path: str) -> int | None:
    try:
        with open(path, "rb") as f:
            return int(f.read().strip() or b"x")
    except (OSError, ValueError):
        return None


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


class LinuxHost:
    """The sysfs readers. Paths are found once; a source with no readable file is dropped."""

    def __init__(self, root: str = "/sys") -> None:
        cpu = f"{root}/devices/system/cpu"
        self.throttle_files = sorted(
            glob.glob(f"{cpu}/cpu[0-9]*/thermal_throttle/core_throttle_count")
            + glob.glob(f"{cpu}/cpu[0-9]*/thermal_throttle/package_throttle_count")
        )
        freq = []
        for cur in sorted(glob.glob(f"{cpu}/cpu[0-9]*/cpufreq/scaling_cur_freq")):
            top = _read_int(os.path.join(os.path.dirname(cur), "cpuinfo_max_freq"))
            if top:  # the maximum is a constant: read once
                freq.append((cur, top))
        self.freq_files = freq
        self.zone_files = sorted(glob.glob(f"{root}/class/thermal/thermal_zone*/temp"))
        self.fan_files = sorted(glob.glob(f"{root}/class/hwmon/hwmon*/fan*_input"))
        self.supplies = sorted(glob.glob(f"{root}/class/power_supply/*"))
        self.profile_file = f"{root}/firmware/acpi/platform_profile"
        if _read_text(self.profile_file) is None:
            self.profile_file = ""

    def throttle_count(self) -> int | None:
        values = [v for v in map(_read_int, self.throttle_files) if v is not None]
        return sum(values) if values else None

    def cpu_freq_pct(self) -> int | None:
        shares = [cur / top for cur, top in ((_read_int(p), top) for p, top in self.freq_files) if cur is not None]
        return round(100 * sum(shares) / len(shares)) if shares else None

    def temperature_mc(self) -> int | None:
        # some zones report nonsense (negative, or 0 on a sensor that is off): keep plausible ones
        values = [v for v in map(_read_int, self.zone_files) if v is not None and 0 < v < 150_000]
        return max(values) if values else None

    def fan_rpm(self) -> int | None:
        values = [v for v in map(_read_int, self.fan_files) if v is not None]
        return max(values) if values else None

    def on_ac_power(self) -> bool | None:
        """True when a mains adapter is online, False when only batteries are; None when the
        machine reports no power supply at all (desktops, servers, VMs)."""
        mains: list[bool] = []
        battery = False
        for supply in self.supplies:
            kind = _read_text(f"{supply}/type")
            if kind == "Mains" or kind == "USB":
                online = _read_int(f"{supply}/online")
                if online is not None:
                    mains.append(bool(online))
            elif kind == "Battery":
                battery = True
        if any(mains):
            return True
        if mains or battery:  # adapters all offline, or a battery and no adapter in sight
            status = [_read_text(f"{s}/status") for s in self.supplies]
            return False if mains or "Discharging" in status else None
        return None

    def low_power_mode(self) -> bool | None:
        if not self.profile_file:
            return None
        profile = _read_text(self.profile_file)
        return None if profile is None else profile == "low-power"

    def read(self) -> HostReading:
        return HostReading(
            throttle_count=self.throttle_count(),
            cpu_freq_pct=self.cpu_freq_pct(),
            temperature_mc=self.temperature_mc(),
            fan_rpm=self.fan_rpm(),
            on_ac_power=self.on_ac_power(),
            low_power_mode=self.low_power_mode(),
        )


def _pmset(*args: str) -> str | None:
    try:
        return subprocess.run(["pmset", *args], capture_output=True, text=True, timeout=5, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def parse_pmset_therm(text: str) -> tuple[int | None, int | None]:
    """(CPU speed limit percent, thermal warning level) from ``pmset -g therm``. Apple silicon
    prints no speed limit, only "No thermal warning level has been recorded" (level 0)."""
    limit = re.search(r"CPU_Speed_Limit\s*=\s*(\d+)", text)
    level = re.search(r"(?:thermal|performance) warning level\s*(?:=|is)?\s*(\d+)", text, re.I)
    if level is None and re.search(r"No thermal warning level", text, re.I):
        level_value: int | None = 0
    else:
        level_value = int(level.group(1)) if level else None
    return (int(limit.group(1)) if limit else None), level_value


def parse_pmset_batt(text: str) -> bool | None:
    """``Now drawing from 'AC Power'`` / ``'Battery Power'`` -> True / False."""
    m = re.search(r"drawing from '([^']+)'", text)
    return None if m is None else m.group(1).startswith("AC")


def parse_pmset_lowpower(text: str) -> bool | None:
    m = re.search(r"^\s*lowpowermode\s+(\d)", text, re.M)
    return None if m is None else m.group(1) == "1"


class MacHost:
    """pmset readings. A speed limit under 100 counts as a throttle event each time it starts."""

    def __init__(self) -> None:
        self.throttles = 0
        self._limited = False

    def read(self) -> HostReading:
        therm, batt, general = _pmset("-g", "therm"), _pmset("-g", "batt"), _pmset("-g")
        limit, level = parse_pmset_therm(therm) if therm is not None else (None, None)
        if limit is not None:
            if limit < 100 and not self._limited:
                self.throttles += 1
            self._limited = limit < 100
        return HostReading(
            throttle_count=self.throttles if limit is not None else None,
            cpu_freq_pct=limit,  # the OS's own cap on the CPU clock, percent
            thermal_level=level,
            on_ac_power=parse_pmset_batt(batt) if batt is not None else None,
            low_power_mode=parse_pmset_lowpower(general) if general is not None else None,
        )


class HostSignals:
    """The slow host readings, refreshed at most every ``every_s`` (repeated in between)."""

    def __init__(self, every_s: float | None = None) -> None:
        source: LinuxHost | MacHost | None
        if sys.platform.startswith("linux"):
            source, default_every = LinuxHost(), SYSFS_EVERY_S
        elif sys.platform == "darwin":
            source, default_every = MacHost(), MAC_EVERY_S
        else:
            source, default_every = None, SYSFS_EVERY_S
        self._read: Callable[[], HostReading] | None = source.read if source is not None else None
        self.every_s = default_every if every_s is None else every_s
        self._last = HostReading()
        self._at = -1e18

    def read(self, now_s: float) -> HostReading:
        if self._read is not None and now_s - self._at >= self.every_s:
            self._at = now_s
            try:
                self._last = self._read()
            except Exception:  # noqa: BLE001 - a host reading must never stop the sampler
                self._last = HostReading()
        return self._last


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
