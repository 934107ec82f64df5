"""What a proposal is worth before it is verified: acceptance calibrated per signal and position.

Blocks are mostly all-or-nothing: a copy runs to its end or fails at its first token, so one
mean acceptance per run hides what pays (a run at 58% acceptance drafted 4 blocks of mean
accepted length 9.75). What does tell a good proposal from a bad one is what the drafter knows
when it proposes (``protocol.Draft``): a lookup's match length and how its context went on
before (``proposal_class``), a draft model's own position in its draft. So acceptance is kept
per *cell*: a proposal class and a position group in the block (0, 1, 2-3, 4-7, 8+), each the
chance that the token there is accepted *given* every token before it was. A proposal's
expected tokens are then ``1 + sum over i of prod_{j < i} q_j``, and the prefix that pays best
is the one maximising expected tokens per unit of verify cost (``best_prefix``): a strong
match drafts long, a weak one not at all, and a tail whose tokens stop paying is cut.

Each cell's estimate is decayed counts over a prior. The prior is what earlier runs of this
model and drafter measured (``engine/host/proposal_prices.py`` keeps it between runs), else
a static one, and it leans on its neighbours while a cell has no evidence: a later position
on the one before it (conditional acceptance grows along a block: a token that follows
accepted ones is at least as likely accepted as they were, on every class measured), a
stronger class on the weaker one before it (a longer match is worth at least what a shorter
one earned). Without the first, a block never longer than its evidence could never grow.

What is priced is each rate less one standard deviation of its estimate (``prudent``): a rate
from a handful of observations, or carried over from runs on other text, is not bet on as if
measured here, and one whose few observations all hit is not taken as certain (its deviation
is read half an observation towards 1/2: ``prudent_rate``). Replaying the n-gram drafter over
35 greedy outputs of 7 kinds of task, after a calibration learned mostly on copy-heavy tasks,
the posterior means alone drafted blocks of 16 on prose: on a curve where every row costs 0.8
of a token, the median summary and code edit ran at 0.8x AR. Priced prudently, every kind's
median stayed at AR or above (its worst prompt 0.93x) and copies kept most of their gain.

The stored prior is what other texts did, and the first token of a proposal is the whole bet:
a code edit run after translations drafted on their record. So the prior itself is moved by
this text (``Calibration.text_odds``): the first tokens this run's proposals put forward, against
what their cells' prior expected, shift every lookup class's prior by one odds ratio, and a
class the run has not reached yet is priced by what the ones it did reach showed.

Evidence costs nothing to gather: every proposal, verified or held back, is compared with the
tokens the run then emits (``Tracked``), position by position until its first miss, so a held
back proposal and the cut tail of a verified one keep calibrating the cells they would have
used.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from spectui.engine.protocol import COPY_CLASS, TOP_CLASS, Draft, proposal_class

#: the class of a draft model's tokens (lookup classes are 0..TOP_CLASS and COPY_CLASS)
MODEL_CLASS = TOP_CLASS + 1
#: the classes a lookup proposal's first tokens speak for (``Calibration.text_odds``)
LOOKUP_CLASSES = (*range(TOP_CLASS + 1), COPY_CLASS)
#: position groups in a block: 0, 1, 2-3, 4-7, 8+
GROUPS = 5
#: weight kept by a cell's past evidence per new observation: slow, since every step adds one
#: (a block of n reached positions adds up to n), and a sudden change of regime is caught by
#: the losing-block backoff (``DraftLength``) long before the cells catch up
DECAY = 0.95
#: weight of the static prior, in observations; of a stored calibration, at most this many. A
#: draft model's prior weighs one: its evidence comes from its blocks alone, one probe at a time.
#: A stored calibration weighs four, not eight: it is what the last few runs' texts did, and
#: at eight a code edit run after translations drafted blocks of 10-11 at 7-12% acceptance
#: for its whole 46 tokens (0.84x AR); at four its own first proposals, followed for free,
#: outweigh it within a few steps (0.93-1.00x in 3-round checks, 0.91x in a full run: the
#: first proposal's rate is still read from other text, benchmarks/categories.py)
PRIOR_WEIGHT, STORED_WEIGHT, MODEL_PRIOR_WEIGHT = 2.0, 4.0, 1.0
#: static priors per class: (first token, second token); later positions lean on the one
#: before. Sceptical on purpose: holding a good proposal back costs only its gain (and its
#: evidence is gathered anyway), drafting a bad one costs a block. Measured on this project's
#: greedy outputs (SmolLM2-135M, prose and copies): class 1 0.2 / 0.5, class 3 0.75 / 0.8,
#: class 5 0.96 / 0.94. A copy's own continuation: 1.00 in copy edits and summaries, 0.2-0.33 in prose
#: and code (Qwen2.5-Coder 1.5B).
STATIC_PRIOR: dict[int, tuple[float, float]] = {
    0: (0.3, 0.5), 1: (0.15, 0.45), 2: (0.4, 0.55), 3: (0.6, 0.7), 4: (0.75, 0.8), 5: (0.85, 0.88),
    6: (0.9, 0.92), MODEL_CLASS: (0.35, 0.35), COPY_CLASS: (0.6, 0.8),
}
#: observations (half hits, half misses, on both sides) that pull ``text_odds`` towards 1
TEXT_WEIGHT = 4.0
#: standard deviations of its estimate a cell's rate is priced below it (``Calibration.prudent``)
PRUDENCE = 1.0
#: a proposal's chance of reaching a position below this ends its walk: nothing past it pays
_NEGLIGIBLE = 1e-3


def prudent_rate(rate: float, n: float, z: float = PRUDENCE) -> float:
    """``rate``, seen over ``n`` observations, less ``z`` standard deviations of its estimate.
    The deviation is taken at the rate pulled half an observation towards 1/2 (Jeffreys):
    at the rate itself it is nil at 1.0, so a cell whose few observations all hit (a stored
    calibration's cells past position 8 mostly have) was priced as certain, and a block of
    12 on a 3-token match was drafted as if its later tokens could not miss."""
    pulled = (rate * n + 0.5) / (n + 1.0)
    return max(0.0, rate - z * math.sqrt(pulled * (1.0 - pulled) / (n + 1.0)))


def _shift(p: float, odds: float) -> float:
    """``p`` with its odds multiplied by ``odds``."""
    p = min(max(p, 0.001), 0.999)
    o = p / (1.0 - p) * odds
    return o / (1.0 + o)


def group(j: int) -> int:
    """The position group of drafted token ``j`` (0-based)."""
    return min(j.bit_length(), GROUPS - 1)


#: the longest proposal priced (``MAX_DRAFT_LENGTH``); positions past it share the last group
_POSITIONS = 64
_GROUP_OF = tuple(group(j) for j in range(_POSITIONS))
#: the cells of a class's positions, made once: a proposal is priced every step
_CELLS = tuple(tuple(cls * GROUPS + g for g in _GROUP_OF) for cls in range(COPY_CLASS + 1))


def cell(cls: int, j: int) -> int:
    return cls * GROUPS + group(j)


def draft_class(draft: Draft) -> int:
    """The class of a lookup proposal (a draft model's is ``MODEL_CLASS``, chosen by the caller)."""
    return proposal_class(draft.match, draft.support)


class Calibration:
    """Acceptance per cell, learned in the run from a prior (stored or static).

    ``stored`` maps ``"class.group"`` to (accepted, tried) as ``run_counts`` left them."""

    def __init__(self, stored: Mapping[str, Sequence[float]] | None = None) -> None:
        self._seen: dict[int, list[float]] = {}  # cell -> [accepted, tried], decayed
        self._run: dict[int, list[float]] = {}  # cell -> [accepted, tried] this run, as counted
        self._prior: dict[int, tuple[float, float]] = {}  # cell -> (mean, weight) where stored
        for name, counts in (stored or {}).items():
            try:
                cls, grp = (int(x) for x in name.split("."))
                hits, tries = float(counts[0]), float(counts[1])
            except (ValueError, IndexError, TypeError):
                continue  # an entry of another shape: the static prior stands
            if 0 <= cls <= COPY_CLASS and 0 <= grp < GROUPS and tries > 0 and 0 <= hits <= tries:
                self._prior[cls * GROUPS + grp] = (hits / tries, min(tries, STORED_WEIGHT))
        #: what the first tokens of this run's lookup proposals did against what the prior
        #: expected of them: [accepted, expected, tried] (``text_odds``)
        self._surprise = [0.0, 0.0, 0.0]
        self._odds = 1.0  # the ``text_odds`` the cached rates were computed with
        self._prior_mean: dict[int, float] = {}  # cell -> its prior mean, before ``text_odds``
        self._rates: dict[int, list[float]] = {}  # class -> rate per group, until its cells change
        self._prudent: dict[int, list[float]] = {}  # class -> what is priced per group (``prudent``)

    def observe(self, key: int, hit: bool) -> None:
        seen = self._seen.get(key)
        if seen is None:
            seen = self._seen[key] = [0.0, 0.0]
        seen[0] = DECAY * seen[0] + hit
        seen[1] = DECAY * seen[1] + 1.0
        run = self._run.get(key)
        if run is None:
            run = self._run[key] = [0.0, 0.0]
        run[0] += hit
        run[1] += 1.0
        cls = key // GROUPS
        # the stronger lookup classes lean on this one
        stale = range(cls, TOP_CLASS + 1) if 0 < cls <= TOP_CLASS else (cls,)
        if cls != MODEL_CLASS and key % GROUPS == 0:  # a lookup proposal's first token
            expected = self._prior_mean.get(key)
            if expected is None:
                self.rates(cls)
                expected = self._prior_mean[key]
            surprise = self._surprise
            surprise[0] += hit
            surprise[1] += expected
            surprise[2] += 1.0
            odds = self.text_odds()
            if abs(math.log(odds / self._odds)) > 0.02:  # every lookup class's prior moved
                self._odds = odds
                stale = LOOKUP_CLASSES
        for changed in stale:
            self._rates.pop(changed, None)
            self._prudent.pop(changed, None)

    def rates(self, cls: int) -> list[float]:
        """The chance per position group that a token of a ``cls`` proposal is accepted, given
        that the ones before it were."""
        cached = self._rates.get(cls)
        if cached is not None:
            return cached
        weaker = self.rates(cls - 1) if 2 <= cls <= TOP_CLASS else None
        # a stronger class leans on the weaker one's confidence too, not its mean alone:
        # a mean carried over on the prior's two observations would be priced far below
        # the same mean where it was measured
        weaker_prudent = self._prudent[cls - 1] if weaker is not None else None
        rates: list[float] = []
        prudent: list[float] = []
        for grp in range(GROUPS):
            key = cls * GROUPS + grp
            stored = self._prior.get(key)
            if stored is not None:
                mean, weight = stored
            else:
                first, second = STATIC_PRIOR.get(cls, STATIC_PRIOR[0])
                mean = first if grp == 0 else max(second, rates[-1]) if grp == 1 else rates[-1]
                weight = MODEL_PRIOR_WEIGHT if cls == MODEL_CLASS else PRIOR_WEIGHT
            if weaker is not None:
                mean = max(mean, weaker[grp])
            if cls != MODEL_CLASS:
                self._prior_mean[key] = mean
                mean = _shift(mean, self._odds)
            hits, tries = self._seen.get(key, (0.0, 0.0))
            rate = (hits + weight * mean) / (tries + weight)
            rates.append(rate)
            priced = rate if cls == MODEL_CLASS else prudent_rate(rate, tries + weight)
            prudent.append(max(priced, weaker_prudent[grp]) if weaker_prudent is not None else priced)
        self._rates[cls] = rates
        self._prudent[cls] = prudent
        return rates

    def text_odds(self) -> float:
        """How much likelier the first tokens of this run's lookup proposals were accepted than
        the prior expected, as an odds ratio pulled towards 1 by ``TEXT_WEIGHT`` observations
        (first tokens only: a text's misses deep in a block would move every class's first).
        The prior is what other texts did; this text may copy far more (a quote returned with
        one word changed) or far less (a code edit that renames as it goes). Every lookup
        cell's prior is moved by it, so a class this run has not reached yet is priced by what
        the classes it did reach showed of this text, not by the stored runs' texts alone."""
        hits, expected, n = self._surprise
        half = TEXT_WEIGHT / 2
        return ((hits + half) / (n - hits + half)) / ((expected + half) / (n - expected + half))

    def prudent(self, cls: int) -> list[float]:
        """``rates`` less ``PRUDENCE`` standard deviations of each estimate: what is priced. A
        rate known from a handful of observations, or carried over from earlier runs whose
        text may have been nothing like this run's, is not bet on as if it were measured here;
        a long block multiplies its rates, and with them any error in them. A draft model's
        rates are priced as they are: its evidence comes only from the blocks it drafts (no
        proposal is free to follow), so prudence would keep it from ever gathering any."""
        prudent = self._prudent.get(cls)
        if prudent is None:
            self.rates(cls)
            prudent = self._prudent[cls]
        return prudent

    def chances(self, cls: int, n: int, *, lengthen: bool = False) -> list[float]:
        """Per drafted position 0..n-1 of a ``cls`` proposal, the chance it is accepted given
        the positions before it were. ``lengthen``: no later position below an earlier one
        (conditional acceptance grows along a block), for how long a block that pays is."""
        rates = self.prudent(cls)
        if lengthen:
            rates = list(rates)
            for g in range(1, GROUPS):
                rates[g] = max(rates[g], rates[g - 1])
        return [rates[g] for g in _GROUP_OF[:n]] if n <= _POSITIONS else [rates[group(j)] for j in range(n)]

    def run_counts(self) -> dict[str, tuple[float, float]]:
        """This run's observations per cell (``"class.group"``: accepted, tried), for storage."""
        return {f"{key // GROUPS}.{key % GROUPS}": (hits, tries) for key, (hits, tries) in sorted(self._run.items())}


def best_prefix(chances: Sequence[float], cost: Callable[[int], float], k_min: int = 1) -> tuple[int, float, float]:
    """(length, expected tokens per unit of cost, expected tokens) of the prefix of a proposal
    that pays best, where ``chances[j]`` is the chance its token j is accepted given the ones
    before it were and ``cost(n)`` what evaluating n tokens at once costs in one-token steps.
    Length 0 (an AR step: one token per unit) when no prefix of ``k_min`` or more beats it."""
    best = (0, 1.0, 1.0)
    expected = reach = 1.0
    for j, q in enumerate(chances):
        reach *= q
        expected += reach
        n = j + 1
        if n >= k_min:
            value = expected / cost(n + 1)
            if value > best[1]:
                best = (n, value, expected)
        if reach < _NEGLIGIBLE:
            break
    return best


class Tracked:
    """A proposal compared with what the run emits after it, position by position until its
    first miss: the evidence of its cells, whether it was verified, cut or held back."""

    __slots__ = ("cells", "next", "tokens")

    cells: Sequence[int]

    def __init__(self, tokens: Sequence[int], cls: int) -> None:
        self.tokens = list(tokens)
        n = len(self.tokens)
        self.cells = _CELLS[cls][:n] if n <= _POSITIONS and 0 <= cls <= COPY_CLASS else [cell(cls, j) for j in range(n)]
        self.next = 0  # the position the next emitted token is compared with

    def follow(self, emitted: Sequence[int], calibration: Calibration) -> tuple[bool, int]:
        """Score ``emitted`` (the tokens a step emitted, in order) against the positions still
        open; (whether it is still open, how many positions in a row it has matched)."""
        for tok in emitted:
            j = self.next
            if j >= len(self.tokens):
                return False, j
            hit = self.tokens[j] == tok
            calibration.observe(self.cells[j], hit)
            if not hit:
                return False, j
            self.next = j + 1
        return self.next < len(self.tokens), self.next
