"""``spectui diff``: one baseline recording against one candidate.

Order of the verdict, and why: the frozen artifacts come first. A speedup means nothing if
the model file, the runtime, the sampling settings or the host changed between the two runs,
so every such difference is listed before any number. Mode, K and drafter differences are
what an AR-versus-speculative comparison is *for*; they are listed apart as "configuration".

Two recordings are comparable only if they saw the same prompt tokens on the same target
weights (sha256); anything else is refused unless forced, and a forced diff says why it was
not comparable.

Everything here is computed from the event stream (``summarize`` and the ``Step`` records),
never from engine internals, so a diff works on a machine that has never seen the model.

The header comparison is ``spectui.compare.headers``, the speedup and its bootstrap interval
``spectui.compare.speedup``; this module puts them together with the outputs and formats the
result as text (``format_diff_text``) or markdown (``format_diff_markdown``).
"""

from __future__ import annotations

import msgspec

from spectui.compare.divergence import Judgement, RunOutput, judge_outputs
from spectui.compare.energy import EnergyComparison, compare_energy, energy_markdown, energy_text
from spectui.compare.headers import FieldDiff, Value, comparability, compare_headers, diffs
from spectui.compare.speedup import Speedup, speedup_ci
from spectui.compare.thresholds import MAX_TTFT_GROWTH
from spectui.errors import SpectuiError
from spectui.format import markdown_table, mib, num_or_na, section_title, signed_mib, text_table
from spectui.metrics.conditions import busiest_text, conditions, other_load_text
from spectui.metrics.envelope import judge_sessions
from spectui.metrics.stats import Summary, summarize
from spectui.recording.output import decode_pieces, output_tokens
from spectui.recording.reader import Recording
from spectui.recording.redact import outputs_not_comparable
from spectui.recording.schema import Header, MemorySample

#: A prompt shorter than this (or of tier "short") is "short": TTFT there is dominated by
#: fixed costs the candidate must not add to, so TTFT growth is judged on short prompts only
#: (by at most ``MAX_TTFT_GROWTH``, the production gate's default).
SHORT_PROMPT_TOKENS = 256
CONTEXT_CHARS = 20  # text shown on each side of a divergence (about 40 in all)


class Divergence(msgspec.Struct, kw_only=True):
    """The first position where the two outputs differ."""

    index: int  # 0-based position in the generated tokens
    baseline_token: int | None  # None when that side ended before ``index``
    candidate_token: int | None
    baseline_piece: str  # the token's text (bytes decoded as UTF-8, bad bytes replaced)
    candidate_piece: str
    #: ~40 characters of each side's text around the divergence; both start with the same
    #: shared prefix, and the sides part at ``context_offset``.
    baseline_context: str
    candidate_context: str
    context_offset: int
    #: the judge's verdict on the parting (``spectui.compare.divergence``); None for sampled
    #: runs and character-level (server) comparisons
    cause: Judgement | None = None


class OutputDiff(msgspec.Struct, kw_only=True):
    identical: bool  # same tokens and same length
    baseline_length: int
    candidate_length: int
    common_length: int
    n_differing: int  # positions < common_length whose tokens differ
    first_divergence: Divergence | None = None  # None when identical
    #: "token", or "character" when a server recording has no token ids
    unit: str = "token"
    #: how the outputs were made comparable (a server recording against an embedded one)
    notes: list[str] = msgspec.field(default_factory=list)
    #: why the outputs were not compared at all (a redacted side: ``spectui.recording.redact``);
    #: then ``identical`` is False and nothing was counted but the lengths
    not_compared: str = ""



class RunSide(msgspec.Struct, kw_only=True):
    """One recording's facts as the diff uses them."""

    file: str
    mode: str  # readable: "AR", "speculative, n-gram, K=4"
    greedy: bool
    complete: bool  # has an End record
    truncated: bool  # torn tail
    truncated_at: int | None
    status: str  # readable form of the three fields above
    short_prompt: bool
    summary: Summary
    first_rss_bytes: int = 0  # first memory sample
    rss_growth_bytes: int = 0  # peak - first sample
    #: a server recording: the acceptance the server reported, or that it reported none
    server_acceptance: str = ""
    #: power, thermal state, other load (``spectui.metrics.conditions``), and in words
    conditions: dict[str, str] = msgspec.field(default_factory=dict)
    other_load: str = ""
    busiest_others: str = ""


class RunDiff(msgspec.Struct, kw_only=True):
    baseline: RunSide
    candidate: RunSide
    #: Frozen artifacts, sampling, prompt, versions, host: should be empty for a fair diff.
    artifacts: list[FieldDiff]
    #: Mode, K, drafter: expected between an AR baseline and a speculative candidate.
    configuration: list[FieldDiff]
    comparable: bool
    forced: bool  # compared although not comparable
    not_comparable: list[str]  # why not, one line each
    outputs: OutputDiff
    speedup: Speedup
    ttft_growth: float  # candidate / baseline TTFT - 1
    ttft_within_limit: bool  # ttft_growth <= MAX_TTFT_GROWTH
    ttft_limit: float = MAX_TTFT_GROWTH
    #: True when both prompts are short; TTFT growth is judged only then.
    short_prompt: bool = False
    #: What comparability was judged by when it was not prompt tokens and weights (a server
    #: recording has no prompt tokens): "" for two embedded runs.
    basis: str = ""
    #: Run conditions that differ (power, thermal state, other processes' load): they make
    #: the numbers suspect even when every artifact is the same.
    conditions: list[FieldDiff] = msgspec.field(default_factory=list)
    #: joules per generated token side by side (``spectui.compare.energy``); None when neither
    #: recording carries an energy record, and then left out of the JSON (``diff_json``)
    energy: EnergyComparison | None = None


# -- labels --------------------------------------------------------------------------------


def is_short_prompt(header: Header) -> bool:
    return header.config.prompt_tier == "short" or len(header.prompt_tokens) < SHORT_PROMPT_TOKENS


def status_label(rec: Recording) -> str:
    status = "complete" if rec.complete else "incomplete (no end record)"
    if rec.truncated:
        status += f", truncated at byte {rec.truncated_at}"
    return status


# -- outputs -------------------------------------------------------------------------------


def compare_outputs(b: tuple[list[int], list[bytes]], c: tuple[list[int], list[bytes]]) -> OutputDiff:
    bt, bp = b
    ct, cp = c
    common = min(len(bt), len(ct))
    differing = [i for i in range(common) if bt[i] != ct[i]]
    out = OutputDiff(
        identical=bt == ct, baseline_length=len(bt), candidate_length=len(ct), common_length=common, n_differing=len(differing)
    )
    if out.identical:
        return out
    i = differing[0] if differing else common  # else: one output is a prefix of the other
    # Pieces are bytes and a piece may hold half a UTF-8 character: decode runs of pieces,
    # not single ones, so only a character split exactly at the divergence shows as U+FFFD.
    before = decode_pieces(bp[max(0, i - CONTEXT_CHARS) : i])[-CONTEXT_CHARS:]
    b_after = decode_pieces(bp[i : i + CONTEXT_CHARS])[:CONTEXT_CHARS]
    c_after = decode_pieces(cp[i : i + CONTEXT_CHARS])[:CONTEXT_CHARS]
    out.first_divergence = Divergence(
        index=i,
        baseline_token=bt[i] if i < len(bt) else None,
        candidate_token=ct[i] if i < len(ct) else None,
        baseline_piece=decode_pieces(bp[i : i + 1]),
        candidate_piece=decode_pieces(cp[i : i + 1]),
        baseline_context=before + b_after,
        candidate_context=before + c_after,
        context_offset=len(before),
    )
    return out


# -- the diff ------------------------------------------------------------------------------


def run_side(rec: Recording, summary: Summary | None = None) -> RunSide:
    h = rec.header
    s = summary if summary is not None else summarize(rec.events)
    first_rss = next((ev.rss for ev in rec.events if type(ev) is MemorySample), 0)
    facts = judge_sessions([rec.events])
    return RunSide(
        file=str(rec.path),
        mode=h.config.describe(),
        greedy=h.config.sampling.greedy,
        complete=rec.complete,
        truncated=rec.truncated,
        truncated_at=rec.truncated_at,
        status=status_label(rec),
        short_prompt=is_short_prompt(h),
        summary=s,
        first_rss_bytes=first_rss,
        rss_growth_bytes=s.peak_rss_bytes - first_rss if first_rss else 0,
        server_acceptance=_server_acceptance(rec),
        conditions=conditions(facts),
        other_load=other_load_text(facts),
        busiest_others=busiest_text(facts),
    )


def _server_acceptance(rec: Recording) -> str:
    if rec.header.artifacts.server is None:
        return ""
    from spectui.server.report import acceptance_text, server_report

    return acceptance_text(server_report(rec))


def diff_recordings(baseline: Recording, candidate: Recording, *, force: bool = False) -> RunDiff:
    """Compare two recordings. Raises ``SpectuiError`` (one line) when they are not
    comparable (different prompt tokens or target weights) unless ``force``."""
    why = comparability(baseline.header, candidate.header)
    if why and not force:
        raise SpectuiError(
            f"{baseline.path} and {candidate.path} are not comparable: {'; '.join(why)} (--force compares them anyway)"
        )
    artifacts, config = compare_headers(baseline.header, candidate.header)
    b, c = run_side(baseline), run_side(candidate)
    b_out, c_out, unit, basis = output_tokens(baseline.events), output_tokens(candidate.events), "token", ""
    notes: list[str] = []
    redacted = outputs_not_comparable(baseline.header, candidate.header)
    if redacted:
        n_b, n_c = len(b_out[0]), len(c_out[0])
        outputs = OutputDiff(identical=False, baseline_length=n_b, candidate_length=n_c, common_length=min(n_b, n_c), n_differing=0)
        outputs.not_compared = redacted
        basis = "redacted: the prompts are matched by their length and the target weights, not their tokens"
    else:
        if baseline.header.artifacts.server is not None or candidate.header.artifacts.server is not None:
            from spectui.server.compare import align_outputs
            from spectui.server.compare import comparability as server_comparability

            b_out, c_out, unit, notes = align_outputs(baseline, candidate, b_out, c_out)
            basis = server_comparability(baseline.header, candidate.header)[1]
        outputs = compare_outputs(b_out, c_out)
        outputs.unit, outputs.notes = unit, notes
    if outputs.first_divergence is not None and unit == "token":
        outputs.first_divergence.cause = judge_outputs(RunOutput.of_recording(baseline), RunOutput.of_recording(candidate),
                                                       index=outputs.first_divergence.index)
    growth = c.summary.ttft_ms / b.summary.ttft_ms - 1 if b.summary.ttft_ms > 0 else float("nan")
    return RunDiff(
        baseline=b,
        candidate=c,
        artifacts=artifacts,
        configuration=config,
        comparable=not why,
        forced=bool(why),
        not_comparable=why,
        outputs=outputs,
        speedup=speedup_ci(baseline, candidate),
        ttft_growth=float(growth),
        ttft_within_limit=bool(growth <= MAX_TTFT_GROWTH),
        short_prompt=b.short_prompt and c.short_prompt,
        basis=basis,
        conditions=diffs(b.conditions, c.conditions),
        energy=compare_energy(baseline, candidate),
    )


def diff_json(d: RunDiff) -> dict:
    """The diff as ``--json`` prints it: ``energy`` only where a recording carries it, so the
    diff of recordings made before energy was sampled keeps the keys scripts read."""
    doc = msgspec.to_builtins(d)
    if doc.get("energy") is None:
        doc.pop("energy", None)
    return doc


# -- text and markdown -----------------------------------------------------------------------

#: A terminal table clips long values (llama.cpp's system_info line); --json has them whole.
CELL_WIDTH = 56


def _show(v: Value) -> str:
    if v is None:
        return "(none)"
    if v == "":
        return "(empty)"
    return str(v)


def _escape(text: str) -> str:
    """Control characters visible, so a context stays on one line."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def _clip(v: str) -> str:
    return v if len(v) <= CELL_WIDTH else v[: CELL_WIDTH - 1] + "…"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if a == a and b == b and b > 0 else "n/a"


def _pct(a: float, b: float) -> str:
    return f"{(a / b - 1) * 100:+.1f}%" if a == a and b == b and b > 0 else "n/a"


def describe_outputs(o: OutputDiff, *, with_cause: bool = True) -> list[str]:
    u = o.unit
    if o.not_compared:
        return [f"{o.not_compared} ({o.baseline_length} vs {o.candidate_length} {u}s)"]
    if o.identical:
        return [f"identical: {o.common_length} {u}s", *(f"({n})" for n in o.notes)]
    d = o.first_divergence
    assert d is not None
    lines = []
    if o.n_differing:
        lines.append(
            f'diverge at {u} {d.index}: {d.baseline_token} "{_escape(d.baseline_piece)}" vs'
            f' {d.candidate_token} "{_escape(d.candidate_piece)}"; {o.n_differing} of {o.common_length} common positions differ'
        )
    else:
        lines.append(f"identical over the common {o.common_length} {u}s; one output continues past the other")
    if with_cause and d.cause is not None and o.n_differing:
        lines.append(f"cause: {d.cause.line}")
    if o.baseline_length != o.candidate_length:
        lines.append(f"lengths differ: {o.baseline_length} vs {o.candidate_length} {u}s")
    lines += [f"({n})" for n in o.notes]
    lines.append(f'baseline : "{_escape(d.baseline_context)}"')
    lines.append(f'candidate: "{_escape(d.candidate_context)}"')
    # the caret sits under the first character where the two sides part
    lines.append(" " * (len('candidate: "') + len(_escape(d.baseline_context[: d.context_offset]))) + "^")
    return lines


Row = list[str]


def _speed_rows(d: RunDiff) -> list[Row]:
    b, c, sp = d.baseline.summary, d.candidate.summary, d.speedup
    ci = f" (95% CI {num_or_na(sp.ci_low, '.2f')}-{num_or_na(sp.ci_high, '.2f')})" if sp.ci_low == sp.ci_low else ""
    ttft = _pct(c.ttft_ms, b.ttft_ms)
    if d.ttft_growth == d.ttft_growth:  # not NaN
        if d.short_prompt:
            ttft += f", {'within' if d.ttft_within_limit else 'beyond'} +{d.ttft_limit:.0%} (short prompt)"
        else:
            ttft += f", long prompt: the +{d.ttft_limit:.0%} limit does not apply"
    same = f"; over {sp.compared_tokens} tokens, up to where the outputs part" if sp.parted_at >= 0 else ""
    rows = [
        ["decode tok/s", num_or_na(sp.baseline_tok_s, ".2f"), num_or_na(sp.candidate_tok_s, ".2f"), _ratio(sp.ratio, 1.0) + ci + same],
        ["steady tok/s", num_or_na(b.steady_tok_s, ".2f"), num_or_na(c.steady_tok_s, ".2f"), _ratio(c.steady_tok_s, b.steady_tok_s)],
        ["TTFT ms", num_or_na(b.ttft_ms), num_or_na(c.ttft_ms), ttft],
        ["prefill ms", num_or_na(b.prefill_ms), num_or_na(c.prefill_ms), _pct(c.prefill_ms, b.prefill_ms)],
    ]
    for q in ("p50", "p95", "p99"):
        bv, cv = getattr(b, f"itl_{q}_ms"), getattr(c, f"itl_{q}_ms")
        rows.append([f"ITL {q} ms", num_or_na(bv, ".2f"), num_or_na(cv, ".2f"), _pct(cv, bv)])
    return rows


def _accept_rows(d: RunDiff) -> list[Row]:
    b, c = d.baseline.summary, d.candidate.summary

    def per_pos(s: Summary) -> str:
        return " ".join(num_or_na(x, ".2f") for x in s.per_position_acceptance) or "n/a"

    rows = []
    if d.baseline.server_acceptance or d.candidate.server_acceptance:
        rows.append(["acceptance (server-reported)", d.baseline.server_acceptance or "-", d.candidate.server_acceptance or "-", ""])
    return rows + [
        ["acceptance rate", num_or_na(b.acceptance_rate, ".3f"), num_or_na(c.acceptance_rate, ".3f"), ""],
        ["mean accepted length", num_or_na(b.mean_accepted_length, ".2f"), num_or_na(c.mean_accepted_length, ".2f"), ""],
        ["per-position acceptance", per_pos(b), per_pos(c), ""],
        ["blocks / rollbacks", f"{b.draft_blocks} / {b.rollbacks}", f"{c.draft_blocks} / {c.rollbacks}", ""],
        ["draft forwards", str(b.draft_forwards), str(c.draft_forwards), ""],
    ]


def _memory_rows(d: RunDiff) -> list[Row]:
    b, c = d.baseline, d.candidate
    bs, cs = b.summary, c.summary

    def peak(s: Summary) -> str:
        return mib(s.peak_rss_bytes) if s.peak_rss_bytes else "n/a"

    def growth(side: RunSide) -> str:
        return signed_mib(side.rss_growth_bytes) if side.first_rss_bytes else "n/a"

    rss_change = signed_mib(cs.peak_rss_bytes - bs.peak_rss_bytes) if bs.peak_rss_bytes and cs.peak_rss_bytes else ""
    return [
        ["peak RSS", peak(bs), peak(cs), rss_change],
        ["RSS growth (peak - first)", growth(b), growth(c), ""],
        ["minimum headroom", mib(bs.min_headroom_bytes), mib(cs.min_headroom_bytes), ""],
        ["swap delta", signed_mib(bs.swap_delta_bytes), signed_mib(cs.swap_delta_bytes), ""],
    ]


def _files_rows(d: RunDiff) -> list[Row]:
    b, c = d.baseline, d.candidate
    bs, cs = b.summary, c.summary
    return [
        ["file", b.file, c.file, ""],
        ["mode", b.mode, c.mode, ""],
        ["status", b.status, c.status, ""],
        ["finish", bs.finish_reason or "none", cs.finish_reason or "none", ""],
        ["tokens (prompt / generated)", f"{bs.n_prompt_tokens} / {bs.n_tokens}", f"{cs.n_prompt_tokens} / {cs.n_tokens}", ""],
    ]


def format_diff_text(d: RunDiff) -> str:
    sides = [["baseline", f"{d.baseline.file} ({d.baseline.mode})"], ["candidate", f"{d.candidate.file} ({d.candidate.mode})"]]
    lines = [text_table(None, sides, indent=0)]
    if d.forced:
        lines.append(f"COMPARED BY FORCE: {'; '.join(d.not_comparable)}")
    if d.basis:
        lines.append(d.basis)
    lines.append(section_title(f"artifacts: {len(d.artifacts)} difference{'s' if len(d.artifacts) != 1 else ''}"))
    if d.artifacts:
        rows = [[f.path, _clip(_escape(_show(f.baseline))), _clip(_escape(_show(f.candidate))), f.note] for f in d.artifacts]
        lines.append(text_table(["field", "baseline", "candidate", ""], rows))
    else:
        lines.append("  none: same model file, quant, runtime, template, sampling, prompt, host and spectui version")
    lines += _conditions_text(d)
    lines.append(section_title("configuration (expected to differ)"))
    if d.configuration:
        lines.append(text_table(["field", "baseline", "candidate"], [[f.path, _show(f.baseline), _show(f.candidate)] for f in d.configuration]))
    else:
        lines.append("  same mode, drafter and K")
    lines.append(section_title("runs"))
    lines.append(text_table(["", "baseline", "candidate", ""], _files_rows(d)))
    lines.append(section_title("outputs"))
    lines += ["  " + x for x in describe_outputs(d.outputs)]
    lines.append(section_title("speed"))
    lines.append(text_table(["", "baseline", "candidate", "candidate vs baseline"], _speed_rows(d)))
    lines += energy_text(d.energy)
    lines.append(section_title("acceptance"))
    lines.append(text_table(["", "baseline", "candidate", ""], _accept_rows(d)))
    lines.append(section_title("memory"))
    lines.append(text_table(["", "baseline", "candidate", "change"], _memory_rows(d)))
    return "\n".join(lines)


def _conditions_text(d: RunDiff) -> list[str]:
    """Differing run conditions, then each side's measured other load (a shared machine shows
    even when both sides were shared alike)."""
    n = len(d.conditions)
    lines = [section_title(f"run conditions: {n} difference{'s' if n != 1 else ''} (power, thermal, other load)")]
    rows = [[f.path, _show(f.baseline), _show(f.candidate)] for f in d.conditions]
    rows.append(["other load (measured)", d.baseline.other_load, d.candidate.other_load])
    rows.append(["busiest others", _clip(d.baseline.busiest_others), _clip(d.candidate.busiest_others)])
    lines.append(text_table(["condition", "baseline", "candidate"], rows))
    return lines


def _markdown(header: list[str], rows: list[Row]) -> list[str]:
    """A markdown table of visible-escaped cells, then a blank line."""
    return [markdown_table(header, [[_escape(v) for v in r] for r in rows]), ""]


def format_diff_markdown(d: RunDiff) -> str:
    lines = [
        "## spectui diff",
        "",
        f"* baseline: `{d.baseline.file}` ({d.baseline.mode}, {d.baseline.status})",
        f"* candidate: `{d.candidate.file}` ({d.candidate.mode}, {d.candidate.status})",
    ]
    if d.forced:
        lines.append(f"* **compared by force**: {'; '.join(d.not_comparable)}")
    if d.basis:
        lines.append(f"* {d.basis}")
    lines += ["", f"### Artifacts ({len(d.artifacts)} differences)", ""]
    if d.artifacts:
        rows = [[f"`{f.path}`", _show(f.baseline), _show(f.candidate), f.note] for f in d.artifacts]
        lines += _markdown(["field", "baseline", "candidate", "note"], rows)
    else:
        lines += ["None: same model file, quant, runtime, template, sampling, prompt, host and spectui version.", ""]
    lines += [f"### Run conditions ({len(d.conditions)} differences)", ""]
    rows = [[f.path, _show(f.baseline), _show(f.candidate)] for f in d.conditions]
    rows += [["other load (measured)", d.baseline.other_load, d.candidate.other_load]]
    lines += _markdown(["condition", "baseline", "candidate"], rows)
    lines += ["### Configuration (expected to differ)", ""]
    if d.configuration:
        rows = [[f"`{f.path}`", _show(f.baseline), _show(f.candidate)] for f in d.configuration]
        lines += _markdown(["field", "baseline", "candidate"], rows)
    else:
        lines += ["Same mode, drafter and K.", ""]
    lines += ["### Outputs", ""]
    o = describe_outputs(d.outputs, with_cause=False)
    lines += [o[0], ""]
    div = d.outputs.first_divergence
    if div is not None and div.cause is not None and d.outputs.n_differing:
        lines += [f"**Cause:** {div.cause.line}", ""]
    if len(o) > 1:
        lines += ["```", *o[1:], "```", ""]
    lines += ["### Speed", ""]
    lines += _markdown(["metric", "baseline", "candidate", "candidate vs baseline"], _speed_rows(d))
    lines += energy_markdown(d.energy)
    lines += ["### Acceptance", ""]
    lines += _markdown(["metric", "baseline", "candidate"], [r[:3] for r in _accept_rows(d)])
    lines += ["### Memory", ""]
    lines += _markdown(["metric", "baseline", "candidate", "change"], _memory_rows(d))
    return "\n".join(lines).rstrip() + "\n"
