"""Which draft length a run's configuration asks for: one place that knows every
implementation of the protocol (``loop/length.py``), so none of them imports another."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from spectui.drafting import CostAware, Fixed, Length, Pricing
from spectui.engine.loop.draft_length import UNPRICED, DraftLength
from spectui.engine.loop.learned_length import LearnedLength
from spectui.engine.loop.length import FixedLength, LengthPolicy


def length_policy(length: Length, pricing: Pricing = UNPRICED,
                  prices: Mapping[str, Sequence[float]] | None = None) -> LengthPolicy:
    """The draft length ``length`` asks for: a fixed K, a cost-aware one (``DraftLength``), or
    one that learns per position how long copies hold (``LearnedLength``)."""
    if isinstance(length, Fixed):
        return FixedLength(length.k)
    if isinstance(length, CostAware) and length.rule == "learned":
        return LearnedLength(length.k_min, length.k_max, pricing.seed, learn_cost=length.learn)
    return DraftLength(length, pricing, prices)
