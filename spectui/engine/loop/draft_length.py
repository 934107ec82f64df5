"""Draft length K: fixed, or chosen every step from what verification costs and what pays.

Speculation is not free where the target is compute-bound: on a 2-core CPU, evaluating n
tokens at once costs about 1 + 0.6 (n - 1) times one token, so a block must land several
accepted tokens to pay for itself; on a GPU the same curve is nearly flat and long drafts pay.
The adaptive K therefore measures both sides in the run itself:

* ``VerifyCost`` learns the cost of a block of n tokens from the loop's own verify timings
  (a running median per block size; a one-token AR step is the unit); for sizes not seen yet
  it follows the curve the run was seeded with (``spectui tune``'s, or earlier runs'), and
  past that the project's cost model (``spectui.metrics.predict.verify_cost``);
* the acceptance rate per drafted position is a moving average over recent blocks (every
  position tried counts once, the first rejected one as a failure), kept per match length
  of a prompt-lookup draft (a draft found by a 4-gram is worth far more than one found by
  a single token);
* each step takes the K that maximises expected tokens per unit of cost,
  ``expected_tokens(a, K) / cost(K + 1)`` (the same model as the predicted speedup); when no
  K beats one AR token per unit, it drafts nothing (K = 0).

While it drafts nothing, a free drafter (n-gram lookup) is still asked what it would have
proposed, and that guess is scored against the token AR produced: acceptance keeps being
measured at no cost, so speculation resumes as soon as the text turns copyable again. A draft
model is not free: it is probed with a short draft (``k_min`` tokens) after a run of AR steps instead, the run
doubling while probes fail.

A draft model's K (alone or in a drafter chain, ``DraftConfig.chain``) is priced with what
drafting costs too: a block of K model tokens costs the verification of K + 1 and K draft
forwards, each measured in the run against one target token (``model_k``). A draft model that
costs 0.55-0.63 of its target per token (Qwen2.5-Coder 0.5B for the 1.5B on a 2-core CPU) is
repaid only where its acceptance is near perfect and verification batches; pricing verification
alone, the cost-aware K ran that pair at 0.71x AR where AR was there to be had.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

from spectui.config import DraftConfig
from spectui.metrics.predict import best_k, seeded_cost

#: timings kept per block size; a size's own cost is their median once it has ``COST_MIN_SAMPLES``
#: (one preempted step on a shared machine must not make a size look 5x dearer for the run)
COST_WINDOW, COST_MIN_SAMPLES = 9, 3
#: weight kept by past acceptance evidence per block (0.9: about the last 10 blocks of a match
#: length). Chosen by replaying the policy over real greedy outputs (``spectui.tune.replay``):
#: with acceptance kept per match length, a slow, sceptical estimate lost least on prose
#: (0.97x AR on Q4_1 at worst) and gave up little on copies; a fast one (0.6) chased bursts.
ACCEPT_DECAY = 0.9
#: prior acceptance, worth this many tried positions, before the run has any
PRIOR_ACCEPT, PRIOR_WEIGHT = 0.35, 3.0
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

    def observe(self, n: int, us: float) -> None:
        if 0 < n < len(self._us) and us > 0:
            samples = self._samples[n]
            samples.append(us)
            if len(samples) >= COST_MIN_SAMPLES:
                ordered = sorted(samples)
                self._us[n] = ordered[len(ordered) // 2]

    def _unit(self) -> float:
        if not math.isnan(self._us[1]):
            return self._us[1]
        if not self._seed:
            return math.nan
        ratios = sorted(us / self.prior(n) for n, us in enumerate(self._us) if n >= 2 and not math.isnan(us))
        return ratios[len(ratios) // 2] if ratios else math.nan

    def __call__(self, n: int) -> float:
        if n <= 1:
            return 1.0
        unit = self._unit()
        if math.isnan(unit):  # nothing measured yet
            return self.prior(n)
        own = self._us[n] if n < len(self._us) else math.nan
        if not math.isnan(own):
            return own / unit
        # the nearest measured size below, extended as the prior grows from there
        below = next((m for m in range(min(n, len(self._us)) - 1, 0, -1) if not math.isnan(self._us[m])), 0)
        if below == 0:
            return self.prior(n)
        return self._us[below] / unit + self.prior(n) - self.prior(below)

    def measured(self) -> dict[int, float]:
        """The relative costs this run timed itself (block size -> cost), for the cache."""
        unit = self._us[1]
        if math.isnan(unit):
            return {}
        return {n: us / unit for n, us in enumerate(self._us) if n >= 1 and not math.isnan(us)}


class _Acceptance:
    """Chance that a drafted position is accepted: decayed counts from a prior."""

    __slots__ = ("accepted", "tried")

    def __init__(self) -> None:
        self.tried = PRIOR_WEIGHT
        self.accepted = PRIOR_ACCEPT * PRIOR_WEIGHT

    @property
    def rate(self) -> float:
        return self.accepted / self.tried

    def start_from(self, rate: float) -> None:
        """A prior of ``rate`` (with the prior's weight) where that is above the default."""
        self.accepted = max(self.accepted, rate * self.tried)

    def observe(self, accepted: int, tried: int) -> None:
        self.accepted = ACCEPT_DECAY * self.accepted + accepted
        self.tried = ACCEPT_DECAY * self.tried + tried


class DraftLength:
    """The K of the next step: ``config.k`` when fixed; cost-aware when ``config.adaptive``,
    within ``[k_min, k_max]`` or 0 (no draft this step).

    Acceptance is kept per *match*: the length of the n-gram a prompt-lookup draft was
    found by (0 for a draft model, which has one). On this project's prompts a draft found
    by a 4-gram was accepted at 0.6-0.99 per position and one found by a single token at
    0.03-0.17, so one pooled rate would draft too long after weak matches and too short
    after strong ones; per match, K follows what the current proposal is worth.
    """

    def __init__(self, config: DraftConfig) -> None:
        self.adaptive = config.adaptive
        self.k = config.k
        self.k_min = config.k_min if config.adaptive else config.k
        self.k_max = config.k_max if config.adaptive else config.k
        self.cost = VerifyCost(self.k_max, config.cost_seed)
        self.learn_cost = config.learn_cost
        self._by_match: dict[int, _Acceptance] = {}
        self._idle = 0  # AR steps since the last draft (draft model only)
        #: a draft model's forwards: one forward's time, relative to one target token
        self._draft_us: deque[float] = deque(maxlen=COST_WINDOW)
        #: its cost before the run timed it (``Engine.draft_price``), or 0: unknown
        self._draft_cost_prior = config.draft_cost
        self._probe_after = PROBE_AFTER
        if self.adaptive:  # the first block too is sized by what the prior says pays
            self.k = self._choose(0)

    def _rates(self, match: int) -> _Acceptance:
        rates = self._by_match.get(match)
        if rates is None:
            rates = self._by_match[match] = _Acceptance()
            # A longer match is worth at least what a shorter one has earned: a new class
            # starts from the nearest shorter one's rate when that beats the prior. Without
            # it a copy that runs on (the suffix drafter's match grows 4 -> 8 -> 16) fell
            # back to the prior at each new class and stopped drafting mid-quote.
            shorter = [m for m in self._by_match if 0 < m < match]
            if shorter:
                rates.start_from(self._by_match[max(shorter)].rate)
        return rates

    def acceptance(self, match: int = 0) -> float:
        """Current estimate of the chance that a position drafted after ``match`` is accepted."""
        return self._rates(match).rate

    def update(self, asked: int, drafted: int, accepted: int, verify_us: float = math.nan, match: int = 0,
               draft_us: float = math.nan, forwards: int = 0) -> None:
        """After a step that asked for ``asked`` tokens, got ``drafted`` (found by a ``match``)
        and kept ``accepted``; ``verify_us`` is what the step's evaluation took (``drafted + 1``
        tokens), ``draft_us`` what drafting took in ``forwards`` forward passes of a draft model."""
        if not self.adaptive:
            return
        if self.learn_cost:
            self.cost.observe(drafted + 1, verify_us)
            if forwards and draft_us > 0:
                self._draft_us.append(draft_us / forwards)
        if drafted:
            self._rates(match).observe(accepted, min(accepted + 1, drafted))
            if self.k == 0:  # that was a probe: back off while probes fail
                self._probe_after = PROBE_AFTER if accepted else min(2 * self._probe_after, PROBE_MAX)
            self._idle = 0
        elif asked == 0:
            self._idle += 1
        self.k = self._choose(match)

    def shadow(self, hit: bool, match: int = 0) -> None:
        """A free drafter's guess at the token an AR step produced: acceptance evidence."""
        if self.adaptive:
            self._rates(match).observe(int(hit), 1)

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

        self.k = best_k(self.acceptance(0), cost, self.k_min, self.k_max)
        # a probe measures acceptance: pointless where even a draft that is never wrong
        # would not repay its drafting (the model is too dear here, whatever it proposes)
        if self.k == 0 and self._idle >= self._probe_after and best_k(1.0, cost, self.k_min, self.k_max) > 0:
            return self.k_min
        return self.k

    def k_for(self, match: int) -> int:
        """Tokens to verify of a free drafter's proposal found by a ``match``."""
        if not self.adaptive:
            return self.k
        self.k = self._choose(match)
        return self.k

    def _choose(self, match: int) -> int:
        return best_k(self.acceptance(match), self.cost, self.k_min, self.k_max)
