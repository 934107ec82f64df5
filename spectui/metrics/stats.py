"""Run statistics from the event stream (never from engine internals).

Definitions (they match the anchors operators know):

* TTFT: session start (the ``Header``) to the first emitted token.
* Prefill: the target's (and a draft model's) evaluation of the prompt.
* Decode tok/s: tokens after the first, over the time since the first. The *steady* rate drops
  the first ``WARMUP_TOKENS`` decode tokens and fits a least-squares line to (time, token
  index); its slope is the rate. Runs too short for that report the plain rate and say so.
* Inter-token latency: gaps between consecutive emitted tokens as a client sees them. Tokens of
  one speculative block arrive together, so their gaps are zero: that is what streaming sees.
* Acceptance rate: accepted / drafted. Mean accepted length: 1 + accepted / blocks with a draft
  (vLLM's definition: tokens a verify step yields). Per-position acceptance: of the blocks that
  drafted at least j tokens, the share that accepted at least j. Rollbacks: blocks with a
  rejected draft token (the caches were truncated).

Below the run statistics, the estimators every multi-run report shares, each defined once: the
median of the runs that have a figure (``nanmedian``), the percentile bootstrap (``bootstrap``,
``percentile_interval``, with ``BOOTSTRAP_RESAMPLES`` and ``BOOTSTRAP_SEED``) and a trend's
least-squares slope with an interval widened for autocorrelation (``fit_slope``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from statistics import NormalDist
from typing import Literal

import msgspec
import numpy as np

from spectui.recording.schema import End, Event, Header, MemorySample, Prefill, Step

WARMUP_TOKENS = 64


class Summary(msgspec.Struct, kw_only=True):
    n_prompt_tokens: int = 0
    #: prompt tokens kept from the KV cache (a conversation's earlier turns), not evaluated
    n_cached_tokens: int = 0
    n_tokens: int = 0
    finish_reason: str = ""
    error: str = ""
    ttft_ms: float = float("nan")
    prefill_ms: float = float("nan")
    prefill_tok_s: float = float("nan")
    decode_tok_s: float = float("nan")
    steady_tok_s: float = float("nan")
    warmup_dropped: bool = False
    itl_p50_ms: float = float("nan")
    itl_p95_ms: float = float("nan")
    itl_p99_ms: float = float("nan")
    drafted: int = 0
    accepted: int = 0
    acceptance_rate: float = float("nan")
    mean_accepted_length: float = float("nan")
    per_position_acceptance: list[float] = msgspec.field(default_factory=list)
    draft_blocks: int = 0
    rollbacks: int = 0
    draft_forwards: int = 0
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    peak_rss_bytes: int = 0
    min_headroom_bytes: int = -1
    swap_delta_bytes: int = 0


def summarize(events: Iterable[Event]) -> Summary:
    s = Summary()
    times: list[int] = []
    drafted_per_block: list[int] = []
    accepted_per_block: list[int] = []
    draft_us = verify_us = 0
    memory: list[MemorySample] = []
    for ev in events:
        if type(ev) is Step:
            times.extend(ev.t_us)
            s.draft_forwards += ev.draft_forwards
            draft_us += ev.draft_us
            verify_us += ev.verify_us
            if ev.drafted:
                drafted_per_block.append(ev.drafted)
                accepted_per_block.append(ev.accepted)
        elif type(ev) is MemorySample:
            memory.append(ev)
        elif type(ev) is Prefill:
            fill_prefill(s, ev)
        elif type(ev) is End:
            s.finish_reason = ev.reason
            s.error = ev.error
        elif type(ev) is Header:
            s.n_prompt_tokens = len(ev.prompt_tokens)

    s.draft_ms = draft_us / 1000
    s.verify_ms = verify_us / 1000
    fill_times(s, times)
    fill_blocks(s, drafted_per_block, accepted_per_block)
    if memory:
        s.peak_rss_bytes = max(m.rss for m in memory)
        s.min_headroom_bytes = min(m.headroom for m in memory)
        s.swap_delta_bytes = memory[-1].swap_used - memory[0].swap_used
    return s


# The pieces of ``summarize`` that ``LiveRun.summary`` shares (it folds the events itself, a
# step at a time): one arithmetic, so the live numbers and a recording's agree to the bit.


def fill_prefill(s: Summary, ev: Prefill) -> None:
    s.prefill_ms = (ev.t_end_us - ev.t_start_us) / 1000
    s.n_prompt_tokens = ev.n_tokens
    s.n_cached_tokens = ev.n_cached
    if ev.t_end_us > ev.t_start_us:  # the rate of the tokens it evaluated
        s.prefill_tok_s = ev.n_evaluated / ((ev.t_end_us - ev.t_start_us) / 1e6)


def fill_times(s: Summary, times_us: list[int]) -> None:
    """TTFT, decode and steady tok/s, ITL percentiles from every token's emission time."""
    s.n_tokens = len(times_us)
    if not times_us:
        return
    t = np.asarray(times_us, dtype=np.float64) / 1e6  # seconds
    s.ttft_ms = float(t[0] * 1000)
    if len(t) > 1:
        span = t[-1] - t[0]
        if span > 0:
            s.decode_tok_s = float((len(t) - 1) / span)
        itl = np.diff(t) * 1000
        s.itl_p50_ms, s.itl_p95_ms, s.itl_p99_ms = (float(v) for v in np.percentile(itl, [50, 95, 99]))
    s.steady_tok_s, s.warmup_dropped = steady_rate(t)


def fill_blocks(s: Summary, drafted_per_block: list[int], accepted_per_block: list[int]) -> None:
    """Acceptance from the blocks that drafted something."""
    if not drafted_per_block:
        return
    d = np.asarray(drafted_per_block)
    a = np.asarray(accepted_per_block)
    s.draft_blocks = len(d)
    s.drafted = int(d.sum())
    s.accepted = int(a.sum())
    s.acceptance_rate = s.accepted / s.drafted
    s.mean_accepted_length = 1.0 + s.accepted / len(d)
    s.rollbacks = int((a < d).sum())
    s.per_position_acceptance = per_position_acceptance(d, a)


def steady_rate(t: np.ndarray, warmup: int = WARMUP_TOKENS) -> tuple[float, bool]:
    """Tokens/s as the slope of token index over time, after dropping warm-up tokens.

    Returns ``(rate, warmup_dropped)``. The first token (which pays for the prefill) is never
    part of decode; with fewer than ``warmup + 16`` decode tokens the warm-up is kept.
    """
    decode_t = t[1:]
    dropped = len(decode_t) >= warmup + 16
    if dropped:
        decode_t = decode_t[warmup:]
    if len(decode_t) < 2 or decode_t[-1] <= decode_t[0]:
        return float("nan"), dropped
    idx = np.arange(len(decode_t), dtype=np.float64)
    slope = np.polyfit(decode_t - decode_t[0], idx, 1)[0]
    return float(slope), dropped


def per_position_acceptance(drafted: np.ndarray, accepted: np.ndarray) -> list[float]:
    """Share of blocks with at least j drafted tokens that accepted at least j, j = 1..max."""
    out = []
    for j in range(1, int(drafted.max()) + 1):
        reached = drafted >= j
        out.append(float((accepted[reached] >= j).mean()))
    return out


# -- estimators across runs and samples ---------------------------------------------------------

#: Every bootstrap interval spectui prints (``spectui diff``'s speedup, a sweep's median speedup):
#: this many resamples from a generator seeded with ``BOOTSTRAP_SEED``, so the same recordings
#: always give the same interval.
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
#: resampled indices are drawn in chunks of at most this many entries: a 10k-step run never
#: needs a 20M-entry index array
_BOOTSTRAP_CHUNK = 1 << 21


def nanmedian(values: Iterable[float]) -> float:
    """The median of the values that are numbers (NaN: a run without that figure); NaN if none."""
    v = [x for x in values if x == x]
    return float(np.median(v)) if v else float("nan")


def nanpercentile(values: Iterable[float], q: float, *, method: Literal["linear", "lower", "higher", "nearest", "midpoint"] = "linear") -> float:
    """numpy's percentile ``q`` (0-100, ``method`` as numpy names it) of the values that are
    numbers; NaN if none."""
    v = [x for x in values if x == x]
    return float(np.percentile(v, q, method=method)) if v else float("nan")


def bootstrap(
    n: int,
    statistic: Callable[[np.ndarray], np.ndarray],
    rng: np.random.Generator,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> np.ndarray:
    """``resamples`` values of ``statistic`` on resamples, with replacement, of ``n`` items.

    ``statistic`` receives a ``(rows, n)`` matrix of item indices, one resample per row, and
    returns one value per row. The indices are drawn from ``rng`` in chunks (rows of at most
    ``2**21`` entries in all), in order, so a caller that draws from the same generator
    afterwards continues one reproducible stream."""
    rows = max(1, _BOOTSTRAP_CHUNK // n)
    out = np.empty(resamples)
    for lo in range(0, resamples, rows):
        idx = rng.integers(0, n, size=(min(rows, resamples - lo), n))
        out[lo : lo + len(idx)] = statistic(idx)
    return out


def percentile_interval(values: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The percentile-bootstrap interval: the central ``confidence`` share of ``values``
    (2.5th to 97.5th percentile at 95%), non-finite values left out; NaN when none is left."""
    v = values[np.isfinite(values)]
    if not len(v):
        return float("nan"), float("nan")
    tail = round(50 * (1 - confidence), 10)  # 2.5, not 2.5000000000000022
    lo, hi = np.percentile(v, [tail, 100 - tail])
    return float(lo), float(hi)


def median_ci(values: Iterable[float], seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the median of the values that are numbers (NaN
    for fewer than two)."""
    v = np.array([x for x in values if x == x], dtype=float)
    if len(v) < 2:
        return float("nan"), float("nan")
    medians = bootstrap(len(v), lambda idx: np.median(v[idx], axis=1), np.random.default_rng(seed))
    return percentile_interval(medians)


def t_quantile_975(df: float) -> float:
    """Student's t 97.5% quantile without scipy: exact for 1 and 2 degrees of freedom, the
    Cornish-Fisher expansion (Abramowitz & Stegun 26.7.5, error < 0.1% from 3 on) above.
    Fractional ``df`` rounds down (the wider interval)."""
    v = math.floor(df)
    if v < 1:
        return math.nan
    if v == 1:
        return math.tan(math.pi * 0.475)
    if v == 2:
        p = 0.975
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = NormalDist().inv_cdf(0.975)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / v + g2 / v**2 + g3 / v**3 + g4 / v**4


def fit_slope(t: Sequence[float], y: Sequence[float]) -> tuple[float, float, float]:
    """Least-squares slope of ``y`` over ``t`` and its 95% interval, widened for lag-1
    autocorrelation of the residuals: ``(slope, low, high)``.

    The residuals' lag-1 autocorrelation r gives an effective sample size n (1 - r) / (1 + r)
    (Santer et al. 2000, J. Geophys. Res. 105, the usual correction for trends in
    autocorrelated series); the standard error and the t quantile use it. NaN where fewer than
    3 points or no spread in ``t``; the interval is NaN when the effective sample size leaves
    no degree of freedom."""
    tt = np.asarray(t, dtype=np.float64)
    yy = np.asarray(y, dtype=np.float64)
    n = len(tt)
    if n < 3:
        return math.nan, math.nan, math.nan
    tc = tt - tt.mean()
    sxx = float(tc @ tc)
    if sxx <= 0:
        return math.nan, math.nan, math.nan
    yc = yy - yy.mean()
    slope = float(tc @ yc) / sxx
    resid = yc - slope * tc  # exactly zero for a flat series: no uncertainty, below
    sse = float(resid @ resid)
    if sse == 0:  # a perfectly straight line (e.g. RSS that never moved): no uncertainty
        return slope, slope, slope
    r1 = float(resid[:-1] @ resid[1:]) / sse
    r1 = min(max(r1, 0.0), 0.999)  # negative autocorrelation would narrow it: keep n
    n_eff = n * (1 - r1) / (1 + r1)
    if n_eff <= 2:
        return slope, math.nan, math.nan
    se = math.sqrt(sse / (n - 2) / sxx) * math.sqrt((n - 2) / (n_eff - 2))
    half = t_quantile_975(n_eff - 2) * se
    return slope, slope - half, slope + half
