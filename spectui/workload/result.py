"""What a workload measured: each request, each level of each setting, and the verdicts.

Kept as ``workload.json`` beside the requests' recordings (msgspec, so it reads back typed).

**A speedup is over the same work.** A setting's request and its AR twin at the same level may
part (numerics at a near-tie, or a defect): the two are then compared only up to where they
part, on the time from sending each request to the arrival of its last token in common. A
level's speedup is the AR twins' summed time over the setting's, over those common tokens
(under a closed loop of N clients, summed request time is N over throughput, so this is the
throughput ratio on the same text); ``same_text`` says how many tokens of how many that is.

**Exact under load.** Every greedy request is held against the same request's AR output at one
client (the reference): identical, a numerical near-tie (both margins within what this
backend's own batch-shape noise can flip, as ``spectui.compare.divergence`` judges a single
run), or a defect (speculation, or batching, changed the output); unjudged where no margin or
calibration reaches the parting.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import msgspec

from spectui.compare.divergence import BATCHED, DEFECT, IDENTICAL, NEAR_TIE, UNJUDGED, VERDICTS
from spectui.errors import SpectuiError
from spectui.metrics.same_text import common_tokens
from spectui.metrics.stats import nanmedian, nanpercentile

#: the one judge's verdicts (``spectui.compare.divergence``); a reference is what the others are held against
REFERENCE = "reference"
RESULT_NAME = "workload.json"
NAN = float("nan")


class RequestOutcome(msgspec.Struct, kw_only=True):
    index: int
    pass_no: int = 0
    client: int = 0
    recording: str = ""  # relative to the workload's folder
    n_tokens: int = 0
    reason: str = ""  # End.reason
    error: str = ""
    sent_s: float = 0.0  # from the level's start
    queue_ms: float = 0.0
    ttft_ms: float = NAN
    latency_ms: float = NAN  # sent to last token
    decode_tok_s: float = NAN
    drafted: int = -1
    accepted: int = -1
    #: against the reference (AR at one client): identical / near-tie / batched / defect / unjudged / reference
    exact: str = UNJUDGED
    parted_at: int = -1  # the first output token that differs from the reference (-1: none)
    why: str = ""  # the classification's reason, one line
    #: tokens in common with its AR twin at the same level, and the time to the last of them
    common: int = 0
    common_ms: float = NAN
    #: the output's token ids, and each one's arrival from sending, ms (ITL, common-text times)
    tokens: list[int] = msgspec.field(default_factory=list)
    token_ms: list[float] = msgspec.field(default_factory=list)


class LevelResult(msgspec.Struct, kw_only=True):
    setting: str
    family: str  # the AR it is compared with: llama-server, embedded, server
    ar: bool
    clients: int = 0
    rate: float = 0.0
    slots: int = 1
    pass_no: int = 0
    requests: list[RequestOutcome] = msgspec.field(default_factory=list)
    wall_s: float = 0.0
    output_tok_s: float = NAN  # aggregate: every output token over the level's wall time
    decode_tok_s_p50: float = NAN  # per request
    ttft_ms_p50: float = NAN
    ttft_ms_p95: float = NAN
    itl_ms_p50: float = NAN
    itl_ms_p95: float = NAN
    itl_ms_p99: float = NAN
    queue_ms_p50: float = NAN
    queue_ms_p95: float = NAN
    #: acceptance from the server's /metrics counters' change across the level, else the
    #: requests' own counts; per position where the server counts them
    drafted: int = -1
    accepted: int = -1
    acceptance: float = NAN
    per_position: list[float] = msgspec.field(default_factory=list)
    acceptance_source: str = ""
    server_cpu_s: float = NAN  # the server's processes' CPU time over the level
    server_rss_mib: float = NAN  # their resident memory at the level's end
    client_cpu_s: float = NAN  # this process's CPU time over the level (the load client's cost)
    joules_per_token: float = NAN  # this machine's, over the level, per output token, where a counter exists
    speedup: float = NAN  # against its AR twin at this level, over the same text
    #: share of all cores that processes other than spectui and the server under test held over
    #: the level, and whether that made the machine shared (``metrics.conditions.MachineLoad``):
    #: the level's figures are then that load's, not the machine's
    other_load: float = NAN
    disturbed: bool = False
    same_text: str = ""  # "N of M tokens compared"
    counts: dict[str, int] = msgspec.field(default_factory=dict)
    stopped: str = ""  # why the level ended early ("" = every request ran)


class WorkloadResult(msgspec.Struct, kw_only=True):
    workload: str
    path: str
    n_requests: int
    settings: list[str]
    clients: list[int] = msgspec.field(default_factory=list)
    rates: list[float] = msgspec.field(default_factory=list)
    slots: int = 1
    warmup: int = 0
    passes: int = 1
    sampling: str = "greedy"
    started_at: str = ""
    levels: list[LevelResult] = msgspec.field(default_factory=list)
    #: each family's reference run apart (``WorkloadPlan.reference_apart``): AR at one client on a
    #: server of its own, in no figure, kept so that the folder can be judged again against it
    references: list[LevelResult] = msgspec.field(default_factory=list)
    knees: dict[str, str] = msgspec.field(default_factory=dict)
    complete: bool = False
    stopped: str = ""
    #: this machine's energy counters, or why there are none (levels' joules per token)
    energy: str = ""
    host: str = ""  # the machine that sent the load ("cpu xN", as a recording's header names it)



def fill_stats(level: LevelResult) -> None:
    """The level's figures from its requests (every one that produced a token)."""
    done = [r for r in level.requests if r.n_tokens > 0]
    if level.wall_s > 0:
        level.output_tok_s = sum(r.n_tokens for r in level.requests) / level.wall_s
    level.decode_tok_s_p50 = nanmedian(r.decode_tok_s for r in done)
    ttft = [r.ttft_ms for r in done]
    level.ttft_ms_p50, level.ttft_ms_p95 = nanpercentile(ttft, 50), nanpercentile(ttft, 95)
    itl = [b - a for r in done for a, b in zip(r.token_ms, r.token_ms[1:])]
    level.itl_ms_p50, level.itl_ms_p95, level.itl_ms_p99 = (nanpercentile(itl, q) for q in (50, 95, 99))
    queue = [r.queue_ms for r in done]
    level.queue_ms_p50, level.queue_ms_p95 = nanpercentile(queue, 50), nanpercentile(queue, 95)
    if level.drafted < 0:  # no /metrics: the requests' own counts, where each reported them
        own = [(r.drafted, r.accepted) for r in level.requests if r.drafted >= 0]
        if own and len(own) == len(level.requests):
            level.drafted, level.accepted = sum(d for d, _ in own), sum(a for _, a in own)
            level.acceptance_source = "the requests' own counts (llama-server timings.draft_n)"
    if level.drafted > 0:
        level.acceptance = level.accepted / level.drafted
    count_verdicts(level)


def count_verdicts(level: LevelResult) -> None:
    level.counts = {v: sum(1 for r in level.requests if r.exact == v) for v in VERDICTS}


def time_to(r: RequestOutcome, n: int) -> float:
    """Milliseconds from sending ``r`` to the arrival of its ``n``-th token."""
    return r.token_ms[n - 1] if 0 < n <= len(r.token_ms) else NAN


def pair_speedup(level: LevelResult, twin: LevelResult) -> None:
    """``level``'s speedup over its AR ``twin`` (same level), over the text they share."""
    by_index = {(r.index, r.pass_no): r for r in twin.requests}
    total_ar = total = 0.0
    compared = produced = 0
    for r in level.requests:
        t = by_index.get((r.index, r.pass_no))
        produced += r.n_tokens
        if t is None:
            continue
        n = common_tokens(r.tokens, t.tokens)
        r.common = n
        r.common_ms = time_to(r, n)
        ar_ms = time_to(t, n)
        if n and math.isfinite(r.common_ms) and math.isfinite(ar_ms):
            total, total_ar, compared = total + r.common_ms, total_ar + ar_ms, compared + n
    level.speedup = total_ar / total if total > 0 else NAN
    level.same_text = f"{compared} of {produced} tokens compared (each request up to where it parts from its AR twin)"


def knee_line(setting: str, points: Sequence[tuple[str, float]], *, unit: str = "client") -> str:
    """One line: up to which load the setting pays (speedup >= 1), e.g.
    "ngram-mod pays up to 2 clients here: 1.40x at 1, 1.10x at 2, 0.90x at 4"."""
    known = [(x, s) for x, s in points if math.isfinite(s)]
    if not known:
        return f"{setting}: no speedup measured"
    figures = ", ".join(f"{s:.2f}x at {x}" for x, s in known)
    paying = 0
    for _, s in known:
        if s < 1.0:
            break
        paying += 1
    if paying == len(known):
        return f"{setting} pays at every load measured here: {figures}"
    if paying == 0:
        return f"{setting} does not pay here at any load measured: {figures}"
    last = known[paying - 1][0]
    plural = "s" if unit == "client" and last != "1" else ""
    return f"{setting} pays up to {last} {unit}{plural} here: {figures}"


def to_json(result: WorkloadResult) -> dict[str, object]:
    """The ``--json`` object: one entry per level and setting (token times left out)."""
    levels = []
    for lv in result.levels:
        d = msgspec.to_builtins(lv)
        d["requests"] = {"identical": lv.counts.get(IDENTICAL, 0), "near_tie": lv.counts.get(NEAR_TIE, 0),
                         "batched": lv.counts.get(BATCHED, 0), "defect": lv.counts.get(DEFECT, 0), "unjudged": lv.counts.get(UNJUDGED, 0)}
        d["per_request"] = [{k: v for k, v in msgspec.to_builtins(r).items() if k not in ("tokens", "token_ms")} for r in lv.requests]
        levels.append(_finite(d))
    out = {k: v for k, v in msgspec.to_builtins(result).items() if k != "levels"}
    out["levels"] = levels
    return cast(dict[str, object], _finite(out))


def _finite(obj: object) -> object:
    """NaN has no JSON spelling: null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def load_result(folder: str | os.PathLike[str]) -> WorkloadResult:
    path = Path(folder) / RESULT_NAME if Path(folder).is_dir() else Path(folder)
    try:
        doc = msgspec.json.decode(path.read_bytes())
        return msgspec.convert(_nan_for_null(doc, WorkloadResult), WorkloadResult)
    except OSError as exc:
        raise SpectuiError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise SpectuiError(f"{path}: not a workload result ({exc})") from None


def _nan_for_null(doc: Any, kind: type) -> Any:
    """JSON has no NaN (msgspec writes a missing figure as null): null again as NaN, where the
    field is a float, in the result and the levels and requests inside it."""
    if not isinstance(doc, dict):
        return doc
    nested = {"levels": LevelResult, "references": LevelResult, "requests": RequestOutcome}
    out = dict(doc)
    for f in msgspec.structs.fields(kind):
        value = out.get(f.encode_name)
        if value is None and f.type is float and f.encode_name in out:
            out[f.encode_name] = NAN
        elif isinstance(value, list) and f.encode_name in nested:
            out[f.encode_name] = [_nan_for_null(v, nested[f.encode_name]) for v in value]
    return out

