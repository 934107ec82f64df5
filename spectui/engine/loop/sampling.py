"""Token choice: greedy argmax, warped sampling, and the speculative acceptance rule.

AR and speculative decoding share this module, so the two differ only in drafting.

Warpers, in order: temperature, top-k, top-p. The same warpers are applied to the target's
distribution ``p`` and to a model drafter's ``q`` (unless the drafter is told to sample on
its own); verification then uses the probabilities the draft was *really* sampled from, which
is what makes speculative sampling exact (Leviathan et al. 2023; Chen et al. 2023):

* accept draft token ``d`` with probability ``min(1, p(d) / q(d))``;
* on rejection sample from ``normalise(max(0, p - q))``;
* after a fully accepted block, sample a bonus token from ``p``.

An n-gram draft is deterministic: ``q`` is one-hot on ``d``, so acceptance is ``p(d)`` and the
residual is ``p`` with ``d`` removed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from spectui.config import SamplingConfig


class Sampler:
    """Warps logits into probabilities and draws from them with one seeded generator."""

    def __init__(self, config: SamplingConfig) -> None:
        self.config = config
        self.rng = np.random.Generator(np.random.PCG64(config.seed))

    @property
    def greedy(self) -> bool:
        return self.config.greedy

    def probs(self, logits: np.ndarray) -> np.ndarray:
        """Warped, normalised float64 probabilities over the whole vocabulary (a new array)."""
        return warp(logits, self.config.temperature, self.config.top_k, self.config.top_p)

    def draw(self, probs: np.ndarray) -> int:
        return draw(probs, self.rng.random())

    def choose(self, logits: np.ndarray) -> int:
        """One token from one row of logits: argmax when greedy, a warped draw otherwise."""
        if self.config.greedy:
            return int(np.argmax(logits))
        return self.draw(self.probs(logits))


def warp(logits: np.ndarray, temperature: float, top_k: int = 0, top_p: float = 1.0) -> np.ndarray:
    """Temperature, then top-k, then top-p; returns dense probabilities (zeros outside)."""
    if temperature <= 0.0:
        out = np.zeros(logits.shape[-1], dtype=np.float64)
        out[int(np.argmax(logits))] = 1.0
        return out
    x = logits.astype(np.float64) / temperature
    n = x.shape[-1]
    if 0 < top_k < n:
        # keep exactly the top_k largest (ties broken by argpartition, deterministically)
        keep = np.argpartition(x, n - top_k)[n - top_k:]
        kept = x[keep]
        probs_kept = np.exp(kept - np.max(kept))
        probs_kept /= probs_kept.sum()
        out = np.zeros(n, dtype=np.float64)
        out[keep] = probs_kept
    else:
        out = np.exp(x - np.max(x))
        out /= out.sum()
        keep = None
    if top_p < 1.0:
        idx = keep if keep is not None else np.flatnonzero(out)
        order = idx[np.argsort(-out[idx], kind="stable")]
        cum = np.cumsum(out[order])
        # smallest prefix whose mass reaches top_p (the token that crosses it is kept)
        cut = int(np.searchsorted(cum, top_p * cum[-1])) + 1
        dropped = order[cut:]
        out[dropped] = 0.0
        out /= out.sum()
    return out


def draw(probs: np.ndarray, u: float) -> int:
    """Inverse-CDF draw from (possibly unnormalised) non-negative weights with uniform ``u``."""
    cum = np.cumsum(probs)
    i = int(np.searchsorted(cum, u * cum[-1], side="right"))
    # guard against u * total landing on the very end through rounding
    i = min(i, len(probs) - 1)
    while probs[i] <= 0.0:
        i -= 1
    return i


def verify_greedy(draft: Sequence[int], target_choice: Sequence[int]) -> tuple[int, int]:
    """Greedy verification. ``target_choice[i]`` is the target's argmax after ``i`` drafts.

    Returns ``(n_accepted, next_token)``: the longest agreeing prefix and then the target's
    own token at the first disagreement, or the bonus token after a full match.
    """
    n = 0
    for d in draft:
        if target_choice[n] != d:
            break
        n += 1
    return n, int(target_choice[n])


def _same_width(q: np.ndarray, width: int) -> np.ndarray:
    """A draft distribution over the target's ids: vocabularies may differ in size by padding
    (``spectui.models.vocab``); ids only the draft has get no target mass, so they are dropped,
    and ids only the target has had no draft mass."""
    if q.shape[0] == width:
        return q
    if q.shape[0] > width:
        return q[:width]
    return np.concatenate([q, np.zeros(width - q.shape[0], dtype=q.dtype)])


def verify_sampled(
    draft: Sequence[int],
    target_probs: Callable[[int], np.ndarray],
    draft_probs: Sequence[np.ndarray] | None,
    rng: np.random.Generator,
) -> tuple[int, int]:
    """Speculative sampling over one block.

    ``target_probs(i)`` gives the warped target distribution after ``i`` drafted tokens
    (computed lazily: rows past the first rejection are never needed). ``draft_probs[i]`` is
    the distribution draft ``i`` was sampled from; ``None`` means a deterministic (one-hot)
    proposal, as from the n-gram drafter.
    """
    for i, d in enumerate(draft):
        p = target_probs(i)
        if draft_probs is None:
            accept_ratio = p[d] if d < p.shape[0] else 0.0
        else:
            q = _same_width(draft_probs[i], p.shape[0])
            if d >= p.shape[0]:  # an id the target does not have
                accept_ratio = 0.0
            else:
                accept_ratio = 1.0 if q[d] <= 0.0 else min(1.0, p[d] / q[d])
        if rng.random() < accept_ratio:
            continue
        if draft_probs is None:
            residual = p.copy()
            if d < p.shape[0]:
                residual[d] = 0.0
        else:
            residual = np.maximum(p - q, 0.0)
        if residual.sum() <= 0.0:  # p == q: rejection has probability zero; stay exact anyway
            residual = p
        return i, draw(residual, rng.random())
    return len(draft), draw(target_probs(len(draft)), rng.random())
