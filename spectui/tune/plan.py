"""From measured costs and acceptance to the setting each prompt tier should use, and why.

Inputs are measurements: the verify-cost curve (``measure``), a draft model's cost per
token, and per prompt either its greedy output (a prompt-lookup drafter is replayed over it
exactly: ``replay``) or a draft model's blocks from a short run (its confidence and how much
of each block the target kept). Every candidate setting gets a predicted speedup per prompt;
a tier's prediction is the median over its prompts, the same statistic the check measures.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from spectui.drafting import DraftConfig, Lookup, lookup_label
from spectui.metrics.predict import break_even_acceptance
from spectui.tune.ceiling import copy_ceiling, lookup_bound, perfect_ceiling
from spectui.tune.replay import replay

#: fixed draft lengths tune considers
K_CHOICES = tuple(range(1, 17))
#: draft-model confidence thresholds tune considers (0 = off)
P_CHOICES = (0.0, 0.2, 0.4, 0.6, 0.8, 0.9)
#: a setting must beat AR by this much to be called a gain (measurement noise on a CPU)
GAIN = 1.03


@dataclass(frozen=True)
class Setting:
    """A way to run: AR, prompt lookup (fixed K, or cost-aware when ``k`` is None), or a
    draft model at fixed K with a confidence threshold."""

    drafter: str  # "ar", "model" or a model-free drafter: "ngram", "suffix"
    k: int | None = None
    p_min: float = 0.0

    @property
    def model_free(self) -> bool:
        return self.drafter not in ("ar", "model")

    def label(self) -> str:
        if self.drafter == "ar":
            return "AR"
        if self.model_free:
            name = lookup_label(self.drafter)
            return f"{name}, cost-aware K" if self.k is None else f"{name} K={self.k}"
        return f"draft model K={self.k}" + (f" p-min {self.p_min:g}" if self.p_min else "")

    def fixed_prefix(self) -> str:
        """What the labels of this drafter's fixed-K settings start with: ``n-gram K=``."""
        return Setting(self.drafter, 0).label().removesuffix("0")

    def draft_config(self, base: DraftConfig) -> DraftConfig:
        """The ``DraftConfig`` that runs this setting, derived from the run's own ``base`` (its
        chain and n-gram sizes kept). The suffix drafter runs without its memory, as it is
        replayed (``lookup_drafter``)."""
        drafter = Lookup(name=self.drafter) if self.model_free else base.drafter
        if self.k is None:
            return base.drafting_with(drafter, cost_aware=True).replayable()
        return base.drafting_with(drafter, fixed_k=self.k, cost_aware=False, p_min=self.p_min).replayable()


@dataclass
class PromptData:
    """What tune knows about one prompt: its tokens, the target's greedy output, and for a
    draft model the blocks of a run at K = ``k_max``: (confidences, tokens drafted, accepted)."""

    name: str
    tier: str
    prompt: list[int]
    output: list[int]
    blocks: list[tuple[list[float], int, int]] = field(default_factory=list)
    budget: int = 0  # the run's token budget (0: the output's length)
    eog: frozenset[int] = frozenset()  # the target's end-of-generation tokens: a run drafts none past one


@dataclass
class TierPlan:
    tier: str
    prompts: list[str]
    #: predicted speedup per setting label, median over the tier's prompts
    predicted: dict[str, float]
    #: per drafted position: share of blocks reaching it that kept it (at the longest K)
    per_position: list[float]
    acceptance: float
    best: Setting
    best_speedup: float
    break_even: float  # acceptance at which the best fixed K breaks even (NaN: never)
    verdict: str
    #: per prompt: the best setting's predicted speedup (the check compares prompt by prompt)
    per_prompt: dict[str, float] = field(default_factory=dict)
    measured: float | None = None
    measured_per_prompt: dict[str, float] = field(default_factory=dict)
    #: what the weights allow (``ceiling``), medians over the prompts: the best copying
    #: drafter there could be, and a drafter that is never wrong
    copy_ceiling: float = math.nan
    perfect_ceiling: float = math.nan
    #: prompt lookup that knew where each copy ends (``ceiling.lookup_bound``): what a lookup
    #: drafter's draft length can reach, its sources being what they are
    lookup_bound: float = math.nan
    #: per prompt whose check stayed on a shared machine, measured again: other processes'
    #: share of all cores (``metrics.conditions.MachineLoad``); its figure is not the machine's
    disturbed: dict[str, float] = field(default_factory=dict)


def lookup_name(base: DraftConfig) -> str:
    """The model-free drafter tune replays for ``base``: its own, or prompt lookup."""
    return base.drafter.name if isinstance(base.drafter, Lookup) else "ngram"


def lookup_predictions(
    data: PromptData, cost: Callable[[int], float], base: DraftConfig, seed: Sequence[float],
) -> dict[Setting, tuple[float, float]]:
    """(speedup, acceptance) of every setting of the model-free drafter over one prompt's output."""
    out = {}
    name = lookup_name(base)
    for setting in [Setting(name, None), *(Setting(name, k) for k in K_CHOICES)]:
        r = replay(data.prompt, data.output, cost, setting.draft_config(base), data.budget, eog=data.eog, seed=seed)
        out[setting] = (r.speedup, r.acceptance)
    return out


def model_predictions(data: PromptData, cost: Callable[[int], float], draft_cost: float, k_max: int) -> dict[Setting, tuple[float, float]]:
    """(speedup, acceptance) of every (K, p-min) for a draft model, block by block: a block
    drafted under a threshold stops at its first position below it, keeps the accepted
    prefix up to there, and costs the draft's forwards plus one verification."""
    out = {}
    for k in range(1, k_max + 1):
        for p in P_CHOICES:
            tokens = drafted_total = kept_total = 0
            spent = 0.0
            for conf, drafted, accepted in data.blocks:
                sure = next((i for i, c in enumerate(conf) if c < p), len(conf)) if p else len(conf)
                d = min(k, drafted, sure)
                stopped = d < min(k, drafted)  # one more draft forward, for the token it refused
                kept = min(accepted, d)
                tokens += kept + 1
                drafted_total += d
                kept_total += kept
                spent += draft_cost * (d + stopped) + cost(d + 1)
            if spent:
                out[Setting("model", k, p)] = (tokens / spent, kept_total / drafted_total if drafted_total else math.nan)
    return out


def per_position(data: Sequence[PromptData], cost: Callable[[int], float], base: DraftConfig) -> list[float]:
    """Acceptance per drafted position at the longest K: prompt lookup replayed, or a draft
    model's blocks as they ran."""
    reached: list[int] = []
    kept: list[int] = []

    def count(j: int, n: int, k: int) -> None:
        while len(reached) <= j:
            reached.append(0)
            kept.append(0)
        reached[j] += n
        kept[j] += k

    longest = base.drafting_with(Lookup(name=lookup_name(base)), fixed_k=max(K_CHOICES), cost_aware=False).replayable()
    for d in data:
        if d.blocks:
            for _, drafted, accepted in d.blocks:
                for j in range(drafted):
                    count(j, 1, int(j < accepted))
        else:
            r = replay(d.prompt, d.output, cost, longest, d.budget, eog=d.eog)
            for j, (n, k) in enumerate(zip(r.reached, r.kept)):
                count(j, n, k)
    return [k / n if n else math.nan for n, k in zip(reached, kept)]


def plan_tier(
    tier: str,
    data: Sequence[PromptData],
    cost: Callable[[int], float],
    base: DraftConfig,
    seed: Sequence[float],
    *,
    draft_cost: float = 0.0,
) -> TierPlan:
    """Predictions for every setting over the tier's prompts, the best one, and a verdict."""
    model = base.has_model
    per_prompt = {
        d.name: (model_predictions(d, cost, draft_cost, max(base.k_range[1], 1)) if model
                 else lookup_predictions(d, cost, base, seed))
        for d in data
    }
    settings = list(next(iter(per_prompt.values())))
    predicted = {s: statistics.median(per_prompt[d.name][s][0] for d in data) for s in settings}
    accept = {s: _nanmedian(per_prompt[d.name][s][1] for d in data) for s in settings}
    best = max(settings, key=lambda s: predicted[s])
    fixed = [s for s in settings if s.k is not None and s.p_min == 0.0]
    best_fixed = max(fixed, key=lambda s: predicted[s])
    k = best_fixed.k or 1
    block_cost = cost(k + 1) + draft_cost * k
    break_even = break_even_acceptance(k, block_cost)
    # prompt lookup costs nothing to ask, so its cost-aware K is kept while it breaks even; a
    # draft model must beat AR by the noise margin; below that, AR is the setting to use
    chosen = best if predicted[best] >= (1.0 if not model else GAIN) else Setting("ar")
    if chosen.drafter == "ar":
        per_prompt_best = {d.name: 1.0 for d in data}
    else:
        per_prompt_best = {d.name: per_prompt[d.name][chosen][0] for d in data}
    plan = TierPlan(
        tier=tier,
        prompts=[d.name for d in data],
        predicted={s.label(): v for s, v in predicted.items()},
        per_position=per_position(data, cost, base),
        acceptance=accept.get(chosen, math.nan),
        best=chosen,
        best_speedup=predicted.get(chosen, 1.0),
        break_even=break_even,
        verdict="",
        per_prompt=per_prompt_best,
        copy_ceiling=statistics.median(copy_ceiling(d.prompt, d.output, cost, max(K_CHOICES)) for d in data),
        perfect_ceiling=statistics.median(perfect_ceiling(len(d.output), cost, max(K_CHOICES)) for d in data),
        lookup_bound=statistics.median(lookup_bound(d.prompt, d.output, cost, max(K_CHOICES)) for d in data),
    )
    plan.verdict = verdict(plan, best_fixed, predicted[best_fixed], accept[best_fixed])
    return plan


def verdict(plan: TierPlan, best_fixed: Setting, fixed_speedup: float, fixed_accept: float) -> str:
    """One sentence: does speculation pay on this tier, with what, and what decides it."""
    be = "never breaks even" if math.isnan(plan.break_even) else f"breaks even at acceptance {plan.break_even:.2f}"
    why = f"{best_fixed.label()} {be} and is accepted at {fixed_accept:.2f} here"
    if plan.best.drafter == "ar":
        best = max((v for label, v in plan.predicted.items()), default=math.nan)
        return f"{plan.tier}: speculation does not pay (at best {best:.2f}x); {why}; run AR."
    if plan.best_speedup < GAIN:
        return (f"{plan.tier}: little to copy: {plan.best.label()} predicts {plan.best_speedup:.2f}x "
                f"(fixed K at best {fixed_speedup:.2f}x); {why}.")
    return f"{plan.tier}: speculation pays: {plan.best.label()} predicts {plan.best_speedup:.2f}x AR; {why}."


def _nanmedian(values: Iterable[float]) -> float:
    vals = [v for v in values if not math.isnan(v)]
    return statistics.median(vals) if vals else math.nan
