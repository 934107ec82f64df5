"""The acceptance brief's verdicts on real schema records: a breach of every limit, and a pass.

Each case takes a real sample recording, replaces its memory samples with ``MemorySample``
records that hold the situation under test, writes it with the real writer and reads it back
before judging, so the verdict is made on what a recording really holds.
"""

from __future__ import annotations

import msgspec
import pytest

from spectui.compare.gate import GateThresholds, format_verdict_text, gate
from spectui.config import EnvelopeConfig
from spectui.lab.soak_analysis import SoakThresholds, analyze_soak
from spectui.metrics.envelope import (
    HEADROOM_SHARE,
    EnvelopeMonitor,
    header_envelope,
    judge_sessions,
    low_acceptance_streak,
    resolve_envelope,
    window_acceptance,
)
from spectui.recording.reader import read_recording
from spectui.recording.schema import End, Header, MemorySample, OtherProcess, Step
from tests.unit.test_diff import sample, write_events
from tests.unit.test_gate import LOOSE, by_name

GIB = 2**30
MIB = 2**20


def quiet(t_us: int, **fields) -> MemorySample:
    """A sample of a machine well inside the envelope; ``fields`` put one thing wrong."""
    values = dict(
        t_us=t_us, rss=300 * MIB, available=20 * GIB, headroom=20 * GIB, pressure=0.0, swap_in_total=0, red_pressure_ms=0,
        throttle_events=0, cpu_freq_pct=100, temperature_mc=50_000, thermal_level=0, fan_rpm=1200, on_ac_power=True,
        low_power_mode=False, other_cpu_pct=3,
    )
    values.update(fields)
    return MemorySample(**values)


def with_samples(tmp_path, name: str, mode: str, samples: list[MemorySample], end_others=()) -> object:
    """A real recording whose memory samples are ``samples`` (written and read back)."""
    events = [e for e in read_recording(sample(name, mode)).events if type(e) is not MemorySample]
    end = events.pop()
    assert type(end) is End
    end = msgspec.structs.replace(end, other_processes=list(end_others))
    path = tmp_path / f"{name}-{mode}-{len(list(tmp_path.iterdir()))}.spectui"
    return read_recording(write_events(path, [*events, *samples, end]))


def judge(tmp_path, samples: list[MemorySample], t: GateThresholds = LOOSE, **kw):
    base = with_samples(tmp_path, "load-typo-fix", "ar", [quiet(i * 250_000) for i in range(8)])
    cand = with_samples(tmp_path, "load-typo-fix", "spec", samples, **kw)
    return gate([base], [cand], t)


EVERY_SECOND = range(0, 10_000_000, 250_000)  # 10 s of samples, 4 a second


def test_a_quiet_machine_passes_every_envelope_check(tmp_path):
    v = judge(tmp_path, [quiet(t) for t in EVERY_SECOND])
    checks = by_name(v)
    assert v.passed, format_verdict_text(v)
    for name in ("headroom", "red pressure", "swap-ins", "thermal", "power", "other load", "acceptance drift"):
        assert checks[name].passed is True, checks[name]
    assert checks["headroom"].value == pytest.approx(20 * 1024) and checks["headroom"].unit == "MiB"
    # no floor declared in the samples' headers: the brief's 10 GB of 24 GB, scaled to the host
    host = read_recording(sample("load-typo-fix")).header.artifacts.host.total_memory_bytes
    assert checks["headroom"].threshold == round(host * HEADROOM_SHARE / MIB)
    assert "the brief's 10/24 of host memory" in checks["headroom"].detail
    assert checks["thermal"].value == 0 and "max 50 C" in checks["thermal"].detail
    assert checks["power"].value == "AC" and not checks["other load"].flagged
    assert all(c.brief for c in v.checks[6:])  # each names the brief's line it enforces


def test_headroom_below_the_floor_fails_at_its_time(tmp_path):
    samples = [quiet(t, headroom=5 * GIB if t == 2_500_000 else 20 * GIB) for t in EVERY_SECOND]
    c = by_name(judge(tmp_path, samples))["headroom"]
    assert c.passed is False and c.value == pytest.approx(5 * 1024)
    assert "first at 2.5 s" in c.detail and "headroom 5.0 GiB < floor" in c.detail
    # a declared floor (here given to the gate) is what is judged
    ok = by_name(judge(tmp_path, samples, msgspec.structs.replace(LOOSE, min_headroom_mib=4096.0)))["headroom"]
    assert ok.passed is True and ok.threshold == 4096.0 and "given to the gate" in ok.detail


def red_run(start_s: float, seconds: float, total_s: float) -> list[MemorySample]:
    """Samples every 0.25 s; red (critical) from ``start_s`` for ``seconds``."""
    out, red_ms = [], 0
    for i in range(int(total_s * 4)):
        t = i * 0.25
        if start_s < t <= start_s + seconds:
            red_ms += 250
        out.append(quiet(int(t * 1e6), red_pressure_ms=red_ms))
    return out


def test_red_pressure_continuous_past_the_limit_fails(tmp_path):
    c = by_name(judge(tmp_path, red_run(5.0, 70.0, 80.0)))["red pressure"]
    assert c.passed is False and c.value == pytest.approx(70.0) and c.threshold == 60.0
    assert "first at 65.2 s" in c.detail  # the sample that took the stretch past 60 s


def test_red_pressure_in_short_stretches_passes(tmp_path):
    two = red_run(5.0, 40.0, 50.0)
    again = [msgspec.structs.replace(s, t_us=s.t_us + 50_000_000, red_pressure_ms=s.red_pressure_ms + 40_000) for s in red_run(0.0, 40.0, 50.0)]
    c = by_name(judge(tmp_path, two + again))["red pressure"]
    assert c.passed is True and c.value == pytest.approx(40.0) and "80.0 s red in all" in c.detail


def test_swap_ins_past_the_limit_fail(tmp_path):
    samples = [quiet(t, swap_in_total=(t // 250_000) * 10 * MIB) for t in EVERY_SECOND]
    c = by_name(judge(tmp_path, samples))["swap-ins"]
    assert c.passed is False and c.value == pytest.approx(390.0) and c.threshold == 200.0
    assert "first at 5.2 s" in c.detail  # 21 x 10 MiB > 200 MiB


def test_one_throttle_event_fails(tmp_path):
    samples = [quiet(t, throttle_events=1 if t >= 3_000_000 else 0, cpu_freq_pct=60 if t >= 3_000_000 else 100) for t in EVERY_SECOND]
    c = by_name(judge(tmp_path, samples))["thermal"]
    assert c.passed is False and c.value == 1 and c.threshold == 0
    assert "first at 3.0 s" in c.detail and "CPU clock down to 60% of max" in c.detail


@pytest.mark.parametrize("fields, value", [({"on_ac_power": False}, "battery"), ({"low_power_mode": True}, "low power")])
def test_battery_or_low_power_fails(tmp_path, fields, value):
    c = by_name(judge(tmp_path, [quiet(t, **fields) for t in EVERY_SECOND]))["power"]
    assert c.passed is False and c.value == value


def test_other_load_over_the_limit_is_flagged_with_the_busiest_process(tmp_path):
    busy = [OtherProcess(name="python3", pid=4242, cpu_share=0.49)]
    v = judge(tmp_path, [quiet(t, other_cpu_pct=52) for t in EVERY_SECOND], end_others=busy)
    c = by_name(v)["other load"]
    assert c.flagged and c.passed is True and v.passed  # flagged, not failed: the brief says "or flagged"
    assert c.value == pytest.approx(0.52) and c.threshold == 0.25
    assert "FLAGGED" in c.detail and "python3 49%" in c.detail
    assert "FLAG  other load" in format_verdict_text(v)


def test_signals_the_host_does_not_expose_are_not_available_never_zero(tmp_path):
    # what a 1.2 recording, or a host without these sources, holds: every new field None
    bare = [MemorySample(t_us=t, rss=300 * MIB, available=20 * GIB, headroom=20 * GIB) for t in EVERY_SECOND]
    base = with_samples(tmp_path, "load-typo-fix", "ar", bare[:8])
    checks = by_name(gate([base], [with_samples(tmp_path, "load-typo-fix", "spec", bare)], LOOSE))
    for name in ("red pressure", "swap-ins", "thermal", "power", "other load"):
        assert checks[name].passed is None and checks[name].value is None and "n/a" in checks[name].detail, name
    assert checks["headroom"].passed is True  # headroom was always recorded


def drift_steps(rates: list[float], window_s: float = 1.0, per_window: int = 4) -> list[Step]:
    """Blocks of 4 drafted tokens, ``per_window`` a window, accepting ``rate`` of them."""
    steps = []
    for w, rate in enumerate(rates):
        for j in range(per_window):
            t = int((w + (j + 0.5) / per_window) * window_s * 1e6)
            accepted = round(4 * rate)
            n = accepted + 1
            steps.append(Step(tokens=[1] * n, origins=[1] * accepted + [2], pieces=[b"x"] * n, t_us=[t] * n, k=4, drafted=4, accepted=accepted))
    return steps


def drift_recording(tmp_path, rates: list[float]):
    events = read_recording(sample("load-typo-fix", "spec")).events
    header, end = events[0], events[-1]
    path = tmp_path / f"drift-{len(list(tmp_path.iterdir()))}.spectui"
    return read_recording(write_events(path, [header, *drift_steps(rates), msgspec.structs.replace(end, t_us=len(rates) * 1_000_000)]))


def test_acceptance_below_the_floor_in_three_windows_in_a_row_fails(tmp_path):
    t = msgspec.structs.replace(LOOSE, window_s=1.0)
    base = read_recording(sample("load-typo-fix"))
    low = drift_recording(tmp_path, [0.75, 0.25, 0.25, 0.25, 0.75])
    c = by_name(gate([base], [low], t))["acceptance drift"]
    assert c.passed is False and c.value == 3 and c.threshold == 2 and "windows 2-4 below" in c.detail
    # two low windows, then a good one, then two more: never more than two in a row
    ok = drift_recording(tmp_path, [0.25, 0.25, 0.75, 0.25, 0.25])
    c = by_name(gate([base], [ok], t))["acceptance drift"]
    assert c.passed is True and c.value == 2
    # both numbers are configurable
    assert by_name(gate([base], [low], msgspec.structs.replace(t, max_low_windows=3)))["acceptance drift"].passed
    assert by_name(gate([base], [ok], msgspec.structs.replace(t, min_window_acceptance=0.2)))["acceptance drift"].value == 0


def test_window_helpers():
    assert low_acceptance_streak([0.5, 0.1, 0.1, float("nan"), 0.1], 0.4) == (2, 1)
    assert low_acceptance_streak([], 0.4) == (0, -1)
    rates = window_acceptance([[Header(), *drift_steps([0.25, 1.0])]], 1.0)
    assert rates == [0.25, 1.0]


def soak_session(start_iso: str, rates: list[float], samples: list[MemorySample]) -> list:
    h = Header(started_at=start_iso)
    return [h, *drift_steps(rates), *samples, End(t_us=len(rates) * 1_000_000, reason="length")]


def test_soak_fails_by_the_window_rule_and_passes_without_it():
    th = SoakThresholds(window_s=1.0)
    flat = [quiet(i * 250_000) for i in range(12)]
    low = soak_session("2026-01-01T00:00:00+00:00", [0.25, 0.25, 0.25], flat)
    r = analyze_soak([low], th)
    assert not r.passed and r.low_acceptance_windows == 3
    assert any("acceptance below 0.4 in 3 consecutive windows" in x for x in r.reasons)
    good = soak_session("2026-01-01T00:00:00+00:00", [0.25, 0.25, 0.75], flat)
    r = analyze_soak([good], th)
    assert r.low_acceptance_windows == 2 and not any("acceptance" in x for x in r.reasons)
    assert not analyze_soak([low], msgspec.structs.replace(th, min_window_acceptance=0.2)).low_acceptance_windows


def test_soak_adds_swap_ins_across_sessions_and_fails_the_envelope():
    th = SoakThresholds(window_s=1.0)
    # each session starts its counter at zero; 120 MiB each, 240 MiB over the soak
    one = [quiet(i * 250_000, swap_in_total=min(i, 12) * 10 * MIB) for i in range(13)]
    a = soak_session("2026-01-01T00:00:00+00:00", [0.75] * 3, one)
    b = soak_session("2026-01-01T00:00:04+00:00", [0.75] * 3, one)
    r = analyze_soak([a, b], th)
    assert r.envelope is not None and r.envelope.swap_in_bytes == 240 * MIB
    swap = next(c for c in r.envelope_checks if c.name == "swap-ins")
    assert swap.passed is False and any(x.startswith("envelope: swap-ins 240.0 MiB") for x in r.reasons)
    assert analyze_soak([a], th).envelope.swap_in_bytes == 120 * MIB


def test_the_live_monitor_reports_each_breach_once_where_it_happens():
    m = EnvelopeMonitor(EnvelopeConfig(min_headroom_mib=10 * 1024))
    assert m.add(quiet(0)) == []
    (b,) = m.add(quiet(1_500_000, headroom=8 * GIB))
    assert (b.t_s, b.limit, b.threshold) == (1.5, "headroom", 10 * 1024) and "< floor 10.0 GiB" in b.text
    assert m.add(quiet(1_750_000, headroom=7 * GIB)) == []  # once
    assert m.facts().min_headroom_bytes == 7 * GIB


def test_resolve_envelope_scales_only_an_undeclared_floor():
    env = EnvelopeConfig()
    assert resolve_envelope(env, 24 * 10**9).min_headroom_mib == round(10 * 10**9 / MIB)
    assert resolve_envelope(EnvelopeConfig(min_headroom_mib=512.0), 24 * 10**9).min_headroom_mib == 512.0
    assert resolve_envelope(env, 0).min_headroom_mib == 0.0  # memory unknown: no floor
    old = read_recording(sample("short-control")).header  # written before envelopes existed
    assert old.config.envelope == EnvelopeConfig()
    assert header_envelope(old).min_headroom_mib > 0


def test_an_old_recording_without_the_new_fields_reads_as_not_available(tmp_path):
    # the 1.2 memory sample: the same tag, eleven fields
    class OldSample(msgspec.Struct, tag=4, array_like=True):
        t_us: int
        rss: int
        available: int
        headroom: int
        swap_used: int = 0
        swap_in_rate: int = 0
        swap_out_rate: int = 0
        pressure: float = -1.0
        mlx_active: int = -1
        mlx_cache: int = -1
        mlx_peak: int = -1

    s = msgspec.msgpack.decode(msgspec.msgpack.encode(OldSample(1, 2, 3, 4)), type=MemorySample)
    assert s.swap_in_total is None and s.other_cpu_pct is None and s.on_ac_power is None
    f = judge_sessions([[Header(), s]])
    assert f.swap_in_bytes is None and f.throttle_events is None and f.other_cpu_mean is None
    # and a 1.2 reader decoding a 1.3 sample ignores the fields it does not know
    old = msgspec.msgpack.decode(msgspec.msgpack.encode(quiet(5)), type=OldSample)
    assert old.t_us == 5 and old.headroom == 20 * GIB


def test_the_dashboard_marks_a_breach_live_where_it_happens():
    """The controller folds the same events the verdicts read and tells the user at once."""
    from spectui.metrics.live import LiveRun
    from tests.unit.test_ui_controller import idle_controller

    ctl, host = idle_controller()
    live = LiveRun()
    header = read_recording(sample("load-typo-fix")).header
    for ev in [header, quiet(0), quiet(250_000, other_cpu_pct=60), *[quiet(t, other_cpu_pct=60) for t in range(500_000, 3_000_000, 250_000)],
               quiet(3_000_000, headroom=1 * GIB)]:
        ctl.fold(ev, live)
    assert [b.limit for b in ctl.breaches] == ["other load", "headroom"]
    assert ctl.breaches[1].t_s == 3.0
    titles = [(sev, title) for sev, title, _ in host.notices]
    assert titles == [("warning", "shared machine"), ("warning", "envelope breach")]
    assert "other processes use" in host.notices[0][2] and "at 3.0 s" in host.notices[1][2]
