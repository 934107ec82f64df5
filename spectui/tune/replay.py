"""Replay a drafting policy over a greedy output: exact acceptance, predicted speedup.

Under greedy decoding the target's output does not depend on drafting, so one AR run fixes
it, and what any model-free drafter (prompt lookup, the suffix drafter) would have had
accepted at any step is known exactly:
the common prefix of its proposal and the output from that step on. Replaying the drafter
(and a K policy) over the output therefore gives every block's size and acceptance without
running the target again; with a verify-cost curve, the time each block costs and the
speedup against AR follow. ``spectui tune`` predicts from this, then checks the prediction
against real runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from spectui.config import RunConfig
from spectui.drafting import DraftConfig, Pricing
from spectui.engine.drafters import DraftSources, drafter_kind
from spectui.engine.loop.length import LengthPolicy, Outcome
from spectui.engine.loop.length_choice import length_policy
from spectui.engine.loop.propose import propose_step
from spectui.engine.protocol import Drafter


@dataclass
class Replay:
    """What a policy would have done over one output."""

    tokens: int = 0  # tokens after the first (the first comes from the prefill)
    cost: float = 0.0  # in one-token evaluations
    drafted: int = 0
    accepted: int = 0
    blocks: int = 0  # steps that verified a draft
    #: per drafted position j (0-based): blocks that drafted it, and that accepted it
    reached: list[int] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)
    #: the calibration's observations per cell (``pricing.Calibration.run_counts``)
    counts: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def speedup(self) -> float:
        return self.tokens / self.cost if self.cost else float("nan")

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else float("nan")

    def per_position(self) -> list[float]:
        return [k / r if r else float("nan") for r, k in zip(self.reached, self.kept)]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def lookup_drafter(draft: DraftConfig) -> Drafter:
    """The model-free drafter ``draft`` names. The suffix drafter is replayed without its
    memory: the memory may hold the very outputs being replayed (from earlier runs of these
    prompts), which would predict a first request from its repeats."""
    return drafter_kind(draft.kind).make(DraftSources(RunConfig(draft=draft.replayable())))


def replay(
    prompt: Sequence[int],
    output: Sequence[int],
    cost: Callable[[int], float],
    draft: DraftConfig,
    budget: int = 0,
    on_block: Callable[[Drafter, int, list[int], int], None] | None = None,
    prices: Mapping[str, Sequence[float]] | None = None,
    eog: frozenset[int] = frozenset(),
    seed: Sequence[float] = (),
    length: LengthPolicy | None = None,
) -> Replay:
    """Replay ``draft`` (prompt lookup or the suffix drafter; K fixed, or cost-aware with
    ``cost`` as its timings) over ``output``, the greedy continuation of ``prompt``;
    ``cost(n)`` is the verify-cost curve. ``budget`` is the run's token budget (0: the
    output's length); an output that ended on an end-of-generation token before it may be
    drafted past, as a real run would. ``on_block(drafter, i, draft, kept)`` sees every
    verified block (drafted at output position ``i``) before the history moves past it.
    ``prices``: the stored calibration the run starts from (None: the static prior); what the
    replayed run observed is left in ``Replay.counts``, as a run would store it. ``eog``: the
    target's end-of-generation tokens, where a run cuts every proposal (``propose.through_end``).
    ``seed``: the verify-cost curve a cost-aware K starts from (the run plan's ``Pricing.seed``).
    ``length``: the draft length to replay instead of the one ``draft`` names (a rule under study)."""
    drafter = lookup_drafter(draft)
    drafter.reset(prompt)
    length = length or length_policy(draft.length, Pricing(seed=tuple(seed)), prices)
    history = [*prompt, output[0]]
    i, n = 1, len(output)
    budget = budget or n
    r = Replay()
    while i < n:
        room = budget - i - 1  # never draft past the run's budget
        k, proposal = propose_step(drafter, length, history, room, eog)
        tokens, match = proposal.tokens, proposal.match
        got = common_prefix(tokens, output[i:])
        step_cost = cost(len(tokens) + 1)
        emitted = min(got + 1, n - i)
        if tokens:
            r.blocks += 1
            r.drafted += len(tokens)
            r.accepted += got
            while len(r.reached) < len(tokens):
                r.reached.append(0)
                r.kept.append(0)
            for j in range(len(tokens)):
                r.reached[j] += 1
                r.kept[j] += j < got
            if on_block is not None:
                on_block(drafter, i, tokens, got)
        # the draft length follows every proposal it priced on the tokens emitted, as in a run
        length.observe(Outcome(k, len(tokens), got, step_cost * 1000.0, match, emitted=output[i:i + emitted]))
        r.tokens += emitted
        r.cost += step_cost
        history.extend(output[i:i + emitted])
        i += emitted
    r.counts = length.learned().prices or {}
    return r
