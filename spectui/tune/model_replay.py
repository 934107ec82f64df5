"""A draft model's run replayed at any plan, from one recorded run at a long K.

In a greedy run with a draft model, every emitted token says whether the draft model's own
greedy choice at that position (given the target's prefix) was the target's: an accepted
draft token agreed, a correction disagreed, and a bonus token (after a block the target
kept whole) is not known, counted as agreeing. That per-position agreement decides what any
draft length would have kept, so a plan that chooses K step by step (the cost-aware K, which
``DraftLength`` chooses in the run) can be replayed exactly, token for token, at the costs
tune measured: a block of K costs K draft forwards and one verification of K + 1 tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spectui.drafting import DraftConfig, Pricing
from spectui.engine.loop.length import Outcome
from spectui.engine.loop.length_choice import length_policy
from spectui.engine.loop.propose import propose_step
from spectui.engine.protocol import Draft, DrafterBase


def agreement(blocks: Sequence[tuple[Sequence[float], int, int]]) -> list[bool | None]:
    """Per emitted position after the first token: did the draft agree (None: not known).

    ``blocks`` are tune's (confidences, drafted, accepted) per step of a fixed-K run; a step
    that drafted nothing emitted one AR token, whose agreement is not known either."""
    out: list[bool | None] = []
    for _conf, drafted, accepted in blocks:
        out.extend([True] * accepted)
        out.append(None if accepted == drafted else False)
    return out


class _Agreement(DrafterBase):
    """The recorded draft model, as the per-step rule sees it: a drafter that costs (K is
    chosen before it drafts) and drafts K tokens; which of them the target keeps is the
    agreement sequence's to say."""

    name = "recorded draft model"
    free = False

    def propose(self, history: Sequence[int], k: int) -> Draft:
        return Draft([0] * k)


@dataclass
class Replayed:
    speedup: float
    acceptance: float
    mean_k: float


def replay_model(agree: Sequence[bool | None], cost: Callable[[int], float], draft_cost: float, draft: DraftConfig,
                 seed: Sequence[float] = ()) -> Replayed:
    """The plan of ``draft`` (fixed or cost-aware K, p-min off) over the agreement sequence:
    speedup over AR (one unit per token), acceptance of the drafted tokens, mean K asked.
    ``seed``: the verify-cost curve a cost-aware K starts from (the run plan's ``Pricing.seed``)."""
    # the plan prices drafting at tune's measured cost, as the run prices it at its own
    length = length_policy(draft.learning(False).length, Pricing(seed=tuple(seed), draft_cost=draft_cost))
    j, n = 0, len(agree)
    spent = 0.0
    drafted_total = kept_total = asked_total = steps = 0
    model = _Agreement()
    while j < n:
        k, _ = propose_step(model, length, (), n - j - 1)
        steps += 1
        if k <= 0:
            spent += 1.0
            j += 1
            length.observe(Outcome(0, 0, 0))
            continue
        kept = 0
        while kept < k and agree[j + kept] is not False:
            kept += 1
        spent += draft_cost * k + cost(k + 1)
        drafted_total += k
        kept_total += kept
        asked_total += k
        j += kept + 1
        length.observe(Outcome(k, k, kept))
    speedup = n / spent if spent else math.nan
    return Replayed(speedup, kept_total / drafted_total if drafted_total else math.nan, asked_total / steps if steps else 0.0)

