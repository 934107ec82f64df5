"""Draft length K: fixed, or chosen every step from what verification costs and what pays.

Speculation is not free where the target is compute-bound: on a 2-core CPU, evaluating n
tokens at once costs about 1 + 0.6 (n - 1) times one token, so a block must land several
accepted tokens to pay for itself; on a GPU the same curve is nearly flat and long drafts pay.
The adaptive K therefore prices every proposal before it is verified, with both sides measured:

* ``VerifyCost`` learns the cost of a block of n tokens from the loop's own verify timings
  (a running median per block size; a one-token AR step is the unit); for sizes not seen yet
  it follows the curve the run was seeded with (``spectui tune``'s, or earlier runs' at this
  thread count), and past that the project's cost model (``spectui.metrics.predict.verify_cost``);
* what a proposal is worth comes from what its drafter knows about it (``loop/pricing.py``):
  acceptance per proposal class (a lookup's match length and how its context went on before)
  and position in the block, calibrated in the run from what earlier runs of this model and
  drafter left (``engine/host/proposal_prices.py``);
* each proposal is verified up to the prefix that maximises expected tokens per unit of cost,
  and only where that beats one AR token by ``MARGIN``; otherwise it is held back (K = 0).

Every proposal, verified or not, is then compared with the tokens the run emits, so held-back
proposals and cut tails keep calibrating at no cost, and speculation resumes as soon as the
text turns copyable again.

Learn fast, forget slowly: the calibration moves slowly (``pricing.DECAY``), but
``LOSING_RUN`` blocks in a row that did not pay for themselves switch the run to AR at once.
It then waits ``PROBE_EVERY`` tokens and verifies one short block (``PROBE_LENGTH``); while
probes fail the wait doubles (up to ``PROBE_MAX_WAIT``), so a prompt where nothing pays costs
a bounded, shrinking share of its steps. A held-back proposal that the output follows for
``RESUME_RUN`` tokens ends the wait early. ``End.decisions`` counts what was held back and why.

A draft model is not free: its K is chosen before it drafts, priced with its positions'
acceptance and what a drafted token costs (``model_k``: a block of K model tokens costs the
verification of K + 1 and K draft forwards, each measured in the run against one target
token). A draft model that costs 0.55-0.63 of its target per token (Qwen2.5-Coder 0.5B for
the 1.5B on a 2-core CPU) is repaid only where its acceptance is near perfect and verification
batches. Where none pays it is probed with a short draft (``k_min`` tokens) after a run of AR
steps instead, the run doubling while probes fail.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence

import msgspec

from spectui.drafting import CostAware, Length, Pricing, RuntimeDefault
from spectui.engine.loop.length import Learned, LengthContext, Outcome
from spectui.engine.loop.pricing import MODEL_CLASS, Calibration, Tracked, best_prefix, cell, draft_class
from spectui.engine.protocol import SUPPORT_UNKNOWN, Draft, proposal_class
from spectui.errors import SpectuiError
from spectui.metrics.predict import seeded_cost
from spectui.recording.schema import DraftDecisions

#: no measured curve nor draft price: the built-in cost model, an optimistic draft price
UNPRICED = Pricing()
#: timings kept per block size; a size's own cost is their median once it has ``COST_MIN_SAMPLES``
#: (one preempted step on a shared machine must not make a size look 5x dearer for the run)
COST_WINDOW, COST_MIN_SAMPLES = 9, 3
#: a block is drafted only where its expected tokens per unit of cost beat an AR step's one by
#: this much: what a block costs beyond its evaluation (the rollback, reading K + 1 rows) and
#: what the calibration cannot know yet
MARGIN = 0.05
#: lookup blocks in a row that yielded fewer tokens than they cost: the run switches to AR
LOSING_RUN = 3
#: tokens the run then waits before a probe, the probe's length, and the longest wait (it
#: doubles while probes fail)
PROBE_EVERY, PROBE_LENGTH, PROBE_MAX_WAIT = 16, 2, 256
#: tokens in a row of a held-back proposal that the output followed: the backoff ends
RESUME_RUN = 4
#: the weakest proposal class whose block may run past what its later positions' rates pay,
#: priced as if no later position were below an earlier one. Late positions are seen only where
#: blocks reach them, so on a copy under way their few observations, priced prudently, would cap
#: every block: blocks of 2 on copies of 12-16 tokens (Qwen2.5-Coder 1.5B, predicted copy median
#: 1.17x AR, 1.33x lengthened; benchmarks/pricing_replay.py). Below it (a match of 4-7 tokens
#: seen once, or less) the later rates are this text's own word: an answer that restates its
#: question leaves it at a clause's end, and blocks of 8 lengthened from 3 failed after one
#: to four tokens (embedded QA). From class 4 (8+ tokens, 4-7 agreed, a copy's continuation)
#: rather than every class, replayed over 24 jittered curves (benchmarks/pricing_replay.py):
#: embedded QA's worst prompt 0.97 -> 0.99x, code edits 0.994 -> 1.001x (worst 0.95 -> 0.97),
#: translation 1.057 -> 1.080x; the 1.5B's copy-heavy 1.438 -> 1.425x, its mean 1.111 -> 1.108x
LENGTHEN_FROM = 4
#: AR steps before a draft model is probed with one token, and the cap of its doubling
PROBE_AFTER, PROBE_MAX = 8, 128


class VerifyCost:
    """Cost of verifying ``n`` tokens in one evaluation, in one-token evaluations.

    ``seed`` is a measured curve (relative costs for n = 1, 2, ...; ``spectui tune`` or
    earlier runs): the shape to assume until this run measured a size itself. Sizes past
    the seed, or with no seed, follow the project's cost model from the nearest known size.
    A run that always drafts never times a one-token step; its scale then comes from the
    sizes it did time, read against the seed's shape.
    """

    def __init__(self, n_max: int, seed: Sequence[float] = ()) -> None:
        self._samples: list[deque[float]] = [deque(maxlen=COST_WINDOW) for _ in range(n_max + 2)]
        self._us = [math.nan] * (n_max + 2)  # by block size: the median of its recent timings
        self._seed = tuple(seed)
        #: the cost before this run measured a size: the seed, extended by the cost model
        self.prior = seeded_cost(self._seed)
        self._prior_table = [1.0, *(self.prior(n) for n in range(1, n_max + 2))]
        #: the cost of every size up to ``n_max + 1``, built once per change of a size's median:
        #: every proposal reads up to ``n_max`` of them, and an AR step's timing moves the unit
        #: every few steps (built size by size, they were a fifth of a held-back step's cost)
        self._table: list[float] | None = None
        self._below = 0  # the largest size timed when the table was built

    def observe(self, n: int, us: float) -> None:
        if 0 < n < len(self._us) and us > 0:
            samples = self._samples[n]
            samples.append(us)
            if len(samples) >= COST_MIN_SAMPLES:
                ordered = sorted(samples)
                median = ordered[len(ordered) // 2]
                if median != self._us[n]:
                    self._us[n] = median
                    self._table = None

    def _unit(self) -> float:
        if not math.isnan(self._us[1]):
            return self._us[1]
        if not self._seed:
            return math.nan
        ratios = sorted(us / self._prior_table[n] for n, us in enumerate(self._us) if n >= 2 and not math.isnan(us))
        return ratios[len(ratios) // 2] if ratios else math.nan

    def __call__(self, n: int) -> float:
        if n <= 1:
            return 1.0
        table = self.table()
        if n < len(table):
            return table[n]
        # past the sizes kept: the prior's growth from the largest timed one
        return max(self._untimed(self.prior(n), self._unit(), self._below), self(n - 1))

    def _untimed(self, prior_n: float, unit: float, below: int) -> float:
        """The cost of a size not timed: the nearest timed size ``below`` it, extended as the
        prior grows from there; the prior itself where nothing below was timed."""
        if math.isnan(unit) or below == 0:
            return prior_n
        return self._us[below] / unit + prior_n - self._prior_table[below]

    def table(self) -> Sequence[float]:
        """The cost of each size 0..``n_max + 1`` (index = size; 0 and 1 cost one step)."""
        return self._table if self._table is not None else self._build()

    def _build(self) -> list[float]:
        """Every size's cost: its own median over the unit where timed, else the nearest timed
        size below extended as the prior grows from there (the prior itself with none), never
        below a shorter block's: a dip in a curve of a few noisy timings (a block of 6 timed
        cheaper than one of 4) would otherwise draw every block to its size."""
        unit = self._unit()
        prior = self._prior_table
        table = [1.0, 1.0]
        below = 1 if not math.isnan(self._us[1]) else 0  # the largest timed size so far
        for n in range(2, len(self._us)):
            own = self._us[n]
            if not math.isnan(unit) and not math.isnan(own):
                cost, below = own / unit, n
            else:
                cost = self._untimed(prior[n], unit, below)
            table.append(max(cost, table[-1]))
        self._table, self._below = table, below
        return table

    def measured(self) -> dict[int, float]:
        """The relative costs this run timed itself (block size -> cost), for the cache."""
        unit = self._us[1]
        if math.isnan(unit):
            return {}
        return {n: us / unit for n, us in enumerate(self._us) if n >= 1 and not math.isnan(us)}


class _Step:
    """What the draft length decided this step, for ``update`` to learn from."""

    __slots__ = ("drafted", "expected", "probe", "tracked")

    def __init__(self, tracked: Tracked | None, drafted: int, expected: float, probe: bool = False) -> None:
        self.tracked, self.drafted, self.expected, self.probe = tracked, drafted, expected, probe


class DraftLength:
    """The K of the next step, decided here and only here from what was asked (``length``:
    ``Fixed`` is its K; ``CostAware`` chooses within ``[k_min, k_max]`` or 0, no draft this
    step) and what the run's plan measured (``pricing``: the verify-cost curve it starts from,
    a draft model's price).

    A free drafter's proposal is priced as it stands (``k_for``: its class and positions,
    ``pricing.best_prefix``), a draft model's K before it drafts (``model_k``: its positions,
    with its drafting paid for). ``prices`` is the calibration earlier runs of this model and
    drafter left (``pricing.Calibration``'s ``run_counts``, merged); None: the static prior.
    """

    def __init__(self, length: Length, pricing: Pricing = UNPRICED,
                 prices: Mapping[str, Sequence[float]] | None = None) -> None:
        if isinstance(length, RuntimeDefault):  # validate refuses it with any drafter but a runtime's
            raise SpectuiError("a runtime's own draft length is the runtime's: spectui's loop drafts a fixed or a cost-aware K")
        self.adaptive = isinstance(length, CostAware)
        if isinstance(length, CostAware):
            self.k, self.k_min, self.k_max, self.learn_cost = length.k_min, length.k_min, length.k_max, length.learn
        else:
            self.k = self.k_min = self.k_max = length.k
            self.learn_cost = True
        self.cost = VerifyCost(self.k_max, pricing.seed)
        self.calibration = Calibration(prices)
        self._idle = 0  # AR steps since the last draft (draft model only)
        #: a draft model's forwards: one forward's time, relative to one target token
        self._draft_us: deque[float] = deque(maxlen=COST_WINDOW)
        #: its cost before the run timed it (``Engine.draft_price``), or 0: unknown
        self._draft_cost_prior = pricing.draft_cost
        self._probe_after = PROBE_AFTER
        self._step: _Step | None = None  # this step's lookup proposal, priced
        self._model_step: _Step | None = None  # this step's draft-model block, priced
        self._tracked: Tracked | None = None  # an earlier proposal still compared with the output
        #: the backoff after losing blocks: blocks lost in a row, tokens emitted so far, the
        #: token count until which drafting waits (-1: not backing off) and the next wait
        self._losing = 0
        self._tokens = 0
        self._hold_until = -1
        self._wait = PROBE_EVERY
        self.decided = DraftDecisions()
        if self.adaptive:  # the first block too is sized by what the prior says pays
            self.k = self._choose(MODEL_CLASS)

    # -- the protocol (``loop/length.py``) -----------------------------------------------

    @property
    def sees_proposal(self) -> bool:
        return self.adaptive

    def propose(self, context: LengthContext) -> int:
        if context.proposal is None:
            return self.model_k()
        return self.k_for(context.proposal, context.room)

    def observe(self, outcome: Outcome) -> None:
        self.update(*outcome)

    def learned(self) -> Learned:
        # a run priced by its seed alone stores nothing: the same stored numbers give the next
        # such run the same blocks
        stores = self.adaptive and self.learn_cost
        return Learned(self.cost.measured() if stores else {}, self.calibration.run_counts() if stores else None,
                       self.decisions())

    # -- a free drafter's proposal ------------------------------------------------------

    def k_for(self, proposal: Draft | int, limit: int | None = None) -> int:
        """Tokens to verify of a free drafter's ``proposal`` (at most ``limit``): the prefix
        that pays best at its calibrated acceptance, or 0 when none beats an AR step by
        ``MARGIN`` or the backoff holds drafting. A bare match length prices a proposal of
        ``k_max`` tokens found by it (no tokens: nothing to follow afterwards)."""
        if not self.adaptive:
            return self.k
        draft = Draft([], match=proposal) if isinstance(proposal, int) else proposal
        n = min(len(draft.tokens) if draft.tokens else self.k_max, self.k_max, self.k_max if limit is None else limit)
        cls = draft_class(draft)
        tracked = Tracked(draft.tokens[:n], cls) if draft.tokens and n > 0 else None
        if n < self.k_min:  # the budget's last tokens: no block fits, nothing was decided
            self._step = _Step(tracked, 0, 1.0)
            self.k = 0
            return 0
        chances = self.calibration.chances(cls, n)
        cost = self.cost.table().__getitem__  # n <= k_max: every size priced is in the table
        length, value, expected = best_prefix(chances, cost, self.k_min)
        if length and value >= 1.0 + MARGIN and cls >= LENGTHEN_FROM:
            # whether to draft is priced by the rates as measured; how long, for a copy under
            # way, by rates where no later position is below an earlier one (``LENGTHEN_FROM``)
            longer = self.calibration.chances(cls, n, lengthen=True)
            stretched = best_prefix(longer, cost, self.k_min)[0]
            if stretched > length:
                length, chances = stretched, longer
                expected = _expected(longer, length)
        decided = self.decided
        decided.proposals += 1
        probe = False
        if length == 0 or value < 1.0 + MARGIN:
            decided.low_confidence += 1
            length = 0
        elif self._hold_until >= 0 and self._tokens < self._hold_until:
            decided.backoff += 1
            length = 0
        else:
            if length < n:
                decided.tail_cut += 1
                decided.tokens_cut += n - length
            if self._hold_until >= 0:  # the wait is over: one short block
                probe = True
                decided.probes += 1
                length = min(length, PROBE_LENGTH)
                expected = _expected(chances, length)
        self._step = _Step(tracked, length, expected, probe)
        self.k = length
        return length

    def acceptance(self, match: int = 0) -> float:
        """The chance that the first token of a proposal found by a ``match`` is accepted (0: a
        draft model's), as calibrated now."""
        return self.calibration.rates(MODEL_CLASS if match == 0 else proposal_class(match, SUPPORT_UNKNOWN))[0]

    def shadow(self, hit: bool, match: int = 0) -> None:
        """A guess at the token an AR step produced, scored alone (callers that pass the emitted
        tokens to ``update`` need not: every proposal is followed there)."""
        if self.adaptive:
            self.calibration.observe(cell(proposal_class(match, SUPPORT_UNKNOWN), 0), hit)

    # -- learning from a step ------------------------------------------------------------

    def update(self, asked: int, drafted: int, accepted: int, verify_us: float = math.nan, match: int = 0,
               draft_us: float = math.nan, forwards: int = 0, emitted: Sequence[int] = ()) -> None:
        """After a step that asked for ``asked`` tokens, got ``drafted`` (found by a ``match``)
        and kept ``accepted``, emitting ``emitted``; ``verify_us`` is what the step's evaluation
        took (``drafted + 1`` tokens), ``draft_us`` what drafting took in ``forwards`` forward
        passes of a draft model."""
        if not self.adaptive:
            return
        if self.learn_cost:
            self.cost.observe(drafted + 1, verify_us)
            if forwards and draft_us > 0:
                self._draft_us.append(draft_us / forwards)
        step, model_step = self._step, self._model_step
        self._step = self._model_step = None
        self._tokens += len(emitted) if emitted else accepted + 1
        lookup_block = drafted > 0 and step is not None and step.drafted == drafted
        if drafted:
            self.decided.blocks += 1
            planned = step if lookup_block else model_step
            if planned is not None:
                self.decided.expected_tokens += planned.expected
            if self.k == 0 and not lookup_block:  # a draft model's probe: back off while probes fail
                self._probe_after = PROBE_AFTER if accepted else min(2 * self._probe_after, PROBE_MAX)
            self._idle = 0
        elif asked == 0:
            self._idle += 1
        if lookup_block:
            assert step is not None
            self._tracked = None  # the block's own proposal is followed now
            self._follow(step.tracked, drafted, accepted, emitted)
            self._block_outcome(accepted + 1 >= self.cost(drafted + 1), step.probe)
        else:
            if drafted:  # a draft model's block (or a caller that priced nothing): positions by count
                cls = MODEL_CLASS if match == 0 or model_step is not None else proposal_class(match, SUPPORT_UNKNOWN)
                for j in range(min(accepted + 1, drafted)):
                    self.calibration.observe(cell(cls, j), j < accepted)
            guess = step.tracked if step is not None else None
            if self._tracked is not None:
                # one guess at a time is followed past its first token (the next ones are
                # mostly the same copy shifted by a token: counted again, a copy of 16 would
                # weigh 16 times); each new one still has its first token scored
                if guess is not None and emitted:
                    self.calibration.observe(guess.cells[0], guess.tokens[0] == emitted[0])
                self._follow(self._tracked, 0, 0, emitted)
            elif guess is not None:  # held back: followed as a guess
                self._follow(guess, 0, 0, emitted)
            if step is None and model_step is None:  # a caller that priced nothing: K from the counts
                self.k = self._choose(MODEL_CLASS if match == 0 else proposal_class(match, SUPPORT_UNKNOWN))

    def _follow(self, tracked: Tracked | None, drafted: int, accepted: int, emitted: Sequence[int]) -> None:
        """Score a proposal against the step's tokens; keep it while it matches. A verified
        one without ``emitted`` (a caller that passes counts only) is scored by its counts."""
        if tracked is None:
            self._tracked = None
            return
        if drafted and not emitted:
            for j in range(min(accepted + 1, drafted)):
                self.calibration.observe(tracked.cells[j], j < accepted)
            tracked.next = accepted
            is_open = accepted == drafted and tracked.next < len(tracked.tokens)
            self._tracked = tracked if is_open else None
            return
        is_open, run = tracked.follow(emitted, self.calibration)
        self._tracked = tracked if is_open else None
        if not drafted and run >= RESUME_RUN and self._hold_until >= 0:
            # a held-back proposal is being copied: the text turned copyable, stop waiting
            self._hold_until, self._losing = -1, 0

    def _block_outcome(self, won: bool, probe: bool) -> None:
        """A verified lookup block paid for itself (``won``) or not: the backoff's state."""
        if probe:
            if won:
                self._hold_until, self._wait = -1, PROBE_EVERY
            else:
                self._wait = min(2 * self._wait, PROBE_MAX_WAIT)
                self._hold_until = self._tokens + self._wait
        elif won:
            self._losing = 0
        else:
            self._losing += 1
            if self._losing >= LOSING_RUN:
                self._losing = 0
                self._hold_until = self._tokens + self._wait

    def decisions(self) -> DraftDecisions | None:
        """What the run did with its proposals (``End.decisions``); None for a fixed K."""
        return msgspec.structs.replace(self.decided) if self.adaptive else None

    # -- a draft model -------------------------------------------------------------------

    def draft_cost(self) -> float:
        """One draft-model forward in one-token target evaluations: the median of this run's,
        the prior until both sides were timed (0 without one: an optimistic start)."""
        unit = self.cost._unit()
        if len(self._draft_us) < COST_MIN_SAMPLES or math.isnan(unit):
            return self._draft_cost_prior
        return sorted(self._draft_us)[len(self._draft_us) // 2] / unit

    def model_k(self) -> int:
        """Tokens a draft model drafts this step: the K that pays once its drafting is paid
        for too, or a probe (``k_min``) after enough idle steps, or 0."""
        if not self.adaptive:
            return self.k
        per_token = self.draft_cost()

        def cost(n: int) -> float:
            return self.cost(n) + (n - 1) * per_token

        chances = self.calibration.chances(MODEL_CLASS, self.k_max)
        length, value, expected = best_prefix(chances, cost, self.k_min)
        self.k = length if value >= 1.0 + MARGIN else 0
        # a probe measures acceptance: pointless where even a draft that is never wrong
        # would not repay its drafting (the model is too dear here, whatever it proposes)
        if self.k == 0 and self._idle >= self._probe_after and best_prefix([1.0] * self.k_max, cost, self.k_min)[0] > 0:
            self._model_step = _Step(None, self.k_min, _expected(chances, self.k_min))
            return self.k_min
        self._model_step = _Step(None, self.k, expected) if self.k else None
        return self.k

    def _choose(self, cls: int) -> int:
        length, value, _ = best_prefix(self.calibration.chances(cls, self.k_max), self.cost, self.k_min)
        return length if value >= 1.0 + MARGIN else 0


def _expected(chances: Sequence[float], length: int) -> float:
    """Expected tokens of a block of the first ``length`` positions of ``chances``."""
    expected = reach = 1.0
    for q in chances[:length]:
        reach *= q
        expected += reach
    return expected
