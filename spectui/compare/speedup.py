"""Decode speedup between two recordings, with a bootstrap interval over decode steps."""

from __future__ import annotations

import msgspec
import numpy as np

from spectui.metrics.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, bootstrap, percentile_interval
from spectui.recording.reader import Recording
from spectui.recording.schema import Step


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
    """``n`` bootstrap rates: each resamples the steps with replacement, rate = sum / sum."""

    def rate(idx: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return tokens[idx].sum(axis=1) / seconds[idx].sum(axis=1)

    return bootstrap(len(tokens), rate, rng, n)


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
        lo, hi = percentile_interval(ratios)
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
