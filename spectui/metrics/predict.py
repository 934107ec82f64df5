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

This coin model is what ``spectui tune`` predicts with. The dashboard's and the report's
predicted speedup come from the run's own blocks instead (``predict_blocks``, at the end of this
module): blocks are mostly all-or-nothing, which one mean acceptance hides.

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
    or a run's ``Pricing.seed``), past its end extended by the cost model's slope, and
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


# -- from the run's own blocks ------------------------------------------------------------------
#
# The model above treats every drafted position as an independent coin at the run's mean
# acceptance. Real blocks are mostly all-or-nothing (a copy runs to its end, a guess fails at its
# first token), and then the mean hides what pays: 4 blocks of 15 with 58% acceptance are
# E(0.58, 15) = 2.4 tokens each by the coin, but 9.75 each as they landed. So the live
# prediction prices the blocks the run drafted, each by what it yielded (its accepted tokens and
# the target's correction or bonus) against what a block of its size costs on the run's curve,
# and the steps that drafted nothing at one AR step each:
#
#     predicted speedup = tokens / (sum of block costs + AR steps)        (costs in AR steps)
#
# and the best K cap replays the same blocks truncated at each cap (``cap_speedups``).


class Block(msgspec.Struct, frozen=True, array_like=True):
    """One drafted block of a run: what it drafted and yielded, and what it took."""

    drafted: int
    accepted: int
    emitted: int  # tokens it emitted: accepted + 1, fewer when the run stopped inside it
    draft_us: float = 0.0
    verify_us: float = 0.0


class RunCurve(msgspec.Struct, frozen=True, kw_only=True):
    """The verify-cost curve of one run, in AR steps: each block size's mean measured time
    over the AR step time where the run timed that size, the seed curve (``seeded_cost``)
    elsewhere, continued from the nearest measured size below (as the engine's cost-aware K
    reads its own timings, ``engine/loop/draft_length.VerifyCost``)."""

    unit_us: float  # one AR step
    #: where ``unit_us`` came from: "run" (its steps that drafted nothing), "baseline" (an AR
    #: run the caller supplied), or "seed curve" / "cost model" (the blocks' times read against
    #: that curve's shape: the prediction is then the curve's word)
    source: str
    measured: dict[int, float]  # block size (drafted + 1) -> mean cost, in AR steps
    seed: tuple[float, ...] = ()

    def __call__(self, n: int) -> float:
        if n <= 1:
            return 1.0
        if n in self.measured:
            return self.measured[n]
        prior = seeded_cost(self.seed)
        below = max((m for m in self.measured if m < n), default=0)
        return self.measured[below] + prior(n) - prior(below) if below else prior(n)


def run_curve(blocks: Sequence[Block], *, seed: Sequence[float] = (), ar_step_us: float | None = None,
              source: str = "run") -> RunCurve | None:
    """The run's curve from its blocks' verify times, with ``ar_step_us`` as the unit (the
    mean verify time of the run's one-token steps, or a baseline AR run's). Without one, the
    unit is read off the blocks against the seed curve's shape (their median ratio). None when
    no block was timed (a server's run: no verify times)."""
    by_size: dict[int, list[float]] = {}
    for b in blocks:
        if b.drafted and b.verify_us > 0:
            by_size.setdefault(b.drafted + 1, []).append(b.verify_us)
    if not by_size:
        return None
    seed = tuple(seed)
    if ar_step_us is None or not ar_step_us > 0:
        prior = seeded_cost(seed)
        ratios = sorted(us / prior(n) for n, times in by_size.items() for us in times)
        ar_step_us, source = ratios[len(ratios) // 2], "seed curve" if seed else "cost model"
    measured = {n: sum(times) / len(times) / ar_step_us for n, times in sorted(by_size.items())}
    return RunCurve(unit_us=ar_step_us, source=source, measured=measured, seed=seed)


class BlockPrediction(msgspec.Struct, frozen=True, kw_only=True):
    """What the run's own blocks predict (``predict_blocks``); costs in AR steps."""

    speedup: float  # tokens / cost
    tokens: int  # tokens after the first (the ones decode tok/s counts)
    cost: float
    blocks: int
    block_tokens: int  # what the drafted blocks yielded
    block_cost: float  # what they cost
    ar_steps: int  # steps that drafted nothing, one AR step each
    unit_us: float  # one AR step
    source: str  # where the AR step came from (``RunCurve.source``)
    #: tokens beyond their cost that the blocks were expected to yield when drafted, and what
    #: they yielded beyond it: > 0 paid, < 0 cost time
    expected_gain: float
    realized_gain: float
    #: whose expectation: "priced" (the run's own price of each proposal, ``End.decisions``) or
    #: "coin model" (the independent-coin model at the run's acceptance: a live run, an older one)
    expected_source: str
    best_cap: int  # the K cap under which the same blocks pay best; 0: AR (none beats it)
    best_cap_speedup: float
    cap_speedups: dict[int, float]

    @property
    def relative_cost(self) -> float:
        """A drafted block's mean cost, in AR steps."""
        return self.block_cost / self.blocks if self.blocks else math.nan


def _shapes(blocks: Sequence[Block]) -> list[tuple[int, int, int, int, float]]:
    """The blocks grouped by shape: (drafted, accepted, emitted, how many, their drafting time).
    A run has few shapes however long it is, so replaying caps costs the same at any length."""
    shapes: dict[tuple[int, int, int], list[float]] = {}
    for b in blocks:
        entry = shapes.setdefault((b.drafted, b.accepted, b.emitted), [0, 0.0])
        entry[0] += 1
        entry[1] += b.draft_us
    return [(d, a, e, int(n), us) for (d, a, e), (n, us) in shapes.items()]


def cap_speedup(blocks: Sequence[Block], cap: int, curve: Callable[[int], float], unit_us: float,
                ar_tokens: int, ar_cost: float) -> float:
    """The speedup of the same blocks drafted at most ``cap`` tokens each (each truncated at
    ``cap``: it yields min(accepted, cap) + 1 tokens at the price of its shorter block), the
    steps that drafted nothing unchanged. The tokens a truncated block gives up are taken to
    come at the same rate as the rest (the next block would propose them again)."""
    return _cap_speedup(_shapes(blocks), cap, curve, unit_us, ar_tokens, ar_cost)


def _cap_speedup(shapes: Sequence[tuple[int, int, int, int, float]], cap: int, curve: Callable[[int], float],
                 unit_us: float, ar_tokens: int, ar_cost: float) -> float:
    tokens, cost = float(ar_tokens), ar_cost
    for drafted, accepted, emitted, n, draft_us in shapes:
        d = min(drafted, cap)
        tokens += n * min(emitted, min(accepted, cap) + 1)
        cost += n * curve(d + 1) + draft_us / unit_us * d / drafted
    return tokens / cost if cost > 0 else math.nan


def predict_blocks(
    blocks: Sequence[Block],
    *,
    ar_steps: int,
    ar_draft_us: float = 0.0,
    curve: RunCurve,
    caps: Sequence[int] = range(1, 17),
    priced_tokens: float | None = None,
) -> BlockPrediction | None:
    """The prediction from a run's drafted ``blocks`` and its ``ar_steps`` one-token steps
    (``ar_draft_us``: what asking the drafter took on them, which AR itself never pays), every
    cost read on the run's ``curve``; ``priced_tokens``: the tokens the run priced these blocks
    to yield when it drafted them (None: the coin model's expectation stands in). None before
    the first drafted block."""
    blocks = [b for b in blocks if b.drafted]
    if not blocks:
        return None
    # This runs on every repaint of a live run: every size is priced once, and the blocks are
    # replayed by shape (a run has few), so a long run costs what a short one does.
    shapes = _shapes(blocks)
    unit = curve.unit_us
    table = [curve(n) for n in range(max(d for d, *_ in shapes) + 2)]
    price = table.__getitem__
    ar_cost = ar_steps + ar_draft_us / unit
    block_tokens = sum(e * n for _, _, e, n, _ in shapes)
    spent = sum(n * price(d + 1) + us / unit for d, _, _, n, us in shapes)
    drafted = sum(d * n for d, _, _, n, _ in shapes)
    acceptance = sum(a * n for _, a, _, n, _ in shapes) / drafted
    if priced_tokens is not None:
        expected, whose = priced_tokens - spent, "priced"
    else:
        expected, whose = sum(n * expected_tokens(acceptance, d) for d, _, _, n, _ in shapes) - spent, "coin model"
    by_cap = {k: _cap_speedup(shapes, k, price, unit, ar_steps, ar_cost) for k in caps if k > 0}
    best, best_value = 0, 1.0  # AR: one token per step
    for k, v in sorted(by_cap.items()):
        if v > best_value * (1 + 1e-9):  # a tie goes to the shorter cap
            best, best_value = k, v
    tokens = block_tokens + ar_steps
    return BlockPrediction(
        speedup=tokens / (spent + ar_cost), tokens=tokens, cost=spent + ar_cost, blocks=len(blocks),
        block_tokens=block_tokens, block_cost=spent, ar_steps=ar_steps, unit_us=unit, source=curve.source,
        expected_gain=expected, realized_gain=block_tokens - spent, expected_source=whose, best_cap=best, best_cap_speedup=best_value,
        cap_speedups=by_cap,
    )
