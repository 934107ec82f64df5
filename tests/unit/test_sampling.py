"""Speculative sampling preserves the target distribution (synthetic distributions).

A tiny stationary "model": every position has the same target distribution p, the draft
proposes from a deliberately different q. Emitted tokens must then be i.i.d. p, whatever q
and K are. Chi-square tests with fixed seeds; the significance level is 1e-3 so a correct
implementation fails once in a thousand seeds, and these seeds are fixed.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from spectui.engine.loop.sampling import draw, verify_greedy, verify_sampled, warp

P = np.array([0.35, 0.25, 0.15, 0.12, 0.08, 0.05])
Q = np.array([0.05, 0.10, 0.40, 0.05, 0.30, 0.10])  # disagrees with P on purpose
ALPHA = 1e-3


def simulate(n_trials: int, k: int, one_hot_draft: int | None, seed: int, n_tokens: int = 3) -> np.ndarray:
    """First ``n_tokens`` emitted per trial, decoding block by block."""
    rng = np.random.Generator(np.random.PCG64(seed))
    draft_rng = np.random.Generator(np.random.PCG64(seed + 12345))
    out = np.empty((n_trials, n_tokens), dtype=np.int64)
    for trial in range(n_trials):
        emitted: list[int] = []
        while len(emitted) < n_tokens:
            if one_hot_draft is None:
                drafts = [draw(Q, draft_rng.random()) for _ in range(k)]
                probs = [Q] * k
            else:
                drafts = [one_hot_draft] * k
                probs = None
            n, nxt = verify_sampled(drafts, lambda i: P, probs, rng)
            emitted.extend(drafts[:n])
            emitted.append(nxt)
        out[trial] = emitted[:n_tokens]
    return out


def chi2_pvalue(samples: np.ndarray, expected_p: np.ndarray) -> float:
    counts = np.bincount(samples, minlength=len(expected_p))
    return float(stats.chisquare(counts, expected_p * len(samples)).pvalue)


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("draft", ["model", "one-hot"])
def test_emitted_tokens_follow_target_distribution(k, draft):
    samples = simulate(6000, k, None if draft == "model" else 2, seed=100 + k)
    for pos in range(samples.shape[1]):
        p = chi2_pvalue(samples[:, pos], P)
        assert p > ALPHA, f"position {pos}: chi-square p-value {p:.2e}"
    # independence: the pair (first, second) follows P x P
    pairs = samples[:, 0] * len(P) + samples[:, 1]
    p = chi2_pvalue(pairs, np.outer(P, P).ravel())
    assert p > ALPHA, f"joint of positions 0,1: chi-square p-value {p:.2e}"


def test_the_test_detects_a_wrong_sampler():
    """Sanity: accepting every draft (a classic bug) is caught by the same statistic."""
    rng = np.random.Generator(np.random.PCG64(7))
    wrong = np.array([draw(Q, rng.random()) for _ in range(6000)])
    assert chi2_pvalue(wrong, P) < ALPHA


def test_warp_temperature_top_k_top_p():
    logits = np.log(np.array([0.5, 0.2, 0.15, 0.1, 0.05]))
    np.testing.assert_allclose(warp(logits, 1.0), [0.5, 0.2, 0.15, 0.1, 0.05], rtol=1e-9)
    k2 = warp(logits, 1.0, top_k=2)
    np.testing.assert_allclose(k2, [0.5 / 0.7, 0.2 / 0.7, 0, 0, 0], rtol=1e-9)
    p = warp(logits, 1.0, top_p=0.7)  # 0.5 + 0.2 reaches 0.7: two tokens survive
    np.testing.assert_allclose(p, [0.5 / 0.7, 0.2 / 0.7, 0, 0, 0], rtol=1e-9)
    p = warp(logits, 1.0, top_p=0.71)  # the third token crosses 0.71 and is kept
    assert np.count_nonzero(p) == 3
    greedy = warp(logits, 0.0)
    assert greedy.tolist() == [1.0, 0, 0, 0, 0]
    hot = warp(logits, 2.0)
    assert hot[0] < 0.5 and hot[-1] > 0.05


def test_verify_greedy():
    assert verify_greedy([5, 6, 7], [5, 6, 7, 8]) == (3, 8)
    assert verify_greedy([5, 6, 7], [5, 9, 7, 8]) == (1, 9)
    assert verify_greedy([], [4]) == (0, 4)


def test_draw_never_returns_zero_probability_token():
    probs = np.array([0.0, 0.5, 0.0, 0.5, 0.0])
    for u in (0.0, 0.25, 0.5, 0.999999, 1.0 - 1e-16):
        assert probs[draw(probs, u)] > 0
