"""Decode speedup between two recordings, with a bootstrap interval over decode steps."""

from __future__ import annotations

import msgspec
import numpy as np

from spectui.metrics.same_text import common_tokens
from spectui.metrics.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, bootstrap, percentile_interval
from spectui.recording.output import output_tokens
from spectui.recording.reader import Recording
from spectui.recording.redact import outputs_not_comparable
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
    #: greedy outputs that part are compared over the text they share only: the tokens compared
    #: on each side (0: every token of both), and where they part (-1: they do not)
    compared_tokens: int = 0
    parted_at: int = -1

    @property
    def same_text(self) -> str:
        """What the ratio covers, in words."""
        if self.parted_at < 0:
            return "the same text: the outputs do not part"
        return f"the first {self.compared_tokens} tokens only, where both outputs are the same text (they part at token {self.parted_at})"


def decode_steps(rec: Recording, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
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
    emitted = 0
    for ev in rec.events:
        if type(ev) is not Step or not ev.t_us:
            continue  # a step without tokens: its time folds into the next step's
        times = ev.t_us if limit is None else ev.t_us[: max(limit - emitted, 0)]
        emitted += len(ev.t_us)
        if not times:
            break
        if last is None:
            n, start = len(times) - 1, times[0]
        else:
            n, start = len(times), last
        last = times[-1]
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

    Over the same work: two greedy runs whose outputs part are compared over the tokens they
    share, each up to where they part (``compared_tokens``, ``same_text``); what either wrote
    after that is other work, and a rate over it would compare two texts.

    What it covers: step-to-step variation inside these two runs (stalls, rejections). It
    treats steps as independent, which ignores drift within a run, and it cannot see run-to-run
    variation (a busy machine for one whole run): record several runs and use ``gate`` for that.
    """
    parted = parting(baseline, candidate)
    limit = parted if parted >= 0 else None
    bt, bs = decode_steps(baseline, limit)
    ct, cs = decode_steps(candidate, limit)
    b_rate = float(bt.sum()) / float(bs.sum()) if bs.sum() > 0 else float("nan")
    c_rate = float(ct.sum()) / float(cs.sum()) if cs.sum() > 0 else float("nan")
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
        compared_tokens=parted if parted >= 0 else 0,
        parted_at=parted,
    )


def parting(baseline: Recording, candidate: Recording) -> int:
    """Where two greedy runs' outputs part (the tokens they share), -1 where they do not part,
    either is sampled (sampled outputs differ by design: their rates compare as they are) or
    either is a redacted copy."""
    if not (baseline.header.config.sampling.greedy and candidate.header.config.sampling.greedy):
        return -1
    if outputs_not_comparable(baseline.header, candidate.header):
        return -1  # a redacted copy's stand-ins compare only with copies redacted together
    a, b = output_tokens(baseline.events)[0], output_tokens(candidate.events)[0]
    n = common_tokens(a, b)
    return -1 if n == len(a) == len(b) else n
