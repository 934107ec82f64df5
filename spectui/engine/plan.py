"""The run plan: everything a run executes, decided once before its first token.

``Engine.plan`` builds it from a ``RunConfig``: the configuration as asked, what the plan
measured to price blocks (``Pricing``: the verify-cost curve a cost-aware K starts from, a
draft model's price), the prompt
as the model sees it, whether a conversation's caches are kept, the drafter, the draft length
rule and the fallback policy. ``Engine.run`` then writes the header from ``plan.config`` and
runs ``plan.decode``; nothing after this changes either. How K travels from the
flag to a block: ARCHITECTURE.md, "Data flows one way".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from spectui.config import RunConfig
from spectui.drafting import Pricing
from spectui.engine.drafters import DraftSources, drafter_kind, make_lookup
from spectui.engine.loop.decode import decode
from spectui.engine.loop.length import LengthPolicy
from spectui.engine.loop.policy import FallbackPolicy, ladder
from spectui.engine.loop.sampling import Sampler
from spectui.engine.protocol import Backend, Drafter
from spectui.recording.schema import End, PolicyChange, Prefill, Step


@dataclass
class RunPlan:
    #: the configuration as asked, recorded verbatim
    config: RunConfig
    #: what the plan measured (or was handed) to price blocks: recorded beside the config
    pricing: Pricing
    prompt_text: str
    prompt_tokens: list[int]
    #: a conversation's later turn keeps the prefix its caches share with the prompt
    reuse: bool
    drafter: Drafter | None
    draft_length: LengthPolicy | None
    policy: FallbackPolicy | None

    def decode(self, target: Backend, *, t0_ns: int, stop: threading.Event | None = None) -> Iterator[Prefill | Step | PolicyChange | End]:
        return decode(
            target, self.prompt_tokens, sampler=Sampler(self.config.sampling), max_tokens=self.config.max_tokens,
            drafter=self.drafter, draft_length=self.draft_length, t0_ns=t0_ns, stop=stop, policy=self.policy,
            reuse=self.reuse,
        )


def block_sizes(config: RunConfig) -> list[int]:
    """Every number of tokens ``config``'s run can evaluate at once on the target after the
    prefill: 1 (an AR step) and K + 1 for each draft length K it can use (a verification
    block is the pending token and K drafts). The fallback policy's rungs may shrink K."""
    if config.mode == "ar":
        return [1]
    k_min, k_max = config.draft.k_range
    ks = set(range(k_min, k_max + 1))
    if config.policy.enabled:
        ks |= {r.k for r in ladder(config) if r.k}
    return sorted({1, *(k + 1 for k in ks if k > 0)})


def make_policy(config: RunConfig, drafter: Drafter | None) -> FallbackPolicy | None:
    """The fallback policy for a speculative run that asks for it; its lighter drafter
    (n-gram, behind a draft model) is made here so the switch costs nothing mid-run."""
    if drafter is None or not config.policy.enabled:
        return None
    rungs = ladder(config)
    drafters: dict[str, Drafter] = {rungs[0].drafter: drafter}
    if any(r.drafter == "ngram" for r in rungs) and "ngram" not in drafters:
        drafters["ngram"] = make_lookup(drafter_kind("ngram"), DraftSources(config))
    return FallbackPolicy(config.policy, rungs, drafters)


def draft_cost_probe(target: Backend, draft_model: Backend, tokens: Sequence[int], reps: int = 3) -> float:
    """A draft forward's time over a target token's, from ``reps`` one-token evaluations on
    each after a short context: the price a cost-aware K puts on drafting until the run has
    timed both (without it the first blocks would draft on an optimistic guess)."""
    times = []
    for backend in (target, draft_model):
        backend.truncate(0)
        backend.eval(list(tokens[:8]), all_logits=False)
        samples = []
        for tok in tokens[8 : 8 + reps]:
            t = time.perf_counter_ns()
            backend.eval((tok,), all_logits=False)
            samples.append(time.perf_counter_ns() - t)
        backend.truncate(0)
        times.append(sorted(samples)[len(samples) // 2] if samples else 0)
    return times[1] / times[0] if times[0] else 0.0
