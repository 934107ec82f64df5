"""Do no harm: a drafter whose proposals are never accepted, though it says they are strong,
drafts on a bounded share of steps once it has been rejected, and the output is AR's.

The drafter is defined here and added through the public registry (``spectui.engine.drafters``),
as a user's would be. It claims the strongest class there is (a long match, agreed every time
before), so where blocks are cheap the cost-aware K gives it its first blocks (where they cost
what they do on a CPU, its prior does not pay and it gets none); after those it must be held back by
its calibration (every proposal, held back or not, is followed on the output) and by the
losing-block backoff, whose probes are short and ever rarer. Costs come from a seed curve with
``learn_cost`` off, so what is drafted does not depend on this machine's timings.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import pytest

from spectui.config import RunConfig
from spectui.drafting import CostAware, DraftConfig, Fixed, Lookup, Pricing
from spectui.engine.drafters import DrafterKind, register, unregister
from spectui.engine.protocol import SUPPORT_AGREED, Draft, DrafterBase, match_bucket
from spectui.recording.schema import End, Step

pytestmark = pytest.mark.slow

PROMPT = "Write three sentences about the sea."
#: the embedded model on a 2-core CPU (Q8_0): blocks pay at high acceptance; a GPU-like flat one,
#: where a block costs little more than a token and only the backoff stops a losing drafter
CURVES = {"cpu": (1.00, 1.68, 2.30, 2.19, 2.80, 2.59, 3.31, 3.11, 3.72), "flat": tuple(1.0 + 0.05 * n for n in range(17))}
#: the share of steps after the first rejection that may still draft
BOUND = 0.15


class AlwaysWrongDrafter(DrafterBase):
    """Proposes special tokens a chat answer never holds (SmolLM2's ids 4-11: file and repo
    markers), with the strongest signals a lookup can give."""

    name = "always-wrong"
    free = True

    def reset(self, prompt: Sequence[int]) -> None:
        pass

    def propose(self, history: Sequence[int], k: int) -> Draft:
        return Draft([4 + (len(history) + i) % 8 for i in range(k)], match=match_bucket(24), support=SUPPORT_AGREED)

    def close(self) -> None:
        pass


@pytest.fixture
def always_wrong():
    register(DrafterKind("always-wrong", "always wrong", lambda sources: AlwaysWrongDrafter(), "never right (a test's)"))
    yield
    unregister("always-wrong")


def _run(engine, config: RunConfig, pricing: Pricing | None = None) -> tuple[list[Step], End]:  # noqa: ANN001
    events = list(engine.run(config, memory_interval_s=None, pricing=pricing))
    return [e for e in events if type(e) is Step], next(e for e in events if type(e) is End)


@pytest.mark.parametrize("curve", sorted(CURVES))
def test_a_drafter_never_right_drafts_a_bounded_share_and_the_output_is_ar(engine, always_wrong, curve):
    base = RunConfig(target=engine.config.target, mode="ar", prompt=PROMPT, max_tokens=80, backend=engine.config.backend)
    ar_steps, _ = _run(engine, base)
    draft = DraftConfig(drafter=Lookup(name="always-wrong", memory=False), length=CostAware(learn=False))
    steps, end = _run(engine, msgspec.structs.replace(base, mode="spec", draft=draft), Pricing(seed=CURVES[curve]))

    assert [t for s in steps for t in s.tokens] == [t for s in ar_steps for t in s.tokens]
    blocks = [i for i, s in enumerate(steps) if s.drafted]
    d = end.decisions  # the recording says what was held back, and why
    assert d is not None and d.proposals == d.blocks + d.low_confidence + d.backoff
    if not blocks:
        # where a block costs what it does on this CPU, the static prior of even the strongest
        # class, priced a deviation down, does not pay: every proposal was held back at once.
        # The backoff after rejections is what the flat curve tests
        assert curve == "cpu", "its claimed strength got it no block on a flat curve: the test tests nothing"
        assert d.blocks == 0 and d.low_confidence == d.proposals > 0
        return
    assert sum(s.accepted for s in steps) == 0
    after = steps[blocks[0] + 1:]
    share = sum(1 for s in after if s.drafted) / len(after)
    assert share <= BOUND, f"drafted on {share:.0%} of the steps after its first rejection"
    assert d.blocks == len(blocks) and d.low_confidence + d.backoff > 0


class PastTheEndDrafter(DrafterBase):
    """Proposes the end of generation and then more: a copy of the prompt that runs through its
    end of turn into the next turn's header."""

    name = "past-the-end"
    free = True

    def __init__(self, eog: int) -> None:
        self.eog = eog

    def reset(self, prompt: Sequence[int]) -> None:
        pass

    def propose(self, history: Sequence[int], k: int) -> Draft:
        return Draft([self.eog, *(4 + i % 8 for i in range(k - 1))], match=match_bucket(24), support=SUPPORT_AGREED)

    def close(self) -> None:
        pass


@pytest.mark.parametrize("adaptive", [False, True])
def test_nothing_past_the_end_of_generation_is_verified(engine, adaptive):
    """Generation ends at an end-of-generation token whether the target accepts it or not, so a
    proposal's tokens past one are cut before it is priced or verified (``propose.through_end``):
    at a fixed K of 6 and at a cost-aware K on a flat curve, no block is longer than one token."""
    eog = min(engine.target.eog_tokens)
    register(DrafterKind("past-the-end", "past the end", lambda sources: PastTheEndDrafter(eog), "a test's"))
    try:
        base = RunConfig(target=engine.config.target, mode="ar", prompt=PROMPT, max_tokens=40, backend=engine.config.backend)
        ar_steps, _ = _run(engine, base)
        draft = (DraftConfig(drafter=Lookup(name="past-the-end", memory=False), length=CostAware(learn=False))
                 if adaptive else DraftConfig(drafter=Lookup(name="past-the-end", memory=False), length=Fixed(k=6)))
        steps, _ = _run(engine, msgspec.structs.replace(base, mode="spec", draft=draft), Pricing(seed=CURVES["flat"]))
    finally:
        unregister("past-the-end")
    assert [t for s in steps for t in s.tokens] == [t for s in ar_steps for t in s.tokens]
    drafted = [s.drafted for s in steps]
    assert max(drafted) == 1, drafted  # drafted, and cut at the end of generation
