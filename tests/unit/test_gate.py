"""The production gate on the real sample recordings and on hand-edited copies of them."""

from __future__ import annotations

import itertools

import msgspec
import pytest

from spectui.compare.gate import GateThresholds, Verdict, format_verdict_text, gate
from spectui.drafting import Fixed
from spectui.errors import SpectuiError
from spectui.metrics.stats import summarize
from spectui.recording.reader import read_recording
from spectui.recording.schema import Header, Step
from tests.unit.test_diff import cut_in_half, edit_header, replace_token, sample, scale_time, with_target_sha, write_events

#: the acceptance brief's machine checks, after spectui's own (spectui.compare.brief_checks)
BRIEF_CHECKS = ["headroom", "red pressure", "swap-ins", "thermal", "power", "other load", "acceptance drift"]


def by_name(v: Verdict) -> dict:
    return {c.name: c for c in v.checks}


#: Thresholds every sample pair meets, to test one check at a time. (The samples are honest
#: runs on a 2-core CPU, where n-gram speculation does not pass the production gate: its
#: speedup there is 0.5-1.0x.)
LOOSE = GateThresholds(min_speedup=0.3, max_p95_itl_ratio=10.0, max_ttft_growth=2.0, min_acceptance=0.0)


def test_load_typo_fix_checks_carry_their_numbers():
    ar, spec = read_recording(sample("load-typo-fix")), read_recording(sample("load-typo-fix", "spec"))
    v = gate([ar], [spec], GateThresholds())
    checks = by_name(v)
    assert v.passed == all(c.passed is not False for c in v.checks)
    assert gate([ar], [spec], msgspec.structs.replace(LOOSE, min_acceptance=0.55)).passed
    assert list(checks) == ["outputs", "speedup", "p95 ITL", "acceptance", "TTFT", "complete runs", *BRIEF_CHECKS]
    sa, ss = summarize(ar.events), summarize(spec.events)
    assert checks["speedup"].value == pytest.approx(ss.decode_tok_s / sa.decode_tok_s)
    assert checks["speedup"].threshold == 1.16 and "95% CI" in checks["speedup"].detail
    assert checks["acceptance"].value == pytest.approx(ss.acceptance_rate) and "at K=4" in checks["acceptance"].detail
    assert checks["TTFT"].value == pytest.approx(ss.ttft_ms / sa.ttft_ms - 1)
    assert checks["p95 ITL"].value == pytest.approx(ss.itl_p95_ms / sa.itl_p95_ms)
    assert checks["p95 ITL"].threshold == pytest.approx(1.05)
    assert checks["outputs"].value == 0
    text = format_verdict_text(v)
    assert text.startswith(f"spectui gate: {'PASS' if v.passed else 'FAIL'}")
    assert f"{checks['speedup'].value:.2f}x >= 1.16x" in text


def test_thresholds_decide_pass_and_fail():
    ar, spec = read_recording(sample("short-control")), read_recording(sample("short-control", "spec"))
    strict = gate([ar], [spec], msgspec.structs.replace(LOOSE, min_acceptance=0.55))
    checks = by_name(strict)
    rate = summarize(spec.events).acceptance_rate
    assert rate < 0.55
    assert not strict.passed and checks["acceptance"].passed is False
    assert [c.name for c in strict.checks if c.passed is False] == ["acceptance"]
    assert f"FAIL (1 of {6 + len(BRIEF_CHECKS)} checks failed: acceptance)" in format_verdict_text(strict)
    relaxed = gate([ar], [spec], msgspec.structs.replace(LOOSE, min_acceptance=rate))
    assert relaxed.passed
    speed = checks["speedup"].value
    assert not gate([ar], [spec], msgspec.structs.replace(LOOSE, min_speedup=speed * 1.01)).passed
    assert gate([ar], [spec], msgspec.structs.replace(LOOSE, min_speedup=speed * 0.99)).passed


def test_medium_reasoning_fails_on_outputs():
    ar, spec = read_recording(sample("medium-reasoning")), read_recording(sample("medium-reasoning", "spec"))
    v = gate([ar], [spec], GateThresholds(min_speedup=0.1, min_acceptance=0, max_ttft_growth=10, max_p95_itl_ratio=10))
    checks = by_name(v)
    assert not v.passed and [c.name for c in v.checks if c.passed is False] == ["outputs"]
    assert checks["outputs"].value > 0
    assert "differs at token 183" in checks["outputs"].detail
    assert "length differs" in checks["outputs"].detail


def test_length_difference_alone_is_reported_not_failed(tmp_path):
    ar = read_recording(sample("load-typo-fix"))
    spec = read_recording(sample("load-typo-fix", "spec"))
    # the candidate stopped early (as with a smaller max_tokens): every common token equal
    last_step = max(i for i, ev in enumerate(spec.events) if type(ev) is Step)
    shorter = spec.events[:last_step] + spec.events[last_step + 1 :]
    cand = read_recording(write_events(tmp_path / "short.spectui", shorter))
    checks = by_name(gate([ar], [cand]))
    assert checks["outputs"].passed is True and "length differs" in checks["outputs"].detail


def test_one_wrong_token_fails_greedy_outputs(tmp_path):
    ar = read_recording(sample("load-typo-fix"))
    spec = read_recording(sample("load-typo-fix", "spec"))
    bad = read_recording(write_events(tmp_path / "bad.spectui", replace_token(spec.events, 10, 999, b"x")))
    checks = by_name(gate([ar], [bad]))
    assert checks["outputs"].passed is False and checks["outputs"].value == 1
    assert "differs at token 10" in checks["outputs"].detail


def test_medians_across_runs(tmp_path):
    ar = read_recording(sample("load-typo-fix"))
    spec = read_recording(sample("load-typo-fix", "spec"))
    slow2 = read_recording(write_events(tmp_path / "s2.spectui", scale_time(spec.events, 2)))
    slow4 = read_recording(write_events(tmp_path / "s4.spectui", scale_time(spec.events, 4)))
    base_slow = read_recording(write_events(tmp_path / "b3.spectui", scale_time(ar.events, 3)))
    v = gate([ar, base_slow, ar], [spec, slow2, slow4])
    # medians: candidate = slow2's rate, baseline = ar's rate
    expected = summarize(slow2.events).decode_tok_s / summarize(ar.events).decode_tok_s
    checks = by_name(v)
    assert checks["speedup"].value == pytest.approx(expected)
    assert "(3 runs)" in checks["speedup"].detail and "95% CI" not in checks["speedup"].detail
    assert checks["TTFT"].value == pytest.approx(summarize(slow2.events).ttft_ms / summarize(ar.events).ttft_ms - 1)


def test_sampled_runs_fail_as_not_measured_unless_allowed(tmp_path):
    def sampled(h: Header) -> Header:
        s = msgspec.structs.replace(h.config.sampling, temperature=0.8)
        return msgspec.structs.replace(h, config=msgspec.structs.replace(h.config, sampling=s))

    ar = read_recording(write_events(tmp_path / "a.spectui", edit_header(read_recording(sample("load-typo-fix")).events, sampled)))
    spec = read_recording(
        write_events(tmp_path / "b.spectui", edit_header(read_recording(sample("load-typo-fix", "spec")).events, sampled))
    )
    v = gate([ar], [spec])
    q = by_name(v)["quality"]
    assert not v.passed and q.passed is False and "not measured" in q.detail
    allowed = gate([ar], [spec], msgspec.structs.replace(LOOSE, allow_unverified_quality=True))
    assert allowed.passed and by_name(allowed)["quality"].passed is None


def test_ttft_not_applicable_on_long_prompts_and_k_is_named(tmp_path):
    def long_k8(h: Header) -> Header:
        draft = h.config.draft.with_length(Fixed(k=8))
        config = msgspec.structs.replace(h.config, prompt_tier="long", draft=draft)
        return msgspec.structs.replace(h, config=config, prompt_tokens=h.prompt_tokens * 3)  # 384 tokens

    ar = read_recording(write_events(tmp_path / "a.spectui", edit_header(read_recording(sample("medium-reasoning")).events, long_k8)))
    spec = read_recording(
        write_events(tmp_path / "b.spectui", edit_header(read_recording(sample("medium-reasoning", "spec")).events, long_k8))
    )
    checks = by_name(gate([ar], [spec]))
    assert checks["TTFT"].passed is None and "n/a: long prompt (303 tokens, tier long)" in checks["TTFT"].detail
    assert "at K=8; the threshold is set for K=4" in checks["acceptance"].detail


def test_ar_candidate_has_no_acceptance_check():
    ar = read_recording(sample("short-control"))
    checks = by_name(gate([ar], [ar], GateThresholds(min_speedup=1.0)))
    assert checks["acceptance"].passed is None and checks["speedup"].value == pytest.approx(1.0)
    assert checks["outputs"].passed and checks["p95 ITL"].passed


def test_truncated_candidate_fails_complete_runs(tmp_path):
    ar = read_recording(sample("medium-reasoning"))
    cut = read_recording(cut_in_half(sample("medium-reasoning", "spec"), tmp_path / "cut.spectui"))
    checks = by_name(gate([ar], [cut]))
    assert checks["complete runs"].passed is False and "truncated at byte" in checks["complete runs"].detail


def test_unusable_input_raises(tmp_path):
    ar = read_recording(sample("short-control"))
    with pytest.raises(SpectuiError, match="not comparable"):
        gate([ar], [read_recording(sample("load-typo-fix", "spec"))])
    other = read_recording(write_events(tmp_path / "x.spectui", edit_header(ar.events, lambda h: with_target_sha(h, "0" * 64))))
    with pytest.raises(SpectuiError, match="target models differ"):
        gate([ar], [other])
    with pytest.raises(SpectuiError, match="at least one"):
        gate([ar], [])
    with pytest.raises(SpectuiError, match="min-acceptance"):
        gate([ar], [ar], GateThresholds(min_acceptance=2))


def test_verdict_json():
    ar, spec = read_recording(sample("load-typo-fix")), read_recording(sample("load-typo-fix", "spec"))
    v = gate([ar], [spec])
    doc = msgspec.json.decode(msgspec.json.encode(v))
    assert doc["passed"] is v.passed and doc["thresholds"]["min_speedup"] == 1.16
    assert [c["name"] for c in doc["checks"]][:2] == ["outputs", "speedup"]


# -- sampled runs: the quality check -----------------------------------------------------------

ANSWER = "json; keys: answer:str"
_file_ids = itertools.count()  # one test makes several sets in one tmp_path


def sampled_with_check(check: str):
    def edit(h: Header) -> Header:
        s = msgspec.structs.replace(h.config.sampling, temperature=0.8)
        return msgspec.structs.replace(h, config=msgspec.structs.replace(h.config, sampling=s, prompt_check=check))

    return edit


def graded_copies(tmp_path, mode: str, outcomes: list[bool], check: str = ANSWER) -> list:
    """Copies of a real short-control recording, sampled and carrying ``check``; a copy that
    should pass gets a JSON answer as its first piece (the original text has no JSON in it)."""
    events = edit_header(read_recording(sample("short-control", mode)).events, sampled_with_check(check))
    recs = []
    for i, ok in enumerate(outcomes):
        evs = replace_token(events, 0, 1, b'{"answer": "yes"} ') if ok else events
        recs.append(read_recording(write_events(tmp_path / f"{mode}{i}-{next(_file_ids)}.spectui", evs)))
    return recs


def test_sampled_quality_is_measured_when_recordings_carry_a_check(tmp_path):
    base = graded_copies(tmp_path, "ar", [True, True, False, True])
    cand = graded_copies(tmp_path, "spec", [True, False, True, True])
    wide = msgspec.structs.replace(LOOSE, max_quality_drop_points=90.0)  # a tolerance 4 runs can resolve
    q = by_name(gate(base, cand, wide))["quality"]
    assert q.passed is True and q.value == 0.0 and q.threshold == -90.0 and q.unit == "pt"
    assert "pass rate 3/4 75%" in q.detail and "of 4 runs vs 3/4 75%" in q.detail and "not measured" not in q.detail
    assert "spectui gate: PASS" in format_verdict_text(gate(base, cand, wide))
    assert "+0.0 pt >= -90.0 pt" in format_verdict_text(gate(base, cand, wide))


def test_the_brief_tolerance_is_unresolved_by_a_small_sample_and_says_what_would(tmp_path):
    from spectui.compare.quality_power import runs_to_resolve
    from spectui.quality import PassRate

    base = graded_copies(tmp_path, "ar", [True, True, False, True])
    cand = graded_copies(tmp_path, "spec", [True, False, True, True])
    v = gate(base, cand, LOOSE)
    q = by_name(v)["quality"]
    assert LOOSE.max_quality_drop_points == GateThresholds().max_quality_drop_points == 0.5  # the brief's +-0.5%
    # equal measured rates, but 4 runs a side cannot show "within 0.5 points": not a silent pass
    assert q.passed is False and not v.passed and q.value == 0.0 and q.threshold == -0.5
    need = runs_to_resolve(PassRate(3, 4), PassRate(3, 4), 0.5)
    assert need is not None and need > 10_000
    assert q.detail.startswith("UNRESOLVED: 4 and 4 runs cannot resolve -0.5 points")
    assert f"about {need:,} runs a side would" in q.detail
    allowed = gate(base, cand, msgspec.structs.replace(LOOSE, allow_unverified_quality=True))
    assert by_name(allowed)["quality"].passed is None and allowed.passed
    # the statement is right: at that many runs the interval's lower end clears -0.5 points
    from spectui.quality import difference_interval

    assert difference_interval(PassRate(round(0.75 * need), need), PassRate(round(0.75 * need), need))[0] >= -0.5
    assert difference_interval(PassRate(round(0.75 * need // 2), need // 2), PassRate(round(0.75 * need // 2), need // 2))[0] < -0.5


def test_sampled_quality_drop_beyond_the_threshold_fails(tmp_path):
    base = graded_copies(tmp_path, "ar", [True, True])
    cand = graded_copies(tmp_path, "spec", [True, False])
    v = gate(base, cand, LOOSE)
    q = by_name(v)["quality"]
    assert not v.passed and q.passed is False and q.value == -50.0
    assert "candidate - baseline -50.0 points" in q.detail and "UNRESOLVED" not in q.detail
    # unverified-quality does not excuse a measured drop
    assert not gate(base, cand, msgspec.structs.replace(LOOSE, allow_unverified_quality=True)).passed
    assert by_name(gate(base, cand, msgspec.structs.replace(LOOSE, max_quality_drop_points=99)))["quality"].passed


def test_sampled_quality_one_sided_or_mixed_checks(tmp_path):
    base = graded_copies(tmp_path, "ar", [True])
    plain = graded_copies(tmp_path, "spec", [True], check="")
    q = by_name(gate(base, plain, LOOSE))["quality"]
    assert q.passed is False and "only the baseline recordings carry a quality check" in q.detail
    assert by_name(gate(base, plain, msgspec.structs.replace(LOOSE, allow_unverified_quality=True)))["quality"].passed is None
    other = graded_copies(tmp_path, "spec", [True], check="json; keys: answer:int")
    q = by_name(gate(base, other, LOOSE))["quality"]
    assert q.passed is False and "different quality checks" in q.detail
