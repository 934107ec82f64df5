"""The host samplers: the real ones on this machine (what it does not expose reads as not
available), the Linux readers on a sysfs tree laid out as a laptop's, and pmset's text (the
macOS readers on outputs captured from real Macs: test_host_macos.py)."""

from __future__ import annotations

import glob
import os
import sys
import time

import pytest

from spectui.metrics.host import HOST_CLASS, Host, HostSignals, LinuxHost, host_class
from spectui.metrics.host.linux import parse_psi_some_avg10
from spectui.metrics.host.macos import MacHost
from spectui.metrics.host.macos_text import parse_pmset_batt, parse_pmset_lowpower, parse_pmset_therm
from spectui.metrics.memory import MemorySampler, is_red_pressure

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads this Linux host's /sys and /proc")


def test_one_implementation_per_os_chosen_once():
    assert host_class("linux") is LinuxHost and host_class("darwin") is MacHost and host_class("win32") is Host
    assert HOST_CLASS is host_class(sys.platform)
    blank = Host()  # an OS without an implementation: everything not available, nothing made up
    assert blank.slow() == type(blank.slow())() and blank.swap_bytes() is None
    assert blank.pressure() == -1.0 and blank.gpu_memory() == (-1, 0) and not blank.has_pressure()


@linux_only
def test_real_sampler_on_this_host_fills_what_it_exposes_and_nothing_else():
    s = MemorySampler(time.perf_counter_ns(), lambda _: None)
    first, second = s.sample_now(), s.sample_now()
    assert first.swap_in_total == 0 and second.swap_in_total >= 0  # counted from the session's start
    assert first.other_cpu_pct is None  # the first reading only sets the baseline
    assert second.other_cpu_pct is not None and 0 <= second.other_cpu_pct <= 100
    has_psi = os.path.exists("/proc/pressure/memory")
    assert (second.red_pressure_ms is not None) == has_psi
    host = LinuxHost()
    # each signal is None exactly when this host has no source for it, never a made-up zero
    assert (second.throttle_events is None) == (not host.throttle_files)
    assert (second.cpu_freq_pct is None) == (not host.freq_files)
    assert (second.temperature_mc is None) == (not [f for f in host.zone_files if open(f).read().strip().lstrip("-").isdigit()])
    assert (second.fan_rpm is None) == (not host.fan_files)
    if not glob.glob("/sys/class/power_supply/*"):
        assert second.on_ac_power is None
    assert second.thermal_level is None  # a macOS-only level
    # swap-ins are the kernel's swap counter (pswpin), read since the session began
    assert second.swap_in_total is not None and second.swap_in_total >= 0
    assert LinuxHost().gpu_memory() == (-1, 0)  # no GPU working-set limit on Linux


@linux_only
def test_linux_swap_and_pressure_on_this_host():
    def vmstat() -> dict[str, int]:
        with open("/proc/vmstat") as f:
            return {k: int(v) for k, v in (line.split() for line in f)}

    host = LinuxHost()
    before = vmstat()
    sin, sout = host.swap_bytes()
    after = vmstat()
    # the kernel's swap counters (pswpin/pswpout, 4 KiB pages as psutil counts them), not
    # pgpgin: pages read from files never count as swap
    assert before["pswpin"] * 4096 <= sin <= after["pswpin"] * 4096
    assert before["pswpout"] * 4096 <= sout <= after["pswpout"] * 4096
    assert host.has_pressure() == os.path.exists("/proc/pressure/memory")
    if host.has_pressure():
        assert host.pressure() >= 0


def test_psi_line_and_a_missing_psi(tmp_path):
    assert parse_psi_some_avg10(b"some avg10=12.50 avg60=3.00 avg300=0.50 total=123456\n") == 12.5
    psi = tmp_path / "memory"
    psi.write_text("some avg10=0.31 avg60=0.10 avg300=0.02 total=99\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    assert LinuxHost(str(tmp_path), psi_path=str(psi)).pressure() == 0.31
    gone = LinuxHost(str(tmp_path), psi_path=str(tmp_path / "absent"))
    assert not gone.has_pressure() and gone.pressure() == -1.0


def write(root, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def test_linux_readers_on_a_laptop_sysfs(tmp_path):
    for cpu, (cur, count) in enumerate([(1_200_000, 3), (2_400_000, 1)]):
        write(tmp_path, f"devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq", str(cur))
        write(tmp_path, f"devices/system/cpu/cpu{cpu}/cpufreq/cpuinfo_max_freq", "2400000")
        write(tmp_path, f"devices/system/cpu/cpu{cpu}/thermal_throttle/core_throttle_count", str(count))
    write(tmp_path, "devices/system/cpu/cpu0/thermal_throttle/package_throttle_count", "2")
    write(tmp_path, "class/thermal/thermal_zone0/temp", "61500")
    write(tmp_path, "class/thermal/thermal_zone1/temp", "-273000")  # a dead sensor is left out
    write(tmp_path, "class/hwmon/hwmon2/fan1_input", "2150")
    write(tmp_path, "class/power_supply/AC/type", "Mains")
    write(tmp_path, "class/power_supply/AC/online", "1")
    write(tmp_path, "class/power_supply/BAT0/type", "Battery")
    write(tmp_path, "class/power_supply/BAT0/status", "Charging")
    write(tmp_path, "firmware/acpi/platform_profile", "balanced")
    host = LinuxHost(str(tmp_path))
    r = host.slow()
    assert (r.throttle_count, r.cpu_freq_pct, r.temperature_mc, r.fan_rpm) == (6, 75, 61500, 2150)
    assert r.on_ac_power is True and r.low_power_mode is False
    write(tmp_path, "class/power_supply/AC/online", "0")
    write(tmp_path, "class/power_supply/BAT0/status", "Discharging")
    write(tmp_path, "firmware/acpi/platform_profile", "low-power")
    r = host.slow()
    assert r.on_ac_power is False and r.low_power_mode is True


def test_linux_readers_on_a_bare_vm(tmp_path):
    r = LinuxHost(str(tmp_path)).slow()
    assert r == type(r)()  # every field None: not available


def test_host_signals_refresh_on_their_own_schedule():
    h = HostSignals(Host(), every_s=10.0)
    a = h.read(100.0)
    assert h.read(105.0) is a and h.read(111.0) is not a


def test_pmset_text():
    intel = "Note: No thermal warning level has been recorded\n CPU_Scheduler_Limit \t= 100\n CPU_Available_CPUs \t= 8\n CPU_Speed_Limit \t= 73\n"
    assert parse_pmset_therm(intel) == (73, 0)
    assert parse_pmset_therm("Thermal warning level is 2\n") == (None, 2)
    assert parse_pmset_therm("") == (None, None)
    assert parse_pmset_batt("Now drawing from 'AC Power'\n -InternalBattery-0 100%; charged;") is True
    assert parse_pmset_batt("Now drawing from 'Battery Power'\n") is False
    assert parse_pmset_batt("garbage") is None
    assert parse_pmset_lowpower("System-wide power settings:\n lowpowermode         1\n sleep 1\n") is True
    assert parse_pmset_lowpower(" lowpowermode 0\n") is False
    assert parse_pmset_lowpower("sleep 1") is None


def test_red_pressure_by_platform():
    assert is_red_pressure(4.0, "darwin") and not is_red_pressure(2.0, "darwin")
    assert is_red_pressure(12.5, "linux") and not is_red_pressure(4.0, "linux")
    assert not is_red_pressure(-1.0, "linux")  # not available is never red
