"""``spectui gate``: may speculation go to production? One check per criterion, each with its
measured value, its threshold and a line of detail; the gate passes when no check fails.

A check is ``passed=True``, ``False``, or ``None`` (not applicable: TTFT on a long prompt,
acceptance for an AR candidate). Not applicable never fails the gate; *not measured* does
(sampled output quality, see below), because a gate that passes what it did not look at is
worse than none.

Outputs: greedy runs must be token-identical to the baseline. A redacted recording's outputs
compare only with those redacted together with it (``spectui.recording.redact``); against any
other the outputs check fails, saying it could not look. Sampled runs cannot be (the
same seed draws differently once drafts are verified), so their outputs are judged by the
quality mini-set instead: every recording whose header carries a quality check
(``spectui.quality``: the prompts/quality-* files) is graded, and the candidates' pass rate
may fall at most ``max_quality_drop_points`` percentage points below the baselines'. Only when
no recording carries a check is quality "not measured", which fails unless allowed.

With several recordings a side, speeds and latencies are medians across runs: one run on a
busy machine then moves the verdict less than it would move a mean.

Why p95 ITL is compared per token, as a client sees it, and with tolerance 0 + 5%: a
speculative block delivers its tokens together, so its gaps are zero except the one before the
block, which carries the whole draft + verify time. On a CPU, where verifying K+1 tokens costs
~2.8 single forwards at K=4, the p95 gap of a speculative run is usually a block time and
larger than AR's. That is the stall a streaming user feels, so the gate does not hide it by
dividing by tokens per block: "p95 ITL holds" means candidate p95 <= baseline p95 x
``max_p95_itl_ratio`` (default 1.0: no growth), widened by ``p95_itl_tolerance`` (default 5%)
for the run-to-run scheduling noise a p95 carries. Loosen the ratio deliberately if block-sized
stalls are acceptable for a workload; do not hide them in the tolerance.
"""

from __future__ import annotations

import math

import msgspec

from spectui.compare.brief_checks import BRIEF, brief_checks
from spectui.compare.check import Check, Number
from spectui.compare.diff import compare_outputs, is_short_prompt, status_label
from spectui.compare.divergence import RunOutput, judge_outputs
from spectui.compare.energy import check_energy
from spectui.compare.headers import comparability
from spectui.compare.quality_power import MAX_RUNS, runs_to_resolve
from spectui.compare.speedup import speedup_ci
from spectui.compare.thresholds import GateThresholds
from spectui.errors import SpectuiError
from spectui.format import num_or_na, text_table
from spectui.metrics.stats import Summary, nanmedian, summarize
from spectui.quality import difference_interval, difference_points, pass_rate
from spectui.recording.output import grade_recording, output_tokens
from spectui.recording.reader import Recording
from spectui.recording.redact import outputs_not_comparable

__all__ = ["Check", "GateThresholds", "Verdict", "format_verdict_text", "gate"]

class Verdict(msgspec.Struct, kw_only=True):
    passed: bool
    checks: list[Check]
    baselines: list[str]
    candidates: list[str]
    thresholds: GateThresholds


def _runs(n: int) -> str:
    return f"{n} run{'s' if n != 1 else ''}"


def _check_outputs(baselines: list[Recording], candidates: list[Recording], t: GateThresholds) -> Check:
    greedy = all(r.header.config.sampling.greedy for r in baselines + candidates)
    if not greedy:
        return _check_quality(baselines, candidates, t)
    ref = baselines[0]
    ref_out = output_tokens(ref.events)
    differing = 0  # positions that differ in candidates whose divergence fails
    near_ties = 0
    unverified = 0  # candidates whose outputs could not be compared (redacted)
    notes = []
    lengths = []
    for cand in candidates:
        redacted = outputs_not_comparable(ref.header, cand.header)
        if redacted:  # not looked at is not passed (see the module docstring)
            unverified += 1
            notes.append(f"{cand.path}: {redacted}")
            continue
        o = compare_outputs(ref_out, output_tokens(cand.events))
        if o.n_differing:
            d = o.first_divergence
            assert d is not None
            cause = judge_outputs(RunOutput.of_recording(ref), RunOutput.of_recording(cand), index=d.index)
            where = f"{cand.path} differs at token {d.index} ({o.n_differing} of {o.common_length} positions)"
            notes.append(f"{where}: {cause.line}" if cause is not None else where)
            if cause is not None and not cause.fails:
                near_ties += 1
                continue  # numerics, not speculation: what follows a near-tie is another text
            differing += o.n_differing
        if o.baseline_length != o.candidate_length:
            lengths.append(
                f"{cand.path} has {o.candidate_length} tokens ({summarize(cand.events).finish_reason or 'no end'})"
                f" vs {o.baseline_length} ({summarize(ref.events).finish_reason or 'no end'})"
            )
    for other in baselines[1:]:  # baseline against baseline: the noise floor, reported only
        if outputs_not_comparable(ref.header, other.header):
            continue
        o = compare_outputs(ref_out, output_tokens(other.events))
        if o.n_differing:
            assert o.first_divergence is not None
            notes.append(f"note: baseline {other.path} itself differs from {ref.path} at token {o.first_divergence.index}")
    compared = len(candidates) - unverified
    if not compared:
        notes.insert(0, f"greedy: no candidate's output could be compared with {ref.path}")
    elif not differing and not near_ties:
        notes.insert(0, f"greedy: {_runs(compared)} token-identical to {ref.path} over the common length")
    elif not differing:
        notes.insert(0, f"greedy: {near_ties} of {_runs(compared)} part from {ref.path} at a numerical near-tie")
    return Check(
        name="outputs",
        passed=differing == 0 and unverified == 0,
        value=None if unverified else differing,  # a count over some candidates only would mislead
        threshold=0,
        comparison="<=",
        detail="; ".join(notes + [f"length differs: {x}" for x in lengths]),
    )


def _check_quality(baselines: list[Recording], candidates: list[Recording], t: GateThresholds) -> Check:
    graded_b = [g for g in map(grade_recording, baselines) if g is not None]
    graded_c = [g for g in map(grade_recording, candidates) if g is not None]
    if not graded_b or not graded_c:
        allowed = t.allow_unverified_quality
        if not graded_b and not graded_c:
            why = "no recording carries a quality check; run the quality-* prompts (spectui quality)"
        else:
            why = f"only the {'baseline' if graded_b else 'candidate'} recordings carry a quality check"
        return Check(
            name="quality",
            passed=None if allowed else False,
            value=None,
            threshold=-t.max_quality_drop_points,
            comparison=">=",
            unit="pt",
            detail=f"sampled runs: quality pass rates are not measured ({why})"
            + ("; allowed unverified" if allowed else "; fails unless unverified quality is allowed"),
        )
    b, c = pass_rate(graded_b), pass_rate(graded_c)
    diff = difference_points(b, c)
    low, high = difference_interval(b, c)
    tol = t.max_quality_drop_points
    detail = (
        f"sampled: pass rate {c} of {_runs(c.n)} vs {b} of {_runs(b.n)} (95% Wilson intervals);"
        f" candidate - baseline {diff:+.1f} points (95% CI {low:+.1f} to {high:+.1f}),"
        f" at most {tol:g} below allowed"
    )
    ungraded = len(baselines) + len(candidates) - b.n - c.n
    if ungraded:
        detail += f"; {ungraded} recording{'s' if ungraded != 1 else ''} without a check not graded"
    checks = sorted({r.header.config.prompt_check for r in baselines + candidates} - {""})
    if len(checks) > 1:  # graded against different rules: the two rates do not compare
        return Check(
            name="quality",
            passed=False,
            value=diff,
            threshold=-t.max_quality_drop_points,
            comparison=">=",
            unit="pt",
            detail=f"the recordings carry different quality checks ({' | '.join(checks)}); " + detail,
        )
    passed: bool | None = bool(diff >= -tol)
    if passed and low < -tol:  # the drop is within the tolerance, but the sample cannot show it
        need = runs_to_resolve(b, c, tol)
        if need is None:  # the measured drop sits exactly on the tolerance
            need_text = "no number of runs a side would (the measured drop equals the tolerance)"
        else:
            need_text = f"{'more than' if need == MAX_RUNS else 'about'} {need:,} runs a side would"
        detail = (
            f"UNRESOLVED: {b.n} and {c.n} runs cannot resolve -{tol:g} points (the 95% CI reaches {low:+.1f});"
            f" at these pass rates {need_text}; " + detail
        )
        passed = None if t.allow_unverified_quality else False
    return Check(
        name="quality",
        passed=passed,
        value=diff,
        threshold=-tol,
        comparison=">=",
        unit="pt",
        detail=detail,
        brief=BRIEF["quality"],
    )


def _check_speedup(
    baselines: list[Recording], candidates: list[Recording], bs: list[Summary], cs: list[Summary], t: GateThresholds
) -> Check:
    b = nanmedian([s.decode_tok_s for s in bs])
    c = nanmedian([s.decode_tok_s for s in cs])
    ratio = c / b if b > 0 else float("nan")
    detail = f"median decode {num_or_na(c, '.2f')} tok/s ({_runs(len(cs))}) vs {num_or_na(b, '.2f')} tok/s ({_runs(len(bs))})"
    if len(baselines) == len(candidates) == 1:
        sp = speedup_ci(baselines[0], candidates[0])
        if sp.parted_at >= 0:  # one pair whose outputs part: judged over the text they share
            ratio = sp.ratio
            detail = (f"decode {num_or_na(sp.candidate_tok_s, '.2f')} vs {num_or_na(sp.baseline_tok_s, '.2f')} tok/s over "
                      f"{sp.same_text}")
        if sp.ci_low == sp.ci_low:
            detail += f"; 95% CI {sp.ci_low:.2f}-{sp.ci_high:.2f} (step bootstrap, one pair)"
    return Check(
        name="speedup",
        passed=bool(ratio >= t.min_speedup),  # NaN (no decode rate) fails
        value=ratio,
        threshold=t.min_speedup,
        comparison=">=",
        unit="x",
        detail=detail,
    )


def _check_itl(bs: list[Summary], cs: list[Summary], t: GateThresholds) -> Check:
    b = nanmedian([s.itl_p95_ms for s in bs])
    c = nanmedian([s.itl_p95_ms for s in cs])
    ratio = c / b if b > 0 else float("nan")
    limit = t.max_p95_itl_ratio * (1 + t.p95_itl_tolerance)
    return Check(
        name="p95 ITL",
        passed=bool(ratio <= limit),
        value=ratio,
        threshold=limit,
        comparison="<=",
        unit="x",
        detail=f"median p95 inter-token latency {num_or_na(c, '.2f')} ms vs {num_or_na(b, '.2f')} ms"
        f" (limit: baseline x {t.max_p95_itl_ratio:g}, +{t.p95_itl_tolerance:.0%} noise tolerance)",
    )


def _check_acceptance(candidates: list[Recording], cs: list[Summary], t: GateThresholds) -> Check:
    spec = [(r, s) for r, s in zip(candidates, cs) if r.header.config.mode == "spec"]
    if not spec:
        return Check(
            name="acceptance",
            passed=None,
            value=None,
            threshold=t.min_acceptance,
            comparison=">=",
            detail="n/a: no speculative candidate",
        )
    rate = nanmedian([s.acceptance_rate for _, s in spec])
    ks = sorted({k for r, _ in spec if (k := r.header.config.draft.fixed_k) is not None})
    adaptive = any(r.header.config.draft.fixed_k is None for r, _ in spec)
    at = "at " + " and ".join([f"K={'/'.join(map(str, ks))}"] * bool(ks) + ["a cost-aware K"] * adaptive)
    if ks != [t.expected_k] or adaptive:
        at += f"; the threshold is set for K={t.expected_k}"
    drafted = sum(s.drafted for _, s in spec)
    detail = f"median of {_runs(len(spec))} {at}; {sum(s.accepted for _, s in spec)} of {drafted} drafted tokens accepted"
    if rate != rate:
        detail = f"nothing was drafted ({at})"
    return Check(
        name="acceptance",
        passed=bool(rate >= t.min_acceptance),  # NaN (nothing drafted) fails
        value=rate,
        threshold=t.min_acceptance,
        comparison=">=",
        detail=detail,
    )


def _check_ttft(baselines: list[Recording], bs: list[Summary], cs: list[Summary], t: GateThresholds) -> Check:
    h = baselines[0].header
    tier = f", tier {h.config.prompt_tier}" if h.config.prompt_tier else ""
    if not is_short_prompt(h):
        return Check(
            name="TTFT",
            passed=None,
            value=None,
            threshold=t.max_ttft_growth,
            comparison="<=",
            unit="%",
            detail=f"n/a: long prompt ({len(h.prompt_tokens)} tokens{tier})",
        )
    b = nanmedian([s.ttft_ms for s in bs])
    c = nanmedian([s.ttft_ms for s in cs])
    growth = c / b - 1 if b > 0 else float("nan")
    return Check(
        name="TTFT",
        passed=bool(growth <= t.max_ttft_growth),
        value=growth,
        threshold=t.max_ttft_growth,
        comparison="<=",
        unit="%",
        detail=f"short prompt ({len(h.prompt_tokens)} tokens): median TTFT {num_or_na(c)} ms vs {num_or_na(b)} ms",
    )


def _check_recordings(recs: list[Recording], sums: list[Summary]) -> Check:
    bad = []
    for r, s in zip(recs, sums):
        if not r.complete or r.truncated:
            bad.append(f"{r.path}: {status_label(r)}")
        elif s.finish_reason in ("error", "interrupted"):
            bad.append(f"{r.path}: ended by {s.finish_reason}")
    return Check(
        name="complete runs",
        passed=not bad,
        value=len(bad),
        threshold=0,
        comparison="<=",
        detail="; ".join(bad) or f"all {len(recs)} recordings complete",
    )


def gate(baselines: list[Recording], candidates: list[Recording], t: GateThresholds | None = None) -> Verdict:
    """Judge candidates against baselines. Raises ``SpectuiError`` when there is nothing to
    judge or the runs are not comparable (different prompt tokens or target weights)."""
    t = t if t is not None else GateThresholds()
    t.validate()
    if not baselines or not candidates:
        raise SpectuiError("the gate needs at least one baseline and one candidate recording")
    ref = baselines[0]
    for rec in baselines[1:] + candidates:
        why = comparability(ref.header, rec.header)
        if why:
            raise SpectuiError(f"{rec.path} is not comparable with {ref.path}: {'; '.join(why)}")
    bs = [summarize(r.events) for r in baselines]
    cs = [summarize(r.events) for r in candidates]
    checks = [
        _check_outputs(baselines, candidates, t),
        _check_speedup(baselines, candidates, bs, cs, t),
        _check_itl(bs, cs, t),
        _check_acceptance(candidates, cs, t),
        _check_ttft(baselines, bs, cs, t),
        _check_recordings(baselines + candidates, bs + cs),
        *brief_checks(baselines, candidates, t),
    ]
    energy = check_energy(baselines, candidates, t)  # None: no limit, and no recording carries energy
    if energy is not None:
        checks.append(energy)
    return Verdict(
        passed=all(c.passed is not False for c in checks),
        checks=checks,
        baselines=[str(r.path) for r in baselines],
        candidates=[str(r.path) for r in candidates],
        thresholds=t,
    )


def _fmt(v: Number, unit: str) -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if isinstance(v, float) and math.isnan(v):
        return "n/a"
    if unit == "%":
        return f"{v * 100:+.1f}%"
    if unit == "x":
        return f"{v:.2f}x"
    if unit == "pt":
        return f"{v:+.1f} pt"
    if unit == "share":
        return f"{v:.0%}"
    if unit in ("MiB", "s"):
        return f"{v:,.1f} {unit}"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def format_verdict_text(v: Verdict) -> str:
    failed = [c.name for c in v.checks if c.passed is False]
    head = "PASS" if v.passed else f"FAIL ({len(failed)} of {len(v.checks)} checks failed: {', '.join(failed)})"
    rows = []
    for c in v.checks:
        mark = "FLAG" if c.flagged else {True: "PASS", False: "FAIL", None: "n/a"}[c.passed]
        if c.value is None:
            measured = f"limit {_fmt(c.threshold, c.unit)}"
        else:
            measured = f"{_fmt(c.value, c.unit)} {c.comparison} {_fmt(c.threshold, c.unit)}".strip()
        rows.append([mark, c.name, measured, c.detail])
    runs = text_table(None, [["baseline", ", ".join(v.baselines)], ["candidate", ", ".join(v.candidates)]])
    return "\n".join([f"spectui gate: {head}", runs, text_table(None, rows)])
