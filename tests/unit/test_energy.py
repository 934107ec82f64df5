"""Energy readers: Linux RAPL from a powercap fixture tree (written as the kernel lays it out,
wrap-around at ``max_energy_range_uj`` included), the sampler's joules over a window and per
token, and this machine saying plainly which counters it lacks and why.

NVML and Apple silicon need their hardware: a device check with a GPU covers NVML (never CI);
here they must say "not available" with a reason.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from spectui.metrics.energy import (
    EnergyInterval,
    EnergySample,
    EnergySampler,
    NotAvailable,
    energy_between,
    open_energy,
)
from spectui.metrics.energy_apple import AppleReader, is_apple_silicon
from spectui.metrics.energy_nvml import NvmlReader
from spectui.metrics.energy_rapl import RaplReader

MAX_RANGE = 262143328850  # a real package's max_energy_range_uj


def zone(root: Path, name: str, kind: str, energy_uj: int, max_range: int = MAX_RANGE) -> Path:
    z = root / name
    z.mkdir(parents=True)
    (z / "name").write_text(kind + "\n")
    (z / "energy_uj").write_text(f"{energy_uj}\n")
    (z / "max_energy_range_uj").write_text(f"{max_range}\n")
    (z / "enabled").write_text("1\n")
    return z


def set_uj(z: Path, value: int) -> None:
    """A new counter value, replaced atomically: the sampler's thread may be reading the file."""
    tmp = z / "energy_uj.tmp"
    tmp.write_text(f"{value}\n")
    os.replace(tmp, z / "energy_uj")


@pytest.fixture
def powercap(tmp_path) -> dict[str, Path]:
    """Two packages, a core and a DRAM zone inside the first, and a psys zone (a laptop's)."""
    root = tmp_path / "powercap"
    zones = {
        "pkg0": zone(root, "intel-rapl:0", "package-0", 1_000_000),
        "core0": zone(root, "intel-rapl:0:0", "core", 500_000),
        "dram0": zone(root, "intel-rapl:0:1", "dram", 200_000),
        "pkg1": zone(root, "intel-rapl:1", "package-1", MAX_RANGE - 1_000_000),  # about to wrap
        "psys": zone(root, "intel-rapl:2", "psys", 9_000_000),
    }
    (root / "intel-rapl").mkdir()  # the control type directory, not a zone
    zones["root"] = root
    return zones


def test_rapl_reads_joules_and_counts_packages_and_dram_once(powercap):
    reader = RaplReader(str(powercap["root"]))
    assert set(reader.domains) == {"package-0", "core (intel-rapl:0:0)", "dram (intel-rapl:0:1)", "package-1", "psys"}
    # core is inside its package and psys covers the platform: read, not added to the total
    assert set(reader.counted) == {"package-0", "dram (intel-rapl:0:1)", "package-1"}
    assert all(j == 0.0 for j in reader.read_joules().values())
    set_uj(powercap["pkg0"], 3_500_000)  # +2.5 J
    set_uj(powercap["dram0"], 700_000)  # +0.5 J
    j = reader.read_joules()
    assert j["package-0"] == pytest.approx(2.5) and j["dram (intel-rapl:0:1)"] == pytest.approx(0.5)


def test_rapl_wraps_at_max_energy_range(powercap):
    reader = RaplReader(str(powercap["root"]))
    set_uj(powercap["pkg1"], 2_000_000)  # went past max_energy_range_uj and started again from 0
    j = reader.read_joules()
    assert j["package-1"] == pytest.approx(3.0)  # 1 J up to the wrap + 2 J after it
    set_uj(powercap["pkg1"], 2_500_000)
    assert reader.read_joules()["package-1"] == pytest.approx(3.5)  # and it keeps adding


def test_rapl_missing_tree_says_why(tmp_path):
    with pytest.raises(NotAvailable, match=r"no RAPL counters under .* \(most virtual machines have none\)"):
        RaplReader(str(tmp_path / "absent"))
    empty = tmp_path / "powercap"
    (empty / "intel-rapl").mkdir(parents=True)
    with pytest.raises(NotAvailable, match="no RAPL counters"):
        RaplReader(str(empty))


def test_sampler_gives_joules_over_a_window_and_per_token(powercap):
    probe = open_energy(rapl_root=str(powercap["root"]), openers=[lambda: RaplReader(str(powercap["root"]))])
    assert probe.available and probe.sources == "RAPL" and probe.why_not == ""
    t0 = time.perf_counter_ns()
    seen: list[EnergySample] = []
    sampler = EnergySampler(t0, probe, seen.append, interval_s=0.05)
    sampler.start()
    time.sleep(0.15)
    set_uj(powercap["pkg0"], 1_000_000 + 4_000_000)  # 4 J on package 0 while it runs
    set_uj(powercap["psys"], 99_000_000)  # platform counter: reported, never added
    time.sleep(0.15)
    sampler.stop()
    assert sampler.errors == 0 and seen and seen == sampler.samples[: len(seen)]
    first, last = sampler.samples[0], sampler.samples[-1]
    assert first.joules == 0.0 and last.joules == pytest.approx(4.0)
    assert last.by_domain["RAPL psys"] == pytest.approx(90.0)
    window = sampler.between(first.t_us, last.t_us)
    assert window is not None and window.joules == pytest.approx(4.0)
    assert window.per_token(200) == pytest.approx(0.02) and window.per_token(0) is None
    assert window.watts == pytest.approx(4.0 / window.seconds)
    assert sampler.between(first.t_us - 1, last.t_us) is None  # before the first reading: unknown


def test_energy_between_interpolates_the_cumulative_counter():
    samples = [EnergySample(0, 0.0, {}), EnergySample(1_000_000, 10.0, {}), EnergySample(2_000_000, 30.0, {})]
    got = energy_between(samples, 500_000, 1_500_000)
    assert got == EnergyInterval(1.0, pytest.approx(15.0))  # 5 J into the first second, 10 J into the second
    assert energy_between(samples, 0, 2_000_000).joules == 30.0
    assert energy_between(samples, 1_500_000, 2_500_000) is None  # past the last reading
    assert energy_between([], 0, 1) is None


def test_this_machine_says_which_counter_it_lacks_and_why():
    """On this VM: no powercap tree, no NVIDIA GPU, not Apple silicon (each reason named)."""
    if Path("/sys/class/powercap").exists() or sys.platform == "darwin":
        pytest.skip("this machine has a powercap tree or is a Mac: the 'nothing here' case needs a bare Linux VM")
    probe = open_energy()
    if probe.available:  # an NVIDIA GPU with nvidia-ml-py installed: a lent device, not CI
        pytest.skip(f"energy counters found here: {probe.sources}")
    why = probe.why_not
    assert why.startswith("not available here: ")
    assert "no RAPL counters under /sys/class/powercap" in why
    assert "NVIDIA" in why and "not Apple silicon" in why
    with pytest.raises(NotAvailable, match="not available here"):
        EnergySampler(0, probe)


def test_nvml_and_apple_readers_explain_themselves_here():
    if not is_apple_silicon():
        with pytest.raises(NotAvailable, match="not Apple silicon"):
            AppleReader()
    try:
        NvmlReader().close()
    except NotAvailable as exc:
        assert "NVIDIA" in str(exc) or "NVML" in str(exc) or "nvidia-ml-py" in str(exc)
