"""Draft length K: fixed, or chosen every step from what verification costs and what pays.

Speculation is not free where the target is compute-bound: on a 2-core CPU, evaluating n
tokens at once costs about 1 + 0.6 (n - 1) times one token, so a block must land several
accepted tokens to pay for itself; on a GPU the same curve is nearly flat and long drafts pay.
The adaptive K therefore measures both sides in the run itself:

* ``VerifyCost`` learns the cost of a block of n tokens from the loop's own verify timings
  (a moving average per block size; a one-token AR step is the unit); for sizes not seen yet
  it extends the nearest measured size by the project's cost model
  (``spectui.metrics.predict.verify_cost``);
* the acceptance rate per drafted position is a short moving average over recent blocks
  (every position tried counts once, the first rejected one as a failure), so it follows the
  bursts of copy-heavy text;
* each step takes the K that maximises expected tokens per unit of cost,
  ``expected_tokens(a, K) / cost(K + 1)`` (the same model as the predicted speedup); when no
  K beats one AR token per unit, it drafts nothing (K = 0).

While it drafts nothing, a free drafter (n-gram lookup) is still asked what it would have
proposed, and that guess is scored against the token AR produced: acceptance keeps being
measured at no cost, so speculation resumes as soon as the text turns copyable again. A draft
model is not free: it is probed with a short draft (``k_min`` tokens) after a run of AR steps instead, the run
doubling while probes fail.
"""

from __future__ import annotations

import math

from spectui.config import DraftConfig
from spectui.metrics.predict import expected_tokens, verify_cost

#: weight of the newest timing of a block size (moving average)
COST_EMA = 0.25
#: weight kept by past acceptance evidence per block (0.6: about the last 2-3 blocks)
ACCEPT_DECAY = 0.6
#: prior acceptance, worth this many tried positions, before the run has any
PRIOR_ACCEPT, PRIOR_WEIGHT = 0.5, 2.0
#: AR steps before a draft model is probed with one token, and the cap of its doubling
PROBE_AFTER, PROBE_MAX = 8, 128


class VerifyCost:
    """Cost of verifying ``n`` tokens in one evaluation, in one-token evaluations."""

    def __init__(self, n_max: int) -> None:
        self._us = [math.nan] * (n_max + 2)  # moving-average time by block size

    def observe(self, n: int, us: float) -> None:
        if 0 < n < len(self._us) and us > 0:
            old = self._us[n]
            self._us[n] = us if math.isnan(old) else old + COST_EMA * (us - old)

    def __call__(self, n: int) -> float:
        unit = self._us[1]
        if n <= 1:
            return 1.0
        if math.isnan(unit):  # nothing measured yet
            return verify_cost(n)
        own = self._us[n] if n < len(self._us) else math.nan
        if not math.isnan(own):
            return own / unit
        # the nearest measured size below, extended as the cost model grows from there
        below = next(m for m in range(min(n, len(self._us)) - 1, 0, -1) if not math.isnan(self._us[m]))
        return self._us[below] / unit + verify_cost(n) - verify_cost(below)


class DraftLength:
    """The K of the next step: ``config.k`` when fixed; cost-aware when ``config.adaptive``,
    within ``[k_min, k_max]`` or 0 (no draft this step)."""

    def __init__(self, config: DraftConfig) -> None:
        self.adaptive = config.adaptive
        self.k = config.k
        self.k_min = config.k_min if config.adaptive else config.k
        self.k_max = config.k_max if config.adaptive else config.k
        self.cost = VerifyCost(self.k_max)
        self._tried = PRIOR_WEIGHT
        self._accepted = PRIOR_ACCEPT * PRIOR_WEIGHT
        self._idle = 0  # AR steps since the last draft (draft model only)
        self._probe_after = PROBE_AFTER
        if self.adaptive:  # the first block too is sized by what the prior says pays
            self.k = self._choose()

    @property
    def acceptance(self) -> float:
        """Current estimate of the chance that a drafted position is accepted."""
        return self._accepted / self._tried

    def update(self, asked: int, drafted: int, accepted: int, verify_us: float = math.nan) -> None:
        """After a step that asked for ``asked`` tokens, got ``drafted`` and kept ``accepted``;
        ``verify_us`` is what the step's evaluation took (``drafted + 1`` tokens)."""
        if not self.adaptive:
            return
        self.cost.observe(drafted + 1, verify_us)
        if drafted:
            self._observe(accepted, min(accepted + 1, drafted))
            if self.k == 0:  # that was a probe: back off while probes fail
                self._probe_after = PROBE_AFTER if accepted else min(2 * self._probe_after, PROBE_MAX)
            self._idle = 0
        elif asked == 0:
            self._idle += 1
        self.k = self._choose()

    def shadow(self, hit: bool) -> None:
        """A free drafter's guess at the token an AR step produced: acceptance evidence."""
        if self.adaptive:
            self._observe(int(hit), 1)
            self.k = self._choose()

    def next_k(self) -> int:
        """Tokens to draft this step: K, or ``k_min`` when K is 0 but a draft model has sat
        idle long enough to be probed again."""
        if self.k or not self.adaptive or self._idle < self._probe_after:
            return self.k
        return self.k_min

    def _observe(self, accepted: int, tried: int) -> None:
        self._accepted = ACCEPT_DECAY * self._accepted + accepted
        self._tried = ACCEPT_DECAY * self._tried + tried

    def _choose(self) -> int:
        a = self.acceptance
        best_k, best = 0, 1.0  # an AR step: one token per unit of cost
        for k in range(self.k_min, self.k_max + 1):
            value = expected_tokens(a, k) / self.cost(k + 1)
            if value > best:
                best_k, best = k, value
        return best_k
