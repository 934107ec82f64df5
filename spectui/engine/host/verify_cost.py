"""Measure what verification and drafting cost on this machine, on the user's own models.

The verify-cost curve: the time to evaluate n tokens at once with every row's logits (what
verifying a draft of n - 1 tokens does), relative to one token, at a given depth of context.
Sizes are timed in an order that rotates every round and each size's median is kept: a
shared machine's bursts land on different sizes in different rounds instead of bending the
curve in one place.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spectui.engine.protocol import Backend
from spectui.metrics.predict import seeded_cost

#: block sizes of the curve: a draft of up to 15 tokens plus the pending one
CURVE_SIZES = tuple(range(1, 17))
#: evaluations of one size in a row per round (the first is dropped)
REPEATS = 3
#: context depth of the long curve (attention over 2k+ tokens shifts what a block costs)
LONG_DEPTH = 2048


@dataclass
class Curve:
    """``relative[n - 1]``: time of n tokens at once / time of one token, at ``depth``."""

    depth: int
    unit_us: float
    relative: tuple[float, ...]

    def cost(self, n: int) -> float:
        """Cost of ``n`` tokens in one evaluation; past the measured sizes it grows as the
        engine's cost-aware K assumes (``metrics.predict.seeded_cost``), so tune's replay and
        a seeded run price a block alike."""
        return seeded_cost(self.relative)(n)


def _fill(tokens: Sequence[int], n: int) -> list[int]:
    """``n`` tokens to evaluate: the sequence repeated (what is evaluated does not change
    what it costs, only how many)."""
    reps = n // max(len(tokens), 1) + 1
    return (list(tokens) * reps)[:n]


def measure_curve(
    backend: Backend,
    context: Sequence[int],
    *,
    depth: int,
    rounds: int = 5,
    sizes: Sequence[int] = CURVE_SIZES,
    progress: Callable[[], None] | None = None,
) -> Curve:
    """The curve at ``depth`` tokens of context (``context`` repeated to reach it)."""
    depth = max(1, min(depth, backend.n_ctx - max(sizes) - 1))
    backend.truncate(0)
    backend.eval(_fill(context, depth), all_logits=False)
    base = backend.n_past
    block = _fill(context, max(sizes))
    times: dict[int, list[float]] = {n: [] for n in sizes}
    order = list(sizes)
    for r in range(rounds + 1):
        rotated = order[r % len(order):] + order[: r % len(order)]
        for n in rotated:
            # a few evaluations of one size in a row, as a decode loop runs them (threads and
            # caches settle per kernel), each with the argmax verification reads its rows by
            for rep in range(REPEATS):
                t = time.perf_counter_ns()
                backend.eval(block[:n], all_logits=True).argmax(axis=1)
                elapsed = time.perf_counter_ns() - t
                backend.truncate(base)
                if r and rep:  # the first round, and the first of each run, warm up
                    times[n].append(elapsed / 1000)
        if progress is not None:
            progress()
    unit = statistics.median(times[1])
    relative = tuple(statistics.median(times[n]) / unit for n in sizes)
    return Curve(depth=base, unit_us=unit, relative=(1.0, *relative[1:]))


#: the sizes a run's own seed is measured at, when none is stored for its thread count (the
#: rest are interpolated): every size up to 9 (where kernels change their batching on a CPU),
#: then a few to K = 16. About 45 one-token costs a round.
SEED_SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 17)
#: rounds of a run's seed (tune measures five): a few seconds for the embedded model on one thread
SEED_ROUNDS = 2


class SeedNotice(UserWarning):
    """A run measures its verify-cost curve first (seconds, once per model and thread count):
    a note, which the CLI prints as one stderr line, not a fault."""


def measure_seed(backend: Backend, context: Sequence[int], n_max: int, *, depth: int = 256) -> dict[int, float]:
    """A verify-cost curve for a run that finds none stored for its thread count, or one that
    stops short of its longest block: block size -> cost, sizes up to ``n_max``
    (``SEED_SIZES`` and ``n_max`` itself). Never a curve measured at another thread count,
    nor the built-in one (two threads): how much a block costs against one token depends on
    how the threads share it."""
    top = max(n_max, 2)
    sizes = tuple(sorted({n for n in SEED_SIZES if n <= top} | {top}))
    warnings.warn("spectui: this run prices its blocks by a verify-cost curve and none is stored for these "
                  "settings up to its longest block: measuring one, once (a few seconds; spectui tune "
                  "measures the whole curve)",
                  SeedNotice, stacklevel=2)
    curve = measure_curve(backend, context, depth=depth, rounds=SEED_ROUNDS, sizes=sizes)
    backend.truncate(0)
    return dict(zip(sizes, curve.relative))


def measure_draft_cost(draft: Backend, context: Sequence[int], target_unit_us: float, *, steps: int = 24) -> float:
    """A draft model's cost per drafted token, in target one-token evaluations: the median
    time of one-token evaluations after ``context`` (how a draft model drafts)."""
    draft.truncate(0)
    draft.eval(list(context), all_logits=False)
    times = []
    for tok in _fill(context, steps):
        t = time.perf_counter_ns()
        draft.eval((tok,), all_logits=False)
        times.append((time.perf_counter_ns() - t) / 1000)
    draft.truncate(0)
    return statistics.median(times[2:]) / target_unit_us
