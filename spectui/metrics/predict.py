"""Predicted speedup of speculative decoding from measured acceptance and measured costs.

The model (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative
Decoding"): each of the K drafted tokens of a block is accepted with the same probability
``a``, independently, and a block stops at the first rejection. A block then yields

    E(a, K) = (1 - a^(K+1)) / (1 - a)        (K + 1 when a == 1)

tokens: the accepted prefix plus the target's correction or bonus token. One AR step yields
one token, so

    predicted speedup = E(a, K) / (cost of one block / cost of one AR step)
                      = E(a, K) / ((draft time + verify time) / AR step time)

Every input is measured in the run itself where possible: ``a`` is the run's acceptance
rate, K the mean number of tokens drafted per block (n-gram drafts are often shorter than
the K asked for), the block cost the mean draft + verify time of drafted blocks, and the AR
step time the mean verify time of steps that drafted nothing (every step of an AR run; the
steps of a speculative run where the drafter had no proposal). A speculative run that always
drafted has no AR step; then a baseline AR run's step time is used when the caller has one,
and failing that the verify cost model below.

The break-even acceptance is the ``a`` at which the prediction is exactly 1: below it,
speculation at this cost is slower than AR. E grows monotonically from 1 (a = 0) to K + 1
(a = 1), so it is found by bisection; a block costing no more than one AR step breaks even
at a = 0, and one costing more than K + 1 AR steps never does (NaN).

Pure Python: no numpy, no UI; the dashboard and replay call it on every repaint.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import msgspec

#: Cost of evaluating n tokens in one forward pass, in single-token forwards: measured on
#: SmolLM2-135M Q4_1 on a 2-core CPU (``spectui tune`` measures it per machine). Used only when a run has no step that
#: shows what one AR forward costs; a verify of a K-token draft evaluates K + 1 tokens.
VERIFY_COST_POINTS: tuple[tuple[int, float], ...] = ((1, 1.0), (2, 1.8), (4, 2.8), (8, 4.6), (16, 8.2))
#: what ``VERIFY_COST_POINTS`` is, in the words a run's summary uses when it priced blocks by it
CPU_PRIOR = "the built-in CPU prior (SmolLM2-135M Q4_1, 2 cores)"

_BISECT_STEPS = 60  # 2^-60: far below any acceptance a recording can resolve


def expected_tokens(a: float, k: float) -> float:
    """Expected tokens emitted by one block of ``k`` drafted tokens at acceptance ``a``."""
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"acceptance must be in [0, 1], got {a}")
    if k < 0:
        raise ValueError(f"draft length must be >= 0, got {k}")
    if a == 1.0:
        return k + 1.0
    return (1.0 - a ** (k + 1.0)) / (1.0 - a)


def verify_cost(n_tokens: float) -> float:
    """Cost of evaluating ``n_tokens`` at once, in single-token forwards (the cost model).

    Piecewise linear through ``VERIFY_COST_POINTS``; past the last point it extends the last
    segment's slope (evaluation cost grows about linearly once the batch is compute-bound).
    """
    if n_tokens <= 0:
        raise ValueError(f"n_tokens must be > 0, got {n_tokens}")
    pts = VERIFY_COST_POINTS
    if n_tokens <= pts[0][0]:
        return pts[0][1] * n_tokens / pts[0][0]
    for (n0, c0), (n1, c1) in zip(pts, pts[1:]):
        if n_tokens <= n1:
            return c0 + (c1 - c0) * (n_tokens - n0) / (n1 - n0)
    (n0, c0), (n1, c1) = pts[-2], pts[-1]
    return c1 + (c1 - c0) / (n1 - n0) * (n_tokens - n1)


def predicted_speedup(a: float, k: float, relative_cost: float) -> float:
    """E(a, K) divided by the cost of a block in AR steps."""
    if not relative_cost > 0:
        raise ValueError(f"relative cost must be > 0, got {relative_cost}")
    return expected_tokens(a, k) / relative_cost


def break_even_acceptance(k: float, relative_cost: float) -> float:
    """The acceptance at which ``predicted_speedup(a, k, relative_cost) == 1``.

    0.0 when a block costs no more than one AR step (even a = 0 breaks even); NaN when it
    costs more than the K + 1 tokens a fully accepted block yields (nothing breaks even).
    """
    if not relative_cost > 0:
        raise ValueError(f"relative cost must be > 0, got {relative_cost}")
    if relative_cost <= 1.0:
        return 0.0
    if relative_cost > k + 1.0:
        return math.nan
    lo, hi = 0.0, 1.0  # E(lo) < cost <= E(hi), E increasing in a
    for _ in range(_BISECT_STEPS):
        mid = (lo + hi) / 2
        if expected_tokens(mid, k) < relative_cost:
            lo = mid
        else:
            hi = mid
    return hi


class Prediction(msgspec.Struct, kw_only=True, frozen=True):
    """What the measured acceptance and costs predict, and from what."""

    acceptance: float
    k: float  # mean tokens drafted per block
    expected_tokens: float  # E(a, K) per block
    block_us: float  # mean draft + verify time of a drafted block
    ar_step_us: float
    #: where ``ar_step_us`` came from: "run" (steps with no draft in this run), "baseline"
    #: (an AR run the caller supplied) or "model" (verify time / ``verify_cost(K + 1)``)
    ar_step_source: str
    relative_cost: float  # block_us / ar_step_us
    speedup: float
    break_even: float  # acceptance at which speedup == 1 (NaN: never)


def predict(
    *,
    acceptance: float,
    k: float,
    draft_us: float,
    verify_us: float,
    ar_step_us: float | None = None,
    ar_step_source: str = "run",
) -> Prediction | None:
    """Predict from per-block means (``draft_us``, ``verify_us``) and measured acceptance.

    ``ar_step_us`` None (or not positive) falls back to the verify cost model. Returns None
    when there is nothing to predict from (no drafted block, no measured time).
    """
    if not (k > 0 and 0.0 <= acceptance <= 1.0 and verify_us > 0):
        return None
    if ar_step_us is None or not ar_step_us > 0:
        ar_step_us = verify_us / verify_cost(k + 1.0)
        ar_step_source = "model"
    block_us = max(0.0, draft_us) + verify_us
    relative = block_us / ar_step_us
    return Prediction(
        acceptance=acceptance,
        k=k,
        expected_tokens=expected_tokens(acceptance, k),
        block_us=block_us,
        ar_step_us=ar_step_us,
        ar_step_source=ar_step_source,
        relative_cost=relative,
        speedup=predicted_speedup(acceptance, k, relative),
        break_even=break_even_acceptance(k, relative),
    )


def seeded_cost(seed: Sequence[float] = ()) -> Callable[[int], float]:
    """Cost of ``n`` tokens at once from a measured curve (``seed[n - 1]``; ``spectui tune``'s
    or a run's ``DraftConfig.cost_seed``), past its end extended by the cost model's slope, and
    the cost model (``verify_cost``) itself without one: the prior the cost-aware K starts from."""
    seed = tuple(seed)

    def cost(n: int) -> float:
        if n <= len(seed):
            return seed[max(n, 1) - 1]
        if len(seed) >= 2:
            return seed[-1] + verify_cost(n) - verify_cost(len(seed))
        return verify_cost(n)

    return cost


def best_k(
    acceptance: float,
    cost: Sequence[float] | Callable[[int], float] = (),
    k_min: int = 1,
    k_max: int = 16,
) -> int:
    """The draft length a verify-cost curve says pays best at ``acceptance``: the K in
    ``[k_min, k_max]`` maximising ``expected_tokens(a, K) / cost(K + 1)``, or 0 (AR) when no K
    beats one token per unit of cost. ``cost`` is a callable (n tokens -> one-token
    evaluations) or a measured curve for ``seeded_cost``; empty: the built-in cost model."""
    cost_of = cost if callable(cost) else seeded_cost(cost)
    best, value = 0, 1.0  # an AR step: one token per unit
    for k in range(max(k_min, 1), k_max + 1):
        v = expected_tokens(acceptance, k) / cost_of(k + 1)
        if v > value:
            best, value = k, v
    return best
