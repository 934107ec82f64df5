"""A draft length that learns, during the run, where this text's copies end.

``DraftLength`` prices a lookup's proposal by its class (the match length and how its context
went on before) and a position group, its rates pooled with a static prior. This one keys
what it learns by one thing more, the thing that says most about where a copy ends: how far
the output has been copying along this alignment already (the tokens kept in a row, across
blocks: 0, 1-3, 4-15, 16 or more). A copy that has held for 16 tokens tends to hold on; a match
that has just been found tends to end soon. Per key and per drafted position group (0, 1,
2-3, 4-7, 8+: a long copy's later tokens share their evidence) it counts the blocks that
reached the position and kept it, so ``p(j)`` is the chance token j survives given the ones
before it did (the learned per-position survival of vLLM's adaptive verification, keyed as a
lookup knows its proposal), shrunk towards the same position of its class over every run
length, and that towards the class's static prior (``pricing.STATIC_PRIOR``). K is the prefix
that maximizes expected tokens per unit of the measured verify cost (``pricing.best_prefix``),
each rate priced prudently (``pricing.prudent_rate``: one standard deviation below its
estimate), or 0 where no prefix beats an AR step by ``MARGIN``. Every proposal is followed on
the tokens the target emits, past what was verified: a proposal held back, or cut short,
says at no cost how far it would have survived, so a K that starts short still learns the
later positions that would lengthen it (following the first token only: 51-66% of the lookup
bound on copy-heavy edits; every position: 56-68%).

It implements the draft-length protocol (``loop/length.py``), so a run (``--learned-k``), a
replay and a benchmark use it as they use the others; ``benchmarks/copy_bounds.py`` prices it
beside the defaults and the bound a lookup can reach (``tune.ceiling.lookup_bound``). It is not
the default: on the recorded traces it is as safe (no prompt under 0.99x) and slower on copies
(65-73% of the lookup bound on copy-heavy edits against the defaults' 61-85%; 79-95% on code
edits against 76-95%): the defaults' copy tracking and text-wide odds carry more than the run
length does. The bound knows two things no draft length does: whether a proposal's first token
survives and how many of its tokens do. Told the first, this learner reaches 68-77% of it on
copy-heavy edits; told the second, 70-89%; told both, 98-101%
(benchmarks/results/copy-bounds-2026-12-04.txt). So no refinement of how it learns either
side alone lifts copies to 85% of the bound on every trace set.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from spectui.engine.loop.draft_length import MARGIN, VerifyCost
from spectui.engine.loop.length import Learned, LengthContext, Outcome
from spectui.engine.loop.pricing import MODEL_CLASS, PRUDENCE, STATIC_PRIOR, best_prefix, draft_class, group, prudent_rate
from spectui.recording.schema import DraftDecisions

#: the run lengths a key tells apart: tokens kept in a row along the alignment so far
RUN_EDGES = (1, 4, 16)
#: weight, in observations, of a key's parent (its class at the same position, any run
#: length) and of the parent's own prior (the static one): a key with few blocks of its own
#: is priced by its class, a class with few by what this project measured on its outputs
KEY_WEIGHT, CLASS_WEIGHT = 3.0, 2.0
#: the most a cell of earlier runs (``SurvivalMemory``) weighs, in observations: what the last
#: texts did, outweighed by this text's own positions once it has copied a few blocks' worth
#: (4 kept a short output's run at the static prior: 56-68% of the lookup bound on copy-heavy
#: edits against 59-75% at 32; 64 and 128 read the same as 32 within the replay's chaos)
MEMORY_WEIGHT = 32.0


def run_bucket(kept_in_a_row: int) -> int:
    """0 for no run, then one bucket per ``RUN_EDGES`` step."""
    return sum(kept_in_a_row >= edge for edge in RUN_EDGES)


class _Counts:
    """Blocks that reached each position, and kept it."""

    __slots__ = ("reached", "kept")

    def __init__(self) -> None:
        self.reached: list[float] = []
        self.kept: list[float] = []

    def add(self, j: int, kept: bool) -> None:
        self.add_many(j, float(kept), 1.0)

    def add_many(self, j: int, kept: float, reached: float) -> None:
        while len(self.reached) <= j:
            self.reached.append(0.0)
            self.kept.append(0.0)
        self.reached[j] += reached
        self.kept[j] += kept

    def merge(self, other: _Counts) -> None:
        for j, (kept, reached) in enumerate(zip(other.kept, other.reached)):
            self.add_many(j, kept, reached)

    def at(self, j: int) -> tuple[float, float]:
        return (self.kept[j], self.reached[j]) if j < len(self.reached) else (0.0, 0.0)


@dataclass
class _Followed:
    """A proposal followed on the emitted tokens: its key, its tokens, the next position."""

    key: tuple[int, int]
    tokens: tuple[int, ...]
    at: int = 0


class SurvivalMemory:
    """What earlier runs of a model and drafter learned (each key's and class's counts), for
    the next run to start from; ``LearnedLength.learned`` folds a run's counts in."""

    def __init__(self) -> None:
        self.by_key: defaultdict[tuple[int, int], _Counts] = defaultdict(_Counts)
        self.by_class: defaultdict[int, _Counts] = defaultdict(_Counts)

    def fold(self, by_key: dict[tuple[int, int], _Counts], by_class: dict[int, _Counts]) -> None:
        for key, counts in by_key.items():
            self.by_key[key].merge(counts)
        for cls, counts in by_class.items():
            self.by_class[cls].merge(counts)


def _blend(counts: _Counts, memory: _Counts | None, j: int, prior: float, weight: float) -> tuple[float, float]:
    """(rate, observations behind it) at position ``j``: this run's counts, then up to
    ``MEMORY_WEIGHT`` observations of earlier runs, then ``weight`` of ``prior``."""
    kept, reached = counts.at(j)
    if memory is not None:
        m_kept, m_reached = memory.at(j)
        if m_reached:
            w = min(m_reached, MEMORY_WEIGHT)
            kept, reached = kept + m_kept / m_reached * w, reached + w
    return (kept + weight * prior) / (reached + weight), reached + weight


class LearnedLength:
    """The draft length of the module's docstring, within ``k_min..k_max``; ``seed`` is the
    verify-cost curve it starts from (the run plan's ``Pricing.seed``), timed again as the run
    goes when ``learn_cost``."""

    sees_proposal = True

    def __init__(self, k_min: int = 1, k_max: int = 16, seed: Sequence[float] = (), *, learn_cost: bool = True,
                 memory: SurvivalMemory | None = None, prudence: float = PRUDENCE) -> None:
        self.k_min, self.k_max = k_min, k_max
        self.memory = memory
        self.prudence = prudence
        self.cost = VerifyCost(k_max, seed)
        self.learn_cost = learn_cost
        self._by_key: defaultdict[tuple[int, int], _Counts] = defaultdict(_Counts)
        self._by_class: defaultdict[int, _Counts] = defaultdict(_Counts)
        self._run = 0  # tokens kept in a row along the alignment the output follows
        #: this step's proposal as priced: its key and its tokens (empty: a draft model's K)
        self._pending: tuple[tuple[int, int], tuple[int, ...]] | None = None
        #: proposals being followed on the emitted tokens: key, tokens, the next position
        self._shadows: list[_Followed] = []
        self.decided = DraftDecisions()

    # -- pricing --------------------------------------------------------------------------

    def survival(self, cls: int, run: int, j: int) -> float:
        """The chance a token at position ``j`` of a class ``cls`` proposal survives, given the
        ones before it did, after a run of ``run`` kept tokens: shrunk key -> class -> prior."""
        first, later = STATIC_PRIOR.get(cls, STATIC_PRIOR[0])
        key = (cls, run_bucket(run))
        memory = self.memory
        g = group(j)  # positions 0, 1, 2-3, 4-7, 8+: a long copy's later tokens share their evidence
        parent, _ = _blend(self._by_class[cls], memory.by_class.get(cls) if memory else None, g, first if j == 0 else later,
                           CLASS_WEIGHT)
        rate, n = _blend(self._by_key[key], memory.by_key.get(key) if memory else None, g, parent, KEY_WEIGHT)
        return prudent_rate(rate, n, self.prudence)

    def chances(self, cls: int, n: int) -> list[float]:
        return [self.survival(cls, self._run, j) for j in range(n)]

    # -- the protocol (``loop/length.py``) -----------------------------------------------

    def propose(self, context: LengthContext) -> int:
        proposal = context.proposal
        cls = MODEL_CLASS if proposal is None else draft_class(proposal)
        n = min(self.k_max, context.room, len(proposal.tokens) if proposal is not None else self.k_max)
        if n < self.k_min:
            self._pending = None
            return 0
        length, value, expected = best_prefix(self.chances(cls, n), self.cost, self.k_min)
        k = length if value >= 1.0 + MARGIN else 0
        if proposal is not None:
            self.decided.proposals += 1
            if k == 0:
                self.decided.low_confidence += 1
            elif k < len(proposal.tokens):
                self.decided.tail_cut += 1
                self.decided.tokens_cut += len(proposal.tokens) - k
        if k:
            self.decided.expected_tokens += expected
        tokens = tuple(proposal.tokens[:n]) if proposal is not None else ()
        self._pending = ((cls, run_bucket(self._run)), tokens)
        return k

    def observe(self, outcome: Outcome) -> None:
        if self.learn_cost:
            self.cost.observe(outcome.drafted + 1, outcome.verify_us)
        pending, self._pending = self._pending, None
        if outcome.drafted:
            self.decided.blocks += 1
        if pending is not None and pending[1]:
            self._shadows.append(_Followed(pending[0], pending[1]))
        elif outcome.drafted:  # a draft model's block: nothing to follow past what was verified
            key = pending[0] if pending is not None else (MODEL_CLASS, run_bucket(self._run))
            for j in range(min(outcome.accepted + 1, outcome.drafted)):  # positions past a miss were not reached
                self._learn(key, j, j < outcome.accepted)
            self._run = self._run + outcome.accepted + 1 if outcome.accepted == outcome.drafted else 0
            return
        self._follow(outcome.emitted)

    def _follow(self, emitted: Sequence[int]) -> None:
        """Score every proposal being followed on the tokens the target emitted. Under greedy
        decoding an emitted token is what verification would have kept, and a proposal of fixed
        tokens under sampling matches it with the same chance, so the positions a short block
        (or none) never reached are learned at no cost: a prudent K that starts short would
        otherwise never see the later positions that would lengthen it."""
        alive = []  # one list a step, not one a token: this runs on every step of a run
        for shadow in self._shadows:
            for token in emitted:
                hit = shadow.tokens[shadow.at] == token
                self._learn(shadow.key, shadow.at, hit)
                shadow.at += 1
                if not hit or shadow.at == len(shadow.tokens):
                    break  # missed, or followed to its end
            else:
                alive.append(shadow)
        self._shadows = alive
        # how long the oldest proposal still followed has held: the copy under way
        self._run = self._run + len(emitted) if self._shadows and self._shadows[0].at else 0

    def _learn(self, key: tuple[int, int], j: int, kept: bool) -> None:
        g = group(j)
        self._by_key[key].add(g, kept)
        self._by_class[key[0]].add(g, kept)

    def learned(self) -> Learned:
        """The costs it timed and what it did; its counts go to its ``memory`` (once a run)."""
        if self.memory is not None:
            self.memory.fold(self._by_key, self._by_class)
            self._by_key.clear()
            self._by_class.clear()
        return Learned(self.cost.measured() if self.learn_cost else {}, None, self.decided)

