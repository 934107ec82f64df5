"""The per-step rule: how long a draft each step verifies. Every run (``decode``) and every
replay of one (``spectui tune``'s prompt-lookup, suffix and draft-model replays) calls
``propose_step``, so what tune predicts is what a run does.

A free drafter (n-gram, suffix) is asked first, then as much of its proposal is verified as
it is worth (the draft length's ``propose`` prices it, ``loop/length.py``); a K of 0 (no block pays now) holds it back,
and the draft length follows it against what AR produces, so acceptance keeps being measured
at no cost. A draft model is not free: K first, priced with what its drafting costs (an
adaptive 0 probes it now and then, where a draft never wrong would pay), then the model
drafts K tokens. A chain (a lookup with a model behind it) takes the lookup's proposal when
it pays, else the model's when its tokens repay their drafting. A fixed K is K, whatever
the drafter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from spectui.engine.loop.length import LengthContext, LengthPolicy
from spectui.engine.protocol import Chain, Draft, Drafter, is_chain

NO_DRAFT = Draft([])


def propose_step(drafter: Drafter, length: LengthPolicy, history: Sequence[int], room: int,
                 eog: frozenset[int] = frozenset(),
                 on_failure: Callable[[Exception], object] | None = None) -> tuple[int, Draft]:
    """(K, the draft to verify) for one step with ``room`` tokens left to draft into.
    ``on_failure``: a drafter that raises is handed to it and the step goes on without a draft
    (the fallback policy's way); None: the error goes up."""
    chosen = 0
    try:
        if is_chain(drafter) and length.sees_proposal:
            return _chained(drafter, length, history, room, eog)
        if drafter.free and length.sees_proposal:
            proposal = through_end(drafter.propose(history, min(length.k_max, room)), eog) if room > 0 else NO_DRAFT
            k = length.propose(LengthContext(proposal, room)) if proposal.tokens else 0
            return k, cut(proposal, k)
        chosen = min(length.propose(LengthContext(None, room)), room)
        return chosen, (through_end(drafter.propose(history, chosen), eog) if chosen > 0 else NO_DRAFT)
    except Exception as exc:
        if on_failure is None:
            raise
        on_failure(exc)
        return chosen, NO_DRAFT


def _chained(chain: Chain, length: LengthPolicy, history: Sequence[int], room: int, eog: frozenset[int]) -> tuple[int, Draft]:
    """A drafter chain's step (``drafters.chain.ChainDrafter``): the lookup's proposal when it
    pays, else the draft model's when its tokens repay their drafting, else nothing (the
    lookup's proposal, if any, is followed as a guess)."""
    if room <= 0:
        return 0, NO_DRAFT
    found = through_end(chain.lookup.propose(history, min(length.k_max, room)), eog)
    if found.tokens:
        k = length.propose(LengthContext(found, room))
        if k > 0:
            return k, cut(found, k)
    k = min(length.propose(LengthContext(None, room)), room)
    if k > 0:
        return k, chain.model.propose(history, k)
    return 0, NO_DRAFT


def cut(proposal: Draft, k: int) -> Draft:
    """The first ``k`` tokens of a lookup's proposal (none for 0)."""
    return Draft(proposal.tokens[:k], match=proposal.match, support=proposal.support) if k > 0 else NO_DRAFT


def through_end(proposal: Draft, eog: frozenset[int] | set[int]) -> Draft:
    """A proposal up to its first end-of-generation token, that token kept: generation
    ends there whether the target accepts it or not, so nothing after it can be emitted, and
    verifying it only costs. A copy of the prompt's own text reaches its end (a question
    restated in the answer, then the chat template's end of turn and the next turn's header):
    blocks of 15 priced on the copy's record, all but two of them past the end of the turn.
    Replayed over 24 jittered curves (benchmarks/pricing_replay.py): the embedded model's mean
    1.177 -> 1.187x, the 1.5B's 1.098 -> 1.108x (copy-heavy 1.36 -> 1.43x), no category lower."""
    tokens = proposal.tokens
    for i, tok in enumerate(tokens):
        if tok in eog:
            if i + 1 < len(tokens):
                p, c = proposal.probs, proposal.confidence
                return Draft(tokens[: i + 1], p[: i + 1] if p is not None else None, proposal.forwards,
                             c[: i + 1] if c is not None else None, proposal.match, proposal.support)
            break
    return proposal
