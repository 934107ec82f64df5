"""The watch's energy: this machine's counter read at each reading (a RAPL tree written as the
kernel lays it out), watts between readings, joules per generated token over the watch, kept
in the recording and read back the same; without a counter, the watch says why."""

from __future__ import annotations

from pathlib import Path

from spectui.metrics.energy import open_energy
from spectui.metrics.energy_rapl import RaplReader
from spectui.metrics.prometheus import LLAMA_SERVER, CounterReading
from spectui.watch.record import reading_record, replay_samples
from spectui.watch.sampler import WatchCore
from spectui.watch.source import Poll
from spectui.watch.text import energy_figures, energy_line, sample_line, summary_json, watch_joules
from tests.unit.test_energy import set_uj, zone


def reading(t: float, generated: float) -> CounterReading:
    return CounterReading(server="llama-server", t_s=t, generated_tokens=generated, requests_running=1.0)


def test_joules_per_generated_token_over_the_watch_and_in_its_recording(tmp_path: Path) -> None:
    pkg = zone(tmp_path / "powercap", "intel-rapl:0", "package-0", 5_000_000)
    probe = open_energy(openers=[lambda: RaplReader(str(tmp_path / "powercap"))])
    read = probe.total_joules
    core = WatchCore(0.0)
    samples = []
    for t, generated, uj in ((0.0, 0, 5_000_000), (1.0, 100, 35_000_000), (2.0, 300, 75_000_000)):
        set_uj(pkg, uj)
        samples.append(core.take(Poll(reading(t, generated), None), t, None, read()))
    assert samples[0].watts is None and round(samples[1].watts, 3) == 30.0 and round(samples[2].watts, 3) == 40.0
    assert "machine 40.0 W" in sample_line(LLAMA_SERVER, samples[2])
    figures = energy_figures(watch_joules(samples), core.fold.totals, probe.sources)
    assert round(figures["joules"], 3) == 70.0 and round(figures["joules_per_token"], 4) == round(70 / 300, 4)
    assert "70.0 J over the watch, 0.233 J per generated token" in energy_line(figures)
    # recorded and read back: the same figures
    again, totals = replay_samples([reading_record(s) for s in samples], "llama-server")
    assert [s.watts for s in again] == [s.watts for s in samples]
    assert summary_json(totals, 3, 0, energy_figures(watch_joules(again), totals, probe.sources))["joules"] == figures["joules"]


def test_without_a_counter_the_watch_says_why() -> None:
    probe = open_energy(rapl_root="/nonexistent-powercap", openers=None)
    if probe.available:  # a machine with a real counter: nothing to say here
        return
    line = energy_line(energy_figures(None, WatchCore(0.0).fold.totals, probe.why_not))
    assert line is not None and line.startswith("energy: not available here:")
