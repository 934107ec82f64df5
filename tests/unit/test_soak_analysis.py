"""``analyze_soak`` on sessions built from the schema's own records (and written to real files).

The inputs are synthetic on purpose: a known slope in, the same slope out. What a real soak
measures is checked on the real model in tests/functional/test_soak.py.
"""

from __future__ import annotations

import datetime as dt
import math
import random

import pytest
import scipy.stats

from spectui.errors import SpectuiError
from spectui.lab.soak import MIB, SoakThresholds, analyze_folder, analyze_soak
from spectui.metrics.stats import fit_slope, t_quantile_975
from spectui.recording.schema import End, Header, MemorySample, Step
from spectui.recording.writer import RecordingWriter

T0 = dt.datetime(2026, 5, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
BASE_RSS = 300 * MIB


def session(
    start_s: float,
    length_s: float,
    rss,  # noqa: ANN001 - soak seconds -> bytes
    swap=lambda t: 0,  # noqa: ANN001
    *,
    prompt: str = "p",
    drafted: int = 4,
    accepted: int = 3,
    step_s: float = 0.05,
    end: bool = True,
) -> list:
    """One session: a header at ``start_s`` on the soak clock, a speculative step every
    ``step_s`` (drafted/accepted each), a memory sample every 0.25 s, and an End."""
    started = (T0 + dt.timedelta(seconds=start_s)).isoformat(timespec="milliseconds")
    events: list = [Header(started_at=started, prompt_text=prompt)]
    n_steps = int(length_s / step_s)
    steps = [
        (i * step_s, Step(tokens=[1] * (accepted + 1), origins=[1] * (accepted + 1), pieces=[b"x"] * (accepted + 1),
                          t_us=[int(i * step_s * 1e6)] * (accepted + 1), k=drafted, drafted=drafted, accepted=accepted))
        for i in range(1, n_steps + 1)
    ]
    mem = [
        (j * 0.25, MemorySample(t_us=int(j * 0.25 * 1e6), rss=int(rss(start_s + j * 0.25)), available=8 << 30,
                                headroom=8 << 30, swap_used=int(swap(start_s + j * 0.25))))
        for j in range(int(length_s / 0.25) + 1)
    ]
    events += [ev for _, ev in sorted(steps + mem, key=lambda x: x[0])]
    if end:
        events.append(End(t_us=int(length_s * 1e6), reason="length", n_tokens=n_steps * (accepted + 1)))
    return events


def soak(total_s: float, rss, swap=lambda t: 0, *, length_s: float = 30.0, gap_s: float = 0.01, prompts=("a", "b")):  # noqa: ANN001
    out, t, i = [], 0.0, 0
    while t < total_s:
        out.append(session(t, min(length_s, total_s - t), rss, swap, prompt=prompts[i % len(prompts)]))
        t += length_s + gap_s
        i += 1
    return out


def noise(scale_mib: float, seed: int = 1):  # noqa: ANN201
    rng = random.Random(seed)
    cache: dict[float, float] = {}
    return lambda t: cache.setdefault(t, rng.gauss(0, scale_mib) * MIB)


def test_steady_growth_fails_with_the_slope_it_was_given():
    jitter = noise(0.5)
    report = analyze_soak(soak(600, lambda t: BASE_RSS + 10 * MIB * t / 60 + jitter(t)))
    assert report.slope_mib_min == pytest.approx(10, abs=0.2)
    lo, hi = report.slope_ci95_mib_min
    assert lo <= 10 <= hi
    assert report.growth_mib == pytest.approx(10 * report.fit_span_s / 60, rel=0.03)
    assert not report.passed
    assert any("RSS grows" in r for r in report.reasons)
    assert report.sessions == 20 and report.complete_sessions == 20


def test_flat_noisy_memory_passes():
    jitter = noise(2.0, seed=7)
    # steps of a couple of MiB up and down, as allocators do, around a flat level
    report = analyze_soak(soak(600, lambda t: BASE_RSS + (2 * MIB if int(t) % 90 < 45 else 0) + jitter(t)))
    assert abs(report.slope_mib_min) < 0.5
    assert report.passed, report.reasons
    assert not report.swap_grew_monotonically


def test_warm_up_ramp_is_not_a_leak():
    # 60 MiB paged in during the first 20 s (every prompt's first run), flat afterwards
    report = analyze_soak(soak(600, lambda t: BASE_RSS + 60 * MIB * min(t, 20) / 20))
    assert report.warmup_s >= 60  # 10% of the soak, longer than the first pass (two 30 s sessions)
    assert report.slope_mib_min == pytest.approx(0, abs=1e-6)
    assert report.passed, report.reasons
    assert report.peak_rss_mib == pytest.approx(300 + 60, abs=0.01)
    assert report.total_growth_mib == pytest.approx(60, abs=0.01)
    assert report.rss_first_mib == pytest.approx(300, abs=0.01)


def test_short_soak_with_one_allocator_step_passes_on_the_growth_floor():
    # 20 s, one +2 MiB step near the end: a steep fitted slope but only ~2 MiB added
    report = analyze_soak(soak(20, lambda t: BASE_RSS + (2 * MIB if t > 15 else 0), length_s=5), SoakThresholds(window_s=5))
    assert report.slope_mib_min > 1
    assert report.growth_mib < 5
    assert report.passed, report.reasons


def test_monotonic_swap_growth_fails():
    report = analyze_soak(soak(600, lambda t: BASE_RSS, swap=lambda t: 100 * MIB * t / 600), SoakThresholds(window_s=120))
    assert report.swap_grew_monotonically
    assert report.swap_end_mib - report.swap_start_mib == pytest.approx(100, abs=1)
    assert not report.passed and any("swap" in r for r in report.reasons)
    assert report.slope_mib_min == pytest.approx(0, abs=1e-6)  # RSS itself was flat


def test_swap_that_comes_back_down_passes():
    # up 100 MiB, then back down to +40 in the last window: paging that recovered
    report = analyze_soak(
        soak(600, lambda t: BASE_RSS, swap=lambda t: (100 if t < 480 else 40) * MIB * min(t, 300) / 300),
        SoakThresholds(window_s=120),
    )
    assert not report.swap_grew_monotonically
    assert report.passed, report.reasons


def test_windows_carry_acceptance_decode_speed_and_sessions():
    sessions = [session(0, 9, lambda t: BASE_RSS, drafted=4, accepted=3, prompt="a"),
                session(10.01, 9, lambda t: BASE_RSS, drafted=4, accepted=1, prompt="b")]
    report = analyze_soak(sessions, SoakThresholds(window_s=10))
    assert len(report.windows) == 2
    first, second = report.windows
    assert first.acceptance_rate == pytest.approx(0.75)
    assert second.acceptance_rate == pytest.approx(0.25)
    assert first.sessions == second.sessions == 1
    # 4 tokens every 50 ms in the first session, 2 in the second
    assert first.decode_tok_s == pytest.approx(4 / 0.05, rel=0.02)
    assert second.decode_tok_s == pytest.approx(2 / 0.05, rel=0.02)
    assert report.acceptance_rate == pytest.approx(0.5)
    assert (first.tokens, second.tokens) == (180 * 4, 180 * 2)
    assert report.tokens == first.tokens + second.tokens


def test_overshoot_past_the_last_window_joins_it():
    report = analyze_soak([session(0, 20.5, lambda t: BASE_RSS)], SoakThresholds(window_s=10))
    assert [(w.start_s, w.end_s) for w in report.windows] == [(0, 10), (10, pytest.approx(20.5))]


def test_session_order_follows_the_header_clocks_not_the_input_order():
    sessions = soak(120, lambda t: BASE_RSS + 10 * MIB * t / 60)
    forward = analyze_soak(sessions)
    backward = analyze_soak(list(reversed(sessions)))
    assert backward.slope_mib_min == forward.slope_mib_min


def test_truncated_recording_is_still_analysed(tmp_path):
    sessions = soak(90, lambda t: BASE_RSS + 10 * MIB * t / 60)
    sessions[-1] = sessions[-1][:-1]  # the last session never wrote its End...
    for i, events in enumerate(sessions):
        with RecordingWriter(tmp_path / f"{i + 1:04d}-x.spectui") as w:
            for ev in events:
                w.write(ev)
    last = tmp_path / f"{len(sessions):04d}-x.spectui"
    last.write_bytes(last.read_bytes()[:-7])  # ...and was killed inside a record
    report = analyze_folder(tmp_path)
    assert report.sessions == len(sessions)
    assert report.complete_sessions == len(sessions) - 1
    assert report.slope_mib_min == pytest.approx(10, abs=0.1)
    assert 85 < report.duration_s < 90


def test_too_few_samples_is_not_a_pass():
    report = analyze_soak([session(0, 0.3, lambda t: BASE_RSS)])
    assert not report.passed
    assert "too few memory samples" in report.reasons[0]


def test_bad_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(SpectuiError, match="no recordings"):
        analyze_folder(tmp_path)
    with pytest.raises(SpectuiError, match="not found"):
        analyze_folder(tmp_path / "missing")
    with pytest.raises(SpectuiError, match="header"):
        analyze_soak([[End()]])
    with pytest.raises(SpectuiError, match="window"):
        analyze_soak(soak(10, lambda t: BASE_RSS), SoakThresholds(window_s=0))


def test_t_quantile_matches_scipy():
    for df in [1, 2, 3, 4, 5, 8, 12, 30, 100, 1000]:
        assert t_quantile_975(df) == pytest.approx(scipy.stats.t.ppf(0.975, df), rel=2e-3), df
    assert t_quantile_975(3.7) == t_quantile_975(3)  # rounds down: the wider interval
    assert math.isnan(t_quantile_975(0.5))


def test_autocorrelated_noise_widens_the_interval():
    # a random walk around a flat line: OLS alone would call its drift significant
    rng = random.Random(3)
    t = [i * 0.25 / 60 for i in range(2000)]
    walk, y = 0.0, []
    for _ in t:
        walk += rng.gauss(0, 0.05)
        y.append(walk)
    slope, lo, hi = fit_slope(t, y)
    n = len(t)
    mt = sum(t) / n
    sxx = sum((a - mt) ** 2 for a in t)
    my = sum(y) / n
    resid = [b - my - slope * (a - mt) for a, b in zip(t, y)]
    naive_half = 1.96 * math.sqrt(sum(e * e for e in resid) / (n - 2) / sxx)
    assert (hi - lo) / 2 > 5 * naive_half


def test_soak_modules_stay_headless():
    import subprocess
    import sys

    code = (
        "import sys, spectui.lab.soak, spectui.lab.soak_analysis, spectui.lab.soak_report, spectui.cli.lab\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', 'plotext', 'llama_cpp')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
