"""A drafter chain: a free lookup (n-gram or suffix) first, a draft model where it has nothing."""

from __future__ import annotations

from collections.abc import Sequence

from spectui.engine.drafters.model import ModelDrafter
from spectui.engine.protocol import Draft, Drafter, DrafterBase


class ChainDrafter(DrafterBase):
    """A free lookup (n-gram or suffix) first, the draft model where the lookup has nothing.

    With a cost-aware K the decode loop chooses per step (``propose.propose_step``): the lookup's
    proposal when its match pays (the draft length's ``propose``), else the model when its tokens repay
    what they cost to draft (asked with no proposal), else an AR step. The model's cache
    follows the history whoever drafted: it evaluates the committed tokens it has not seen
    in one batch at its next proposal. Each step's proposal is either the lookup's (a
    deterministic draft) or the model's (with its probabilities when sampling), chosen from
    the committed history alone, so verification stays exact under greedy and sampling.
    With a fixed K, ``propose`` is that choice without prices: the lookup when it matches.
    """

    free = False
    chained = True

    def __init__(self, lookup: Drafter, model: ModelDrafter) -> None:
        self.lookup = lookup
        self.model = model
        self.name = f"{lookup.name}+{model.name}"

    def reset(self, prompt: Sequence[int]) -> None:
        self.lookup.reset(prompt)
        self.model.reset(prompt)

    def propose(self, history: Sequence[int], k: int) -> Draft:
        found = self.lookup.propose(history, k)
        return found if found.tokens else self.model.propose(history, k)

    def finish(self, history: Sequence[int]) -> None:
        """The run is over: a lookup that learns from outputs (suffix) takes the final tokens."""
        self.lookup.finish(history)

    def close(self) -> None:
        self.lookup.close()
        self.model.close()
