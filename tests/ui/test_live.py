"""LiveRun: the incremental state the dashboard and replay draw from."""

from __future__ import annotations

import math
import subprocess
import sys

import msgspec
import pytest

from spectui.metrics.live import LiveRun, percentiles
from spectui.metrics.stats import summarize
from spectui.recording.reader import read_recording
from spectui.recording.schema import End, Header, MemorySample, Prefill, Step, TokenOrigin

from .conftest import FIXED_AR, FIXED_SPEC

AR, DRAFT, CORRECTION, BONUS = (int(o) for o in TokenOrigin)


def _same(a, b) -> bool:
    """Equal, with NaN equal to NaN (summaries use NaN for 'not measured')."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def assert_summaries_equal(s1, s2) -> None:
    d1, d2 = msgspec.structs.asdict(s1), msgspec.structs.asdict(s2)
    bad = {k: (d1[k], d2[k]) for k in d1 if not _same(d1[k], d2[k])}
    assert not bad, bad


def synthetic_events() -> list:
    """A short speculative run: prefill token, a rejected block, an AR step, a full block."""
    return [
        Header(prompt_tokens=[1, 2, 3]),
        MemorySample(0, rss=100, available=1000, headroom=900, swap_used=10),
        Prefill(n_tokens=3, t_start_us=10, t_end_us=2010),
        Step([5], [AR], [b"He"], [2000]),
        # drafted 3, accepted 1: one DRAFT + one CORRECTION; the correction splits a UTF-8 char
        Step([6, 7], [DRAFT, CORRECTION], [b"llo", b" \xe2\x82"], [5000, 5000], 3, 3, 1, 100, 2900, 0),
        MemorySample(5500, rss=300, available=800, headroom=700, swap_used=14),
        # nothing drafted: an AR step inside a speculative run (what one target forward costs)
        Step([8], [AR], [b"\xac!"], [6000], 3, 0, 0, 20, 1000, 0),
        # drafted 2, all accepted: two DRAFT + one BONUS
        Step([9, 10, 11], [DRAFT, DRAFT, BONUS], [b" a", b"b", b"c"], [9000, 9000, 9000], 3, 2, 2, 50, 2500, 0),
        MemorySample(9500, rss=200, available=900, headroom=800, swap_used=12),
        End(t_us=9000, reason="length", n_tokens=7),
    ]


def test_folds_tokens_blocks_and_series():
    run = LiveRun.from_events(synthetic_events())
    assert run.tokens == [5, 6, 7, 8, 9, 10, 11]
    assert run.origins == [AR, DRAFT, CORRECTION, AR, DRAFT, DRAFT, BONUS]
    assert run.block_starts == [0, 1, 3, 4]
    # the euro sign's bytes span two tokens: its text lands on the token that completes it
    assert run.texts == ["He", "llo", " ", "€!", " a", "b", "c"]
    assert run.text == "Hello €! abc"
    assert run.itl_ms == [3.0, 0.0, 1.0, 3.0, 0.0, 0.0]
    assert run.itl_t == [0.005, 0.005, 0.006, 0.009, 0.009, 0.009]
    assert run.block_acceptance == [pytest.approx(1 / 3), 1.0]
    assert run.block_t == [0.005, 0.009]
    assert (run.drafted, run.accepted, run.rollbacks, run.draft_blocks) == (5, 3, 1, 2)
    assert run.acceptance_rate == pytest.approx(0.6)
    assert run.mean_accepted_length == pytest.approx(2.5)
    assert (run.ar_steps, run.mean_ar_step_us) == (1, 1000)  # the prefill's token is not an AR step
    assert run.headroom == [900, 700, 800]
    assert (run.peak_rss, run.min_headroom, run.swap_delta) == (300, 700, 2)
    assert run.finished and run.end.reason == "length"
    assert run.decode_tok_s() == pytest.approx(6 / 0.007)


def test_summary_matches_summarize_on_synthetic_events():
    events = synthetic_events()
    run = LiveRun()
    for i, ev in enumerate(events):
        run.feed(ev)
        # consistent at every point of the run, not only at the end
        assert_summaries_equal(run.summary(), summarize(events[: i + 1]))


@pytest.mark.parametrize("path", [FIXED_SPEC, FIXED_AR], ids=["spec", "ar"])
def test_summary_matches_summarize_on_real_recordings(path):
    rec = read_recording(path)
    run = LiveRun.from_events(rec.events)
    assert_summaries_equal(run.summary(), summarize(rec.events))
    steps = [e for e in rec.events if type(e) is Step]
    assert run.tokens == [t for s in steps for t in s.tokens]
    assert run.text == b"".join(p for s in steps for p in s.pieces).decode("utf-8", "replace")


def test_summary_is_cached_until_the_next_event():
    events = synthetic_events()
    run = LiveRun.from_events(events[:-1])
    s1 = run.summary()
    assert run.summary() is s1
    run.feed(events[-1])
    assert run.summary() is not s1
    assert run.summary().finish_reason == "length"


def test_prediction_uses_the_runs_own_ar_steps():
    run = LiveRun.from_events(synthetic_events())
    p = run.prediction()
    assert p is not None and p.ar_step_source == "run"
    assert p.ar_step_us == 1000
    assert p.k == pytest.approx(2.5)  # 5 drafted over 2 blocks
    assert p.block_us == pytest.approx((150 + 5400) / 2)
    assert p.acceptance == pytest.approx(0.6)


def test_prediction_prefers_a_baseline_over_the_cost_model():
    events = [e for e in synthetic_events() if not (type(e) is Step and e.drafted == 0 and e.k)]
    run = LiveRun.from_events(events)
    assert run.ar_steps == 0
    assert run.prediction(baseline_ar_step_us=900).ar_step_source == "baseline"
    assert run.prediction().ar_step_source == "model"
    assert LiveRun.from_events(events[:4]).prediction() is None  # no drafted block yet


def test_version_counts_events():
    run = LiveRun()
    v = run.version
    run.feed(synthetic_events()[0])
    assert run.version == v + 1


def test_percentiles():
    assert all(math.isnan(v) for v in percentiles([]))
    assert percentiles([1.0, 2.0, 3.0]) == (2.0, pytest.approx(2.9))


def test_live_and_predict_do_not_import_textual():
    code = (
        "import sys, spectui.metrics.live, spectui.metrics.predict\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', 'plotext')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
