"""The macOS readers' parsers on outputs captured from real Macs (tests/data/macos/, each with
where it came from in its README), and the vm_statistics64 layout the Mach reader relies on.
They run on any OS: the parsers are pure; only the ctypes calls need a Mac."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest

from spectui.metrics.host.macos import HOST_VM_INFO64_COUNT, VMStatistics64
from spectui.metrics.host.macos_text import (
    THERMAL_STATES,
    parse_pmset_batt,
    parse_pmset_therm,
    parse_sysctl,
    parse_vm_stat,
    swap_bytes_from_counts,
    thermal_state_level,
    vm_stat_swap_bytes,
)

MACOS = Path(__file__).resolve().parents[1] / "data" / "macos"


def captured(name: str) -> str:
    return (MACOS / name).read_text()


def test_every_fixture_is_documented_with_its_source():
    readme = captured("README.md")
    for path in MACOS.iterdir():
        if path.name != "README.md":
            assert f"`{path.name}`" in readme, f"{path.name} has no source in tests/data/macos/README.md"


def test_swap_ins_are_the_kernel_swapins_not_pageins():
    # Apple M1: 18.8 M pageins (every page read from a file) against 0.73 M real swap-ins
    page_size, counts = parse_vm_stat(captured("vm_stat-apple-m1.txt"))
    assert page_size == 16384
    assert counts["Pageins"] == 18811038 and counts["Swapins"] == 729059 and counts["Swapouts"] == 6987980
    assert counts["Translation faults"] == 587255247  # the quoted name parses too
    sin, sout = vm_stat_swap_bytes(captured("vm_stat-apple-m1.txt"))
    assert (sin, sout) == (729059 * 16384, 6987980 * 16384)
    assert sin < counts["Pageins"] * page_size  # what psutil would have called swap-ins


def test_large_pageins_and_no_swapins_read_as_zero_swap_ins():
    text = captured("vm_stat-pageins-no-swap.txt")
    page_size, counts = parse_vm_stat(text)
    assert page_size == 4096 and counts["Pageins"] * page_size > 1 << 30  # over a GiB read from files
    assert vm_stat_swap_bytes(text) == (0, 0)


def test_vm_stat_without_swap_counters_is_not_available():
    assert vm_stat_swap_bytes("Mach Virtual Memory Statistics: (page size of 4096 bytes)\nPages free: 1.\n") is None
    assert vm_stat_swap_bytes("") is None


def test_pmset_therm_on_apple_silicon_has_no_speed_limit():
    assert parse_pmset_therm(captured("pmset-therm-apple-m1-pro.txt")) == (None, 0)


def test_pmset_thermlog_of_a_throttled_intel_mac():
    assert parse_pmset_therm(captured("pmset-thermlog-intel-throttled.txt")) == (28, None)


def test_pmset_batt_on_ac_and_on_battery():
    assert parse_pmset_batt(captured("pmset-batt-apple-m1-ac.txt")) is True
    assert parse_pmset_batt(captured("pmset-batt-battery.txt")) is False


def test_sysctl_page_size_of_apple_silicon():
    values = parse_sysctl(captured("sysctl-hw.pagesize-apple-m1.txt"))
    assert values == {"hw.pagesize": "16384"}
    assert swap_bytes_from_counts(3, 1, int(values["hw.pagesize"])) == (3 * 16384, 16384)


def test_thermal_state_levels_follow_apples_enumeration():
    assert THERMAL_STATES == ("nominal", "fair", "serious", "critical")
    assert [thermal_state_level(raw) for raw in range(4)] == [0, 1, 2, 3]
    assert thermal_state_level(7) is None and thermal_state_level(-1) is None


def test_vm_statistics64_matches_the_xnu_header():
    # offsets from osfmk/mach/vm_statistics.h: 4 natural_t, 9 uint64, 2 natural_t, 4 uint64,
    # 4 natural_t, 1 uint64; HOST_VM_INFO64_COUNT is 38 natural_t
    assert ctypes.sizeof(VMStatistics64) == 152 and HOST_VM_INFO64_COUNT == 38
    assert VMStatistics64.pageins.offset == 32
    assert VMStatistics64.swapins.offset == 112 and VMStatistics64.swapouts.offset == 120


@pytest.mark.skipif(sys.platform != "darwin", reason="reads this Mac's counters through Mach and Foundation")
def test_mac_host_on_this_mac():
    from spectui.metrics.host.macos import MacHost

    host = MacHost()
    sin, sout = host.swap_bytes()
    assert sin >= 0 and sout >= 0
    assert host.has_pressure() and host.pressure() in (1.0, 2.0, 4.0)
    reading = host.slow()
    assert reading.thermal_level in (0, 1, 2, 3)
