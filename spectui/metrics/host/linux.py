"""Linux: sysfs for thermal state, throttling, fans and power; /proc for swap and pressure.

* throttling: ``/sys/devices/system/cpu/cpu*/thermal_throttle/{core,package}_throttle_count``
  (events since boot); clock: cpufreq ``scaling_cur_freq`` against ``cpuinfo_max_freq``;
  temperature: ``/sys/class/thermal/thermal_zone*/temp``; fans:
  ``/sys/class/hwmon/hwmon*/fan*_input`` (RPM); power: ``/sys/class/power_supply/*/{type,online}``
  and ``/sys/firmware/acpi/platform_profile`` (``low-power``).
* swap: psutil's ``swap_memory()`` ``sin``/``sout``, which on Linux are ``/proc/vmstat``
  ``pswpin``/``pswpout``: pages read from and written to swap devices only.
* pressure: PSI, ``/proc/pressure/memory`` "some avg10" (percent of the last 10 s in which at
  least one task stalled on memory). Absent on old kernels; unreadable when PSI is disabled.

Sources are globbed once, at construction; a VM or container that exposes none reads as not
available. No GPU working-set limit: a discrete GPU's memory is not the system's.
"""

from __future__ import annotations

import glob
import os

import psutil

from spectui.metrics.host.base import Host, HostReading, read_int, read_text

PSI_PATH = "/proc/pressure/memory"
#: sysfs readings (a few files per CPU) refresh this often; between refreshes the last values
#: are repeated. Throttle counts are cumulative, so nothing is lost by reading less often.
SYSFS_EVERY_S = 1.0


def parse_psi_some_avg10(line: bytes) -> float:
    """``some avg10=0.12 avg60=... total=...`` -> 0.12."""
    return float(line.split(b"avg10=", 1)[1].split(None, 1)[0])


class LinuxHost(Host):
    """The sysfs and /proc readers. Paths are found once; a source with no readable file is
    dropped. ``root`` and ``psi_path`` point elsewhere in tests (a laptop's tree laid out in a
    temporary folder)."""

    platform = "linux"
    slow_every_s = SYSFS_EVERY_S

    def __init__(self, root: str = "/sys", psi_path: str = PSI_PATH) -> None:
        cpu = f"{root}/devices/system/cpu"
        self.throttle_files = sorted(
            glob.glob(f"{cpu}/cpu[0-9]*/thermal_throttle/core_throttle_count")
            + glob.glob(f"{cpu}/cpu[0-9]*/thermal_throttle/package_throttle_count")
        )
        freq = []
        for cur in sorted(glob.glob(f"{cpu}/cpu[0-9]*/cpufreq/scaling_cur_freq")):
            top = read_int(os.path.join(os.path.dirname(cur), "cpuinfo_max_freq"))
            if top:  # the maximum is a constant: read once
                freq.append((cur, top))
        self.freq_files = freq
        self.zone_files = sorted(glob.glob(f"{root}/class/thermal/thermal_zone*/temp"))
        self.fan_files = sorted(glob.glob(f"{root}/class/hwmon/hwmon*/fan*_input"))
        self.supplies = sorted(glob.glob(f"{root}/class/power_supply/*"))
        self.profile_file = f"{root}/firmware/acpi/platform_profile"
        if read_text(self.profile_file) is None:
            self.profile_file = ""
        self.psi_path = psi_path
        try:
            self._read_psi()  # probe once: a source that fails now is never retried
        except (OSError, ValueError, IndexError):
            self.psi_path = ""

    # -- fast readings --------------------------------------------------------------------

    def swap_bytes(self) -> tuple[int, int] | None:
        swap = psutil.swap_memory()
        return swap.sin, swap.sout

    def _read_psi(self) -> float:
        with open(self.psi_path, "rb") as f:
            return parse_psi_some_avg10(f.readline())

    def pressure(self) -> float:
        if not self.psi_path:
            return -1.0
        try:
            return self._read_psi()
        except (OSError, ValueError, IndexError):
            return -1.0

    def has_pressure(self) -> bool:
        return bool(self.psi_path)

    # -- slow readings --------------------------------------------------------------------

    def throttle_count(self) -> int | None:
        values = [v for v in map(read_int, self.throttle_files) if v is not None]
        return sum(values) if values else None

    def cpu_freq_pct(self) -> int | None:
        shares = [cur / top for cur, top in ((read_int(p), top) for p, top in self.freq_files) if cur is not None]
        return round(100 * sum(shares) / len(shares)) if shares else None

    def temperature_mc(self) -> int | None:
        # some zones report nonsense (negative, or 0 on a sensor that is off): keep plausible ones
        values = [v for v in map(read_int, self.zone_files) if v is not None and 0 < v < 150_000]
        return max(values) if values else None

    def fan_rpm(self) -> int | None:
        values = [v for v in map(read_int, self.fan_files) if v is not None]
        return max(values) if values else None

    def on_ac_power(self) -> bool | None:
        """True when a mains adapter is online, False when only batteries are; None when the
        machine reports no power supply at all (desktops, servers, VMs)."""
        mains: list[bool] = []
        battery = False
        for supply in self.supplies:
            kind = read_text(f"{supply}/type")
            if kind == "Mains" or kind == "USB":
                online = read_int(f"{supply}/online")
                if online is not None:
                    mains.append(bool(online))
            elif kind == "Battery":
                battery = True
        if any(mains):
            return True
        if mains or battery:  # adapters all offline, or a battery and no adapter in sight
            status = [read_text(f"{s}/status") for s in self.supplies]
            return False if mains or "Discharging" in status else None
        return None

    def low_power_mode(self) -> bool | None:
        if not self.profile_file:
            return None
        profile = read_text(self.profile_file)
        return None if profile is None else profile == "low-power"

    def slow(self) -> HostReading:
        return HostReading(
            throttle_count=self.throttle_count(),
            cpu_freq_pct=self.cpu_freq_pct(),
            temperature_mc=self.temperature_mc(),
            fan_rpm=self.fan_rpm(),
            on_ac_power=self.on_ac_power(),
            low_power_mode=self.low_power_mode(),
        )
