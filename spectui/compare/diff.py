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
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import numpy as np

from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.metrics.stats import Summary, summarize
from spectui.recording.reader import Recording
from spectui.recording.report import _mib, num_or_na
from spectui.recording.schema import Header, MemorySample, Step

#: A prompt shorter than this (or of tier "short") is "short": TTFT there is dominated by
#: fixed costs the candidate must not add to, so TTFT growth is judged on short prompts only.
SHORT_PROMPT_TOKENS = 256
#: TTFT may grow by at most this share on short prompts (the production gate's default).
MAX_TTFT_GROWTH = 0.08
#: Bootstrap settings for the speedup interval (see ``speedup_ci``).
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
CONTEXT_CHARS = 20  # text shown on each side of a divergence (about 40 in all)

Value = str | int | float | bool | None


class FieldDiff(msgspec.Struct, kw_only=True):
    """One header field that differs. Long values (prompts, system info) are cut to the part
    around their first difference; ``note`` says where that is."""

    path: str  # e.g. "artifacts.target.sha256", "config.sampling.temperature"
    baseline: Value
    candidate: Value
    note: str = ""


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


class Speedup(msgspec.Struct, kw_only=True):
    baseline_tok_s: float
    candidate_tok_s: float
    ratio: float  # candidate / baseline decode rate
    ci_low: float
    ci_high: float
    confidence: float = 0.95
    resamples: int = BOOTSTRAP_RESAMPLES
    seed: int = BOOTSTRAP_SEED
    baseline_steps: int = 0  # decode steps resampled on each side
    candidate_steps: int = 0


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


# -- labels --------------------------------------------------------------------------------


def mode_label(config: RunConfig) -> str:
    if config.mode == "ar":
        return "AR"
    if config.backend.name == "server":  # K and the drafter are the server's own settings
        return "speculative (drafting configured on the server)"
    d = config.draft
    drafter = "n-gram" if d.is_ngram else f"draft model {d.source}"
    k = f"K={d.k}" + (f" adaptive {d.k_min}-{d.k_max}" if d.adaptive else "")
    return f"speculative, {drafter}, {k}"


def is_short_prompt(header: Header) -> bool:
    return header.config.prompt_tier == "short" or len(header.prompt_tokens) < SHORT_PROMPT_TOKENS


def status_label(rec: Recording) -> str:
    status = "complete" if rec.complete else "incomplete (no end record)"
    if rec.truncated:
        status += f", truncated at byte {rec.truncated_at}"
    return status


# -- header fields -------------------------------------------------------------------------


def _flatten(prefix: str, obj: Any) -> Iterator[tuple[str, Any]]:
    """(dotted path, scalar) pairs of a msgspec-builtins tree, in field order."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _flatten(f"{prefix}.{k}", v)
    else:
        yield prefix, obj


def _fields(prefix: str, obj: Any) -> dict[str, Any]:
    return dict(_flatten(prefix, msgspec.to_builtins(obj)))


def first_difference(a: str | list, b: str | list) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def _field_diff(path: str, a: Any, b: Any) -> FieldDiff:
    if isinstance(a, list) or isinstance(b, list):  # prompt tokens: far too long to show
        a, b = a or [], b or []
        i = first_difference(a, b)
        note = f"first difference at token {i}"
        return FieldDiff(path=path, baseline=f"{len(a)} tokens", candidate=f"{len(b)} tokens", note=note)
    if isinstance(a, str) and isinstance(b, str) and max(len(a), len(b)) > 60:
        i = first_difference(a, b)
        lo = max(0, i - 20)

        def cut(s: str) -> str:
            return ("..." if lo else "") + s[lo : i + 40] + ("..." if len(s) > i + 40 else "")

        note = f"first difference at character {i} ({len(a)} vs {len(b)} characters)"
        return FieldDiff(path=path, baseline=cut(a), candidate=cut(b), note=note)
    return FieldDiff(path=path, baseline=a, candidate=b)


def _diffs(a: dict[str, Any], b: dict[str, Any]) -> list[FieldDiff]:
    keys = list(a) + [k for k in b if k not in a]  # a key only one side has shows as None
    return [_field_diff(k, a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)]


def _artifact_fields(h: Header, *, with_draft: bool) -> dict[str, Any]:
    """Everything that should be equal between two runs being compared, most telling first."""
    c, a = h.config, h.artifacts
    out: dict[str, Any] = {"prompt_tokens": h.prompt_tokens, "prompt_text": h.prompt_text}
    for name in ("prompt", "prompt_tier", "chat", "target"):
        out[f"config.{name}"] = getattr(c, name)
    out.update(_fields("artifacts.target", a.target))
    out.update(_fields("config.sampling", c.sampling))
    out["config.max_tokens"] = c.max_tokens
    # an interleaved run's clock leaves out its peer's time: not comparable at face value
    out["clock"] = h.clock
    out.update(_fields("artifacts.runtime", a.runtime))
    out.update(_fields("config.backend", c.backend))
    out.update(_fields("artifacts.offload", a.offload))
    if with_draft and a.draft is not None:
        out.update(_fields("artifacts.draft", a.draft))
    out.update(_fields("artifacts.host", a.host))
    if a.server is not None:  # a measured server: where and what it was
        for name in ("url", "kind", "version", "endpoint", "model_id"):
            out[f"artifacts.server.{name}"] = getattr(a.server, name)
    out["spectui_version"] = h.spectui_version
    out["schema_version"] = h.schema_version
    return out


def _draft_label(h: Header) -> str | None:
    d = h.artifacts.draft
    return None if d is None else f"{d.name or d.path} ({d.quant}, sha256 {d.sha256[:12]})"


def compare_headers(b: Header, c: Header) -> tuple[list[FieldDiff], list[FieldDiff]]:
    """(artifact differences, configuration differences).

    The draft settings of an AR run are inert (the config keeps their defaults), so between AR
    and speculative only the mode, the drafter and K are listed. A draft model's own artifacts
    count as configuration when the drafter itself changed, and as artifacts when the same
    drafter path now holds a different file.
    """
    bc, cc = b.config, c.config
    config: list[FieldDiff] = []
    if bc.mode != cc.mode:
        config.append(FieldDiff(path="config.mode", baseline=bc.mode, candidate=cc.mode))
        config.append(
            FieldDiff(
                path="config.draft.source",
                baseline=bc.draft.source if bc.mode == "spec" else None,
                candidate=cc.draft.source if cc.mode == "spec" else None,
            )
        )
        config.append(
            FieldDiff(
                path="config.draft.k",
                baseline=bc.draft.k if bc.mode == "spec" else None,
                candidate=cc.draft.k if cc.mode == "spec" else None,
            )
        )
    elif bc.mode == "spec":
        config += _diffs(_fields("config.draft", bc.draft), _fields("config.draft", cc.draft))
    same_drafter = bc.mode == cc.mode == "spec" and bc.draft.source == cc.draft.source
    both_drafts = b.artifacts.draft is not None and c.artifacts.draft is not None
    if not (same_drafter and both_drafts) and _draft_label(b) != _draft_label(c):
        config.append(FieldDiff(path="artifacts.draft", baseline=_draft_label(b), candidate=_draft_label(c)))
    with_draft = same_drafter and both_drafts
    artifacts = _diffs(_artifact_fields(b, with_draft=with_draft), _artifact_fields(c, with_draft=with_draft))
    return artifacts, config


def comparability(b: Header, c: Header) -> list[str]:
    """Why two runs cannot be compared (empty when they can)."""
    if b.artifacts.server is not None or c.artifacts.server is not None:
        from spectui.server.compare import comparability as server_comparability

        return server_comparability(b, c)[0]
    why = []
    if b.prompt_tokens != c.prompt_tokens:
        i = first_difference(b.prompt_tokens, c.prompt_tokens)
        why.append(
            f"the prompt tokens differ ({len(b.prompt_tokens)} vs {len(c.prompt_tokens)} tokens, first difference at token {i})"
        )
    bs, cs = b.artifacts.target.sha256, c.artifacts.target.sha256
    if bs != cs:
        why.append(f"the target models differ (sha256 {bs[:12] or 'unknown'} vs {cs[:12] or 'unknown'})")
    return why


# -- outputs -------------------------------------------------------------------------------


def output_tokens(rec: Recording) -> tuple[list[int], list[bytes]]:
    tokens: list[int] = []
    pieces: list[bytes] = []
    for ev in rec.events:
        if type(ev) is Step:
            tokens.extend(ev.tokens)
            pieces.extend(ev.pieces)
    return tokens, pieces


def _text(pieces: list[bytes]) -> str:
    return b"".join(pieces).decode("utf-8", errors="replace")


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
    before = _text(bp[max(0, i - CONTEXT_CHARS) : i])[-CONTEXT_CHARS:]
    b_after = _text(bp[i : i + CONTEXT_CHARS])[:CONTEXT_CHARS]
    c_after = _text(cp[i : i + CONTEXT_CHARS])[:CONTEXT_CHARS]
    out.first_divergence = Divergence(
        index=i,
        baseline_token=bt[i] if i < len(bt) else None,
        candidate_token=ct[i] if i < len(ct) else None,
        baseline_piece=_text(bp[i : i + 1]),
        candidate_piece=_text(cp[i : i + 1]),
        baseline_context=before + b_after,
        candidate_context=before + c_after,
        context_offset=len(before),
    )
    return out


# -- speed ---------------------------------------------------------------------------------


def decode_steps(rec: Recording) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, seconds) per decode step, the units the speedup is resampled in.

    A step's duration runs from the previous step's last token to its own last token: the
    time a client waited for what the step delivered (draft, verify and any stall). The first
    token pays for the prefill and is not decode, so the first step counts only its other
    tokens, from its first token on. Sums therefore equal ``summarize``'s decode rate:
    (tokens - 1) / (last token time - first token time).
    """
    tokens: list[int] = []
    seconds: list[float] = []
    last: int | None = None
    for ev in rec.events:
        if type(ev) is not Step or not ev.t_us:
            continue  # a step without tokens: its time folds into the next step's
        if last is None:
            n, start = len(ev.t_us) - 1, ev.t_us[0]
        else:
            n, start = len(ev.t_us), last
        last = ev.t_us[-1]
        if n:
            tokens.append(n)
            seconds.append((last - start) / 1e6)
    return np.asarray(tokens, dtype=np.float64), np.asarray(seconds, dtype=np.float64)


def _resampled_rates(tokens: np.ndarray, seconds: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` bootstrap rates: each resamples the steps with replacement, rate = sum / sum.
    Done in chunks so that a long run (10k steps) never needs a 20M-entry index array."""
    m = len(tokens)
    rows = max(1, (1 << 21) // m)
    out = np.empty(n)
    for lo in range(0, n, rows):
        idx = rng.integers(0, m, size=(min(rows, n - lo), m))
        with np.errstate(divide="ignore", invalid="ignore"):
            out[lo : lo + len(idx)] = tokens[idx].sum(axis=1) / seconds[idx].sum(axis=1)
    return out


def speedup_ci(
    baseline: Recording, candidate: Recording, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> Speedup:
    """Decode speedup (candidate / baseline tok/s) with a 95% percentile-bootstrap interval.

    Method: each run is cut into decode steps, (tokens delivered, seconds waited) each (see
    ``decode_steps``); a step, not a token, is the unit because a speculative block's tokens
    arrive together and are not independent. Each resample draws both runs' steps with
    replacement (independently, same count as the run has), computes each rate as sum of
    tokens / sum of seconds (a ratio estimator, so a few long stalls weigh what they cost) and
    takes the ratio of the two rates; the interval is the 2.5th and 97.5th percentile of
    ``resamples`` such ratios, with a fixed seed so the same files give the same interval.

    What it covers: step-to-step variation inside these two runs (stalls, rejections). It
    treats steps as independent, which ignores drift within a run, and it cannot see run-to-run
    variation (a busy machine for one whole run): record several runs and use ``gate`` for that.
    """
    bt, bs = decode_steps(baseline)
    ct, cs = decode_steps(candidate)
    b_rate = bt.sum() / bs.sum() if bs.sum() > 0 else float("nan")
    c_rate = ct.sum() / cs.sum() if cs.sum() > 0 else float("nan")
    ratio = c_rate / b_rate if b_rate == b_rate and b_rate > 0 else float("nan")
    lo = hi = float("nan")
    if len(bt) >= 2 and len(ct) >= 2 and ratio == ratio:
        rng = np.random.default_rng(seed)
        ratios = _resampled_rates(ct, cs, rng, resamples) / _resampled_rates(bt, bs, rng, resamples)
        ratios = ratios[np.isfinite(ratios)]
        if len(ratios):
            lo, hi = (float(v) for v in np.percentile(ratios, [2.5, 97.5]))
    return Speedup(
        baseline_tok_s=float(b_rate),
        candidate_tok_s=float(c_rate),
        ratio=float(ratio),
        ci_low=lo,
        ci_high=hi,
        resamples=resamples,
        seed=seed,
        baseline_steps=len(bt),
        candidate_steps=len(ct),
    )


# -- the diff ------------------------------------------------------------------------------


def run_side(rec: Recording, summary: Summary | None = None) -> RunSide:
    h = rec.header
    s = summary if summary is not None else summarize(rec.events)
    first_rss = next((ev.rss for ev in rec.events if type(ev) is MemorySample), 0)
    return RunSide(
        file=str(rec.path),
        mode=mode_label(h.config),
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
    b_out, c_out, unit, notes, basis = output_tokens(baseline), output_tokens(candidate), "token", [], ""
    if baseline.header.artifacts.server is not None or candidate.header.artifacts.server is not None:
        from spectui.server.compare import align_outputs
        from spectui.server.compare import comparability as server_comparability

        b_out, c_out, unit, notes = align_outputs(baseline, candidate, b_out, c_out)
        basis = server_comparability(baseline.header, candidate.header)[1]
    outputs = compare_outputs(b_out, c_out)
    outputs.unit, outputs.notes = unit, notes
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
    )


# -- formatting ----------------------------------------------------------------------------


def _show(v: Value) -> str:
    if v is None:
        return "(none)"
    if v == "":
        return "(empty)"
    return str(v)


def _escape(text: str) -> str:
    """Control characters visible, so a context stays on one line."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def _signed_mib(n: int) -> str:
    return f"{n / 2**20:+,.1f} MiB"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if a == a and b == b and b > 0 else "n/a"


def _pct(a: float, b: float) -> str:
    return f"{(a / b - 1) * 100:+.1f}%" if a == a and b == b and b > 0 else "n/a"


def describe_outputs(o: OutputDiff) -> list[str]:
    u = o.unit
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
    if o.baseline_length != o.candidate_length:
        lines.append(f"lengths differ: {o.baseline_length} vs {o.candidate_length} {u}s")
    lines += [f"({n})" for n in o.notes]
    lines.append(f'baseline : "{_escape(d.baseline_context)}"')
    lines.append(f'candidate: "{_escape(d.candidate_context)}"')
    # the caret sits under the first character where the two sides part
    lines.append(" " * (len('candidate: "') + len(_escape(d.baseline_context[: d.context_offset]))) + "^")
    return lines


def _speed_rows(d: RunDiff) -> list[tuple[str, str, str, str]]:
    b, c, sp = d.baseline.summary, d.candidate.summary, d.speedup
    ci = f" (95% CI {num_or_na(sp.ci_low, '.2f')}-{num_or_na(sp.ci_high, '.2f')})" if sp.ci_low == sp.ci_low else ""
    ttft = _pct(c.ttft_ms, b.ttft_ms)
    if d.ttft_growth == d.ttft_growth:  # not NaN
        if d.short_prompt:
            ttft += f", {'within' if d.ttft_within_limit else 'beyond'} +{d.ttft_limit:.0%} (short prompt)"
        else:
            ttft += f", long prompt: the +{d.ttft_limit:.0%} limit does not apply"
    rows = [
        ("decode tok/s", num_or_na(sp.baseline_tok_s, ".2f"), num_or_na(sp.candidate_tok_s, ".2f"), _ratio(sp.ratio, 1.0) + ci),
        ("steady tok/s", num_or_na(b.steady_tok_s, ".2f"), num_or_na(c.steady_tok_s, ".2f"), _ratio(c.steady_tok_s, b.steady_tok_s)),
        ("TTFT ms", num_or_na(b.ttft_ms), num_or_na(c.ttft_ms), ttft),
        ("prefill ms", num_or_na(b.prefill_ms), num_or_na(c.prefill_ms), _pct(c.prefill_ms, b.prefill_ms)),
    ]
    for q in ("p50", "p95", "p99"):
        bv, cv = getattr(b, f"itl_{q}_ms"), getattr(c, f"itl_{q}_ms")
        rows.append((f"ITL {q} ms", num_or_na(bv, ".2f"), num_or_na(cv, ".2f"), _pct(cv, bv)))
    return rows


def _accept_rows(d: RunDiff) -> list[tuple[str, str, str, str]]:
    b, c = d.baseline.summary, d.candidate.summary

    def per_pos(s: Summary) -> str:
        return " ".join(num_or_na(x, ".2f") for x in s.per_position_acceptance) or "n/a"

    server = [("acceptance (server-reported)", d.baseline.server_acceptance or "-", d.candidate.server_acceptance or "-", "")]
    return server * bool(d.baseline.server_acceptance or d.candidate.server_acceptance) + [
        ("acceptance rate", num_or_na(b.acceptance_rate, ".3f"), num_or_na(c.acceptance_rate, ".3f"), ""),
        ("mean accepted length", num_or_na(b.mean_accepted_length, ".2f"), num_or_na(c.mean_accepted_length, ".2f"), ""),
        ("per-position acceptance", per_pos(b), per_pos(c), ""),
        ("blocks / rollbacks", f"{b.draft_blocks} / {b.rollbacks}", f"{c.draft_blocks} / {c.rollbacks}", ""),
        ("draft forwards", str(b.draft_forwards), str(c.draft_forwards), ""),
    ]


def _memory_rows(d: RunDiff) -> list[tuple[str, str, str, str]]:
    b, c = d.baseline, d.candidate
    bs, cs = b.summary, c.summary

    def peak(s: Summary) -> str:
        return _mib(s.peak_rss_bytes) if s.peak_rss_bytes else "n/a"

    def growth(side: RunSide) -> str:
        return _signed_mib(side.rss_growth_bytes) if side.first_rss_bytes else "n/a"

    rss_change = _signed_mib(cs.peak_rss_bytes - bs.peak_rss_bytes) if bs.peak_rss_bytes and cs.peak_rss_bytes else ""
    return [
        ("peak RSS", peak(bs), peak(cs), rss_change),
        ("RSS growth (peak - first)", growth(b), growth(c), ""),
        ("minimum headroom", _mib(bs.min_headroom_bytes), _mib(cs.min_headroom_bytes), ""),
        ("swap delta", _signed_mib(bs.swap_delta_bytes), _signed_mib(cs.swap_delta_bytes), ""),
    ]


def _files_rows(d: RunDiff) -> list[tuple[str, str, str, str]]:
    b, c = d.baseline, d.candidate
    bs, cs = b.summary, c.summary
    return [
        ("file", b.file, c.file, ""),
        ("mode", b.mode, c.mode, ""),
        ("status", b.status, c.status, ""),
        ("finish", bs.finish_reason or "none", cs.finish_reason or "none", ""),
        ("tokens (prompt / generated)", f"{bs.n_prompt_tokens} / {bs.n_tokens}", f"{cs.n_prompt_tokens} / {cs.n_tokens}", ""),
    ]


def _table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = lambda r: "  " + "  ".join(f"{v:<{w}}" for v, w in zip(r, widths)).rstrip()  # noqa: E731
    return [fmt(header), *(fmt(r) for r in rows)]


def _section(title: str) -> str:
    return f"-- {title} " + "-" * max(0, 60 - len(title))


#: A terminal table clips long values (llama.cpp's system_info line); --json has them whole.
CELL_WIDTH = 56


def _clip(v: str) -> str:
    return v if len(v) <= CELL_WIDTH else v[: CELL_WIDTH - 1] + "…"


def format_diff_text(d: RunDiff) -> str:
    lines = [f"baseline  {d.baseline.file} ({d.baseline.mode})", f"candidate {d.candidate.file} ({d.candidate.mode})"]
    if d.forced:
        lines.append(f"COMPARED BY FORCE: {'; '.join(d.not_comparable)}")
    if d.basis:
        lines.append(d.basis)
    lines.append(_section(f"artifacts: {len(d.artifacts)} difference{'s' if len(d.artifacts) != 1 else ''}"))
    if d.artifacts:
        rows = [(f.path, _clip(_escape(_show(f.baseline))), _clip(_escape(_show(f.candidate))), f.note) for f in d.artifacts]
        lines += _table(rows, ("field", "baseline", "candidate", ""))
    else:
        lines.append("  none: same model file, quant, runtime, template, sampling, prompt, host and spectui version")
    lines.append(_section("configuration (expected to differ)"))
    if d.configuration:
        rows = [(f.path, _show(f.baseline), _show(f.candidate)) for f in d.configuration]
        lines += _table(rows, ("field", "baseline", "candidate"))
    else:
        lines.append("  same mode, drafter and K")
    lines.append(_section("runs"))
    lines += _table(_files_rows(d), ("", "baseline", "candidate", ""))
    lines.append(_section("outputs"))
    lines += ["  " + x for x in describe_outputs(d.outputs)]
    lines.append(_section("speed"))
    lines += _table(_speed_rows(d), ("", "baseline", "candidate", "candidate vs baseline"))
    lines.append(_section("acceptance"))
    lines += _table(_accept_rows(d), ("", "baseline", "candidate", ""))
    lines.append(_section("memory"))
    lines += _table(_memory_rows(d), ("", "baseline", "candidate", "change"))
    return "\n".join(lines)


def _md_cell(v: str) -> str:
    return _escape(v).replace("|", "\\|") if v else " "


def _md_table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_md_cell(v) for v in r) + " |" for r in rows]
    return out + [""]


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
        rows = [(f"`{f.path}`", _show(f.baseline), _show(f.candidate), f.note) for f in d.artifacts]
        lines += _md_table(rows, ("field", "baseline", "candidate", "note"))
    else:
        lines += ["None: same model file, quant, runtime, template, sampling, prompt, host and spectui version.", ""]
    lines += ["### Configuration (expected to differ)", ""]
    if d.configuration:
        rows = [(f"`{f.path}`", _show(f.baseline), _show(f.candidate)) for f in d.configuration]
        lines += _md_table(rows, ("field", "baseline", "candidate"))
    else:
        lines += ["Same mode, drafter and K.", ""]
    lines += ["### Outputs", ""]
    o = describe_outputs(d.outputs)
    lines += [o[0], ""]
    if len(o) > 1:
        lines += ["```", *o[1:], "```", ""]
    lines += ["### Speed", ""]
    lines += _md_table(_speed_rows(d), ("metric", "baseline", "candidate", "candidate vs baseline"))
    lines += ["### Acceptance", ""]
    lines += _md_table([r[:3] for r in _accept_rows(d)], ("metric", "baseline", "candidate"))
    lines += ["### Memory", ""]
    lines += _md_table(_memory_rows(d), ("metric", "baseline", "candidate", "change"))
    return "\n".join(lines).rstrip() + "\n"
