"""The search on the tuning half: successive halving, which stops spending on a candidate as
soon as the evidence says it cannot win.

Every candidate first runs a small share of the tuning half (its first requests, or the first
tokens of as many requests as the load has clients, where that is already more than the
share); the best quarter go on to four times the share, and so on up to the whole tuning half,
where the best is the winner. A candidate dropped at a rung has lost to at least three times as
many others on the same requests, each paired with the runtime's AR over the same text on a server
in the same state: at one request's noise it could still be a close second, never the best by a
margin that would change the advice. Each measurement of a rung starts on a fresh server, cold,
and every candidate of a rung is paired with one AR run of its share, so that run's luck moves
them all alike. (Servers that first read the tuning half's other prompts, for what ngram-mod's
pool learns from traffic, cost a third of a screen and changed no ranking beyond the AR run's
own luck: on document-qa at one request a share, a pairing moved 0.85x to 1.44x with the AR it
drew. The last rung runs the whole tuning half in order, so what a method learns from earlier
requests counts there, as the check's warm servers count it.)

Optuna's successive-halving pruner does the same with its own trial bookkeeping; the space
here is a small finite grid and the resource is requests of one workload, so the loop is
this module's (no dependency for forty lines), and it is tested on recorded figures.

The budget is the person's minutes for the whole tune: the search stops starting candidates
when the next one's expected cost (the rung's mean so far, else the rung before's scaled by
the share) would not leave the check its time; the leader so far is then the winner.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from spectui.errors import SpectuiError
from spectui.tune.traffic_space import Candidate

#: keep the best 1/ETA of each rung, give them ETA times the requests. 4, not 3: on mixed-12 the
#: later rungs of 83 settings (28, 10 and 4 candidates) cost as much as the first rung's 83
#: screens and the check together, for a pick whose share of the grid's best moved by less than
#: the host's noise (see ``benchmarks/results/tune-traffic-2026-12-03c.txt``)
ETA = 4
#: at most this many rungs (the first gets ETA**-(RUNGS-1) of the tuning half)
MAX_RUNGS = 4
#: a rung's share of a request's tokens is never below this (a shorter output says little)
MIN_TOKENS = 24
#: what one candidate costs at the least, before anything is measured, to refuse a budget
#: that cannot hold one: a server start, and its requests at a decode speed far past what a
#: CPU gets from the smallest model (a refusal only where the budget is surely too small)
START_S = 1.0
FAST_TOK_S = 400.0


@dataclass(frozen=True)
class Trial:
    """One candidate at one rung: its speedup over AR on the rung's share of the tuning half."""

    rung: int
    candidate: Candidate
    share: float
    speedup: float
    seconds: float
    requests: int = 0
    error: str = ""
    #: a price (``traffic_price``: the drafter replayed over AR's tokens), not a run
    priced: bool = False

    def to_dict(self) -> dict[str, object]:
        return {"rung": self.rung, "candidate": self.candidate.to_dict(), "label": self.candidate.label(), "share": self.share,
                "speedup": self.speedup if math.isfinite(self.speedup) else None, "seconds": self.seconds,
                "requests": self.requests, "error": self.error, "priced": self.priced}

    @classmethod
    def from_dict(cls, d: dict) -> Trial:
        speedup = d.get("speedup")
        return cls(rung=int(d["rung"]), candidate=Candidate.from_dict(d["candidate"]), share=float(d["share"]),
                   speedup=math.nan if speedup is None else float(speedup), seconds=float(d["seconds"]),
                   requests=int(d.get("requests", 0)), error=str(d.get("error", "")), priced=bool(d.get("priced", False)))


@dataclass(frozen=True)
class Status:
    """What the progress line shows: tried, eliminated, leading, the budget left."""

    rung: int
    rungs: int
    tried: int
    eliminated: int
    space: int
    leading: str
    leading_speedup: float
    budget_left_s: float

    def line(self) -> str:
        lead = f"{self.leading} {self.leading_speedup:.2f}x" if self.leading and math.isfinite(self.leading_speedup) else "none yet"
        return (f"rung {self.rung + 1}/{self.rungs} · tried {self.tried}/{self.space} · eliminated {self.eliminated} · "
                f"leading {lead} · budget left {max(self.budget_left_s, 0) / 60:.1f} min")


def shares(n_candidates: int, *, eta: int = ETA, max_rungs: int = MAX_RUNGS) -> list[float]:
    """The share of the tuning half each rung measures, the last 1.0: enough rungs to bring the
    candidates down to one at ``eta`` a rung, at most ``max_rungs``."""
    rungs = 1 if n_candidates <= 1 else min(max_rungs, math.ceil(math.log(n_candidates) / math.log(eta) - 1e-9) + 1)
    return [float(eta) ** -(rungs - 1 - i) for i in range(rungs)]


def survivors(trials: Sequence[Trial], keep: int) -> list[Candidate]:
    """The ``keep`` best of a rung's trials by speedup (a failed or unmeasured one last)."""
    ranked = sorted(trials, key=lambda t: -t.speedup if math.isfinite(t.speedup) else math.inf)
    return [t.candidate for t in ranked[:keep] if math.isfinite(t.speedup)]


#: the race after pricing: this many settings run for real on the whole tuning half, each in
#: ``RACE_ROUNDS`` rounds (the second in the other order), every round paired with its own AR
FINALISTS = 6
RACE_ROUNDS = 2


def next_entrant(prices: dict[Candidate, Callable[[float], float]], beta: float, entered: Sequence[Candidate]) -> Candidate | None:
    """The setting priced best at ``beta`` of those not yet run (None: all have run)."""
    left = [c for c in prices if c not in entered and math.isfinite(prices[c](beta))]
    return max(left, key=lambda c: prices[c](beta), default=None)


def race_winner(trials: Sequence[Trial], price: Callable[[Candidate], float] | None = None) -> Candidate | None:
    """The setting of the race (its measured trials) to check, among those that ran the most
    rounds (one the budget cut short is not held against two-round figures).

    Without ``price``: the best geometric mean speedup over its rounds. With it (the settings'
    prices at the fitted beta): each priced setting scores its price times its method's
    residual, the geometric mean of measured over priced across every run of that method in the
    race. Timing noise then moves a method's settings alike, and its settings are told apart by
    what their drafters do, which holds no noise: two settings of one method a run apart by less
    than the host's spread (ngram-simple size-m 8 and 16 on mixed-12: 1.17x and 1.15x, then
    1.12x and 1.15x) are ranked by their counts (1.13x and 1.06x priced), not by that luck."""
    runs: dict[Candidate, list[float]] = {}
    for t in trials:
        if not t.priced and math.isfinite(t.speedup) and t.speedup > 0:
            runs.setdefault(t.candidate, []).append(t.speedup)
    if not runs:
        return None
    most = max(len(v) for v in runs.values())
    full = {c: v for c, v in runs.items() if len(v) == most}

    def priced(c: Candidate) -> float:
        p = price(c) if price is not None else math.nan
        return p if math.isfinite(p) and p > 0 else math.nan

    residual: dict[str, list[float]] = {}
    for c, v in runs.items():
        if math.isfinite(priced(c)):
            residual.setdefault(c.method, []).extend(math.log(x / priced(c)) for x in v)

    def score(c: Candidate) -> float:
        if math.isfinite(priced(c)):
            return math.log(priced(c)) + sum(residual[c.method]) / len(residual[c.method])
        return sum(math.log(x) for x in full[c]) / len(full[c])

    return max(full, key=score)


def check_runs(n_defaults: int) -> int:
    """The check's runs over the check half: AR, the winner and each default, twice each."""
    return 2 * (2 + n_defaults)


def min_budget_s(tuning_tokens: int, check_tokens: int, n_defaults: int) -> float:
    """The least a tune can take: AR and one candidate on the tuning half, then the check's runs
    (``check_runs``), at ``FAST_TOK_S`` with a server start each."""
    checks = check_runs(n_defaults)
    return (2 * tuning_tokens + checks * check_tokens) / FAST_TOK_S + (2 + checks) * START_S


def check_budget(budget_s: float, least_s: float) -> None:
    if budget_s < least_s:
        raise SpectuiError(f"--budget {budget_s / 60:g} minutes is too small for one candidate: this workload needs at least"
                           f" {math.ceil(least_s)} s (AR and one setting on the tuning half, then the check half)")


@dataclass
class Search:
    """Successive halving of ``candidates``: ``measure(candidate, share)`` runs one and returns
    its ``Trial`` (rung unset); ``reserve_s`` is what the check after it needs."""

    candidates: list[Candidate]
    budget_s: float
    reserve_s: float = 0.0
    eta: int = ETA
    max_rungs: int = MAX_RUNGS
    clock: Callable[[], float] = time.monotonic
    trials: list[Trial] = field(default_factory=list)
    stopped: str = ""  # why the search ended before its last rung ("" = it ran them all)
    #: the candidates still in the race (every one before the first rung ends)
    alive: list[Candidate] = field(default_factory=list)

    def run(self, measure: Callable[[Candidate, int, float], Trial], *, progress: Callable[[Status], object] = lambda _: None,
            stop: Callable[[], bool] = lambda: False) -> Candidate | None:
        started = self.clock()
        plan = shares(len(self.candidates), eta=self.eta, max_rungs=self.max_rungs)
        self.alive = list(self.candidates)
        for rung, share in enumerate(plan):
            done: list[Trial] = []
            for c in list(self.alive):
                left = self.budget_s - (self.clock() - started) - self.reserve_s
                if stop():
                    self.stopped = "stopped: what was measured is kept"
                elif self._expected(rung, share, done) > left:
                    self.stopped = f"the budget ran out at rung {rung + 1} of {len(plan)}"
                if self.stopped:
                    break
                progress(self.status(rung, len(plan), left))
                trial = measure(c, rung, share)
                done.append(trial)
                self.trials.append(trial)
            if self.stopped:
                break
            keep = 1 if rung == len(plan) - 1 else max(1, math.ceil(len(self.alive) / self.eta))
            self.alive = survivors(done, keep) or self.alive[:keep]
        reached = max((t.rung for t in self.trials), default=0)
        progress(self.status(reached, len(plan), self.budget_s - (self.clock() - started) - self.reserve_s))
        return self.winner()

    def _expected(self, rung: int, share: float, done: Sequence[Trial]) -> float:
        if done:
            return sum(t.seconds for t in done) / len(done)
        before = [t for t in self.trials if t.rung == rung - 1]
        if before:
            return sum(t.seconds for t in before) / len(before) * share / before[0].share
        return 0.0  # nothing measured yet: the first candidate always runs (the budget was checked up front)

    def winner(self) -> Candidate | None:
        """The best at the highest rung measured (the leader so far, when the search stopped early)."""
        if not self.trials:
            return None
        top = max(t.rung for t in self.trials if math.isfinite(t.speedup)) if any(math.isfinite(t.speedup) for t in self.trials) else None
        if top is None:
            return None
        best = survivors([t for t in self.trials if t.rung == top], 1)
        return best[0] if best else None

    def status(self, rung: int, rungs: int, left_s: float) -> Status:
        """While rung ``rung`` runs: a candidate tried and no longer in the race is out (one that
        went through and waits for its turn at this rung is not)."""
        tried = {t.candidate for t in self.trials}
        reached = max((t.rung for t in self.trials), default=0)
        lead = max((t for t in self.trials if t.rung == reached and math.isfinite(t.speedup)), key=lambda t: t.speedup, default=None)
        racing = set(self.alive)
        return Status(rung=rung, rungs=rungs, tried=len(tried), eliminated=sum(1 for c in tried if c not in racing),
                      space=len(self.candidates), leading=lead.candidate.label() if lead else "",
                      leading_speedup=lead.speedup if lead else math.nan, budget_left_s=left_s)
