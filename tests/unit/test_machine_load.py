"""One judgement of other processes' load for every command (``metrics.conditions``)."""

from __future__ import annotations

from spectui.metrics.conditions import SHARED_ABOVE, MachineLoad, machine_load
from spectui.recording.schema import MemorySample


def sample(pct: int | None) -> MemorySample:
    return MemorySample(t_us=0, rss=1, available=1, headroom=1, other_cpu_pct=pct)


def test_a_run_is_shared_when_others_took_more_than_the_envelope_allows():
    assert SHARED_ABOVE == 0.25
    load = machine_load([sample(40), sample(60), sample(None)])
    assert load.shared and load.share == 0.5 and load.text() == "SHARED machine: other processes 50% of the CPU"
    assert machine_load([sample(10)]).text() == "quiet: other processes 10% of the CPU"
    assert not machine_load([sample(40)], limit=0.5).shared  # a run's own envelope decides
    unknown = machine_load([])
    assert unknown.share is None and not unknown.shared and unknown.text() == "not available"


def test_a_pair_is_as_disturbed_as_its_busier_side():
    quiet, busy, unknown = MachineLoad(0.05), MachineLoad(0.6), MachineLoad(None)
    assert quiet.worst(busy) is busy and busy.worst(quiet) is busy
    assert unknown.worst(quiet) is quiet and unknown.worst(unknown) is unknown


def test_sweep_and_workload_rows_say_shared_beside_the_speedup():
    from spectui.lab.sweep_report import COLUMNS
    from spectui.lab.sweep_table import SweepRow
    from spectui.workload.report import level_row
    from spectui.workload.result import LevelResult

    cell = dict(COLUMNS)["speedup"]
    numbers = dict(runs=2, acceptance_p50=0.5, tok_s_p50=1.0, tok_s_p95=1.0, itl_p95_ms=1.0, itl_p99_ms=1.0, ttft_ms=1.0,
                   peak_rss_bytes=1, swap_growth_bytes=0, speedup=0.63, speedup_ci_low=0.6, speedup_ci_high=0.7)
    row = SweepRow(tier="code", knob="k", value="4", label="K=4", **numbers)
    assert cell(row) == "0.63x"
    shared = MachineLoad(0.5)
    row = SweepRow(tier="code", knob="k", value="4", label="K=4", other_load=shared.share, disturbed=shared.shared, **numbers)
    assert cell(row) == "0.63x SHARED 50%"
    level = LevelResult(setting="ngram", family="embedded", ar=False, speedup=1.2, other_load=0.5, disturbed=True)
    assert level_row(level)[4] == "1.20x SHARED 50%"
