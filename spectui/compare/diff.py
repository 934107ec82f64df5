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
``spectui.compare.speedup``; this module puts them together with the outputs. How a diff reads
as text or markdown is ``spectui.compare.diff_format``.
"""

from __future__ import annotations

import msgspec

from spectui.compare.divergence import Judgement, RunOutput, judge_outputs
from spectui.compare.energy import EnergyComparison, compare_energy
from spectui.compare.headers import FieldDiff, comparability, compare_headers, diffs
from spectui.compare.speedup import Speedup, speedup_ci
from spectui.compare.thresholds import MAX_TTFT_GROWTH
from spectui.errors import SpectuiError
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
