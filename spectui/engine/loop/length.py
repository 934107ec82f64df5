"""One protocol for a draft length: what the loop, the run and tune's replays ask of it.

A draft length answers one question per step, ``propose(context) -> K``: how many tokens to
verify of a free drafter's proposal as it stands, or, before a draft model drafts
(``context.proposal`` None), how many it should draft. After the step it is told what came of
it (``observe(outcome)``), and at the end of a run it says what it learned (``learned()``):
the verify costs it timed and the proposal calibration worth storing for the next run, and
what it did with its proposals. Callers read it through these members only, never through
which kind it is, so a new rule (``learned_length.LearnedLength``) is one more implementation.

Implementations: ``FixedLength`` (K, whatever the proposal), ``draft_length.DraftLength`` (a
cost-aware K priced per proposal class), ``learned_length.LearnedLength`` (per-position survival
learned from this run's blocks).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, runtime_checkable

from spectui.engine.protocol import Draft
from spectui.recording.schema import DraftDecisions


class LengthContext(NamedTuple):
    """What a draft length decides from: a free drafter's ``proposal`` (None: a draft model's
    K, asked before it drafts) and the ``room`` left in the run's budget and context."""

    proposal: Draft | None
    room: int


class Outcome(NamedTuple):
    """What a step did: asked for ``asked`` tokens, verified ``drafted`` (found by a ``match``)
    and kept ``accepted``, emitting ``emitted``; ``verify_us`` is the evaluation of ``drafted +
    1`` tokens, ``draft_us`` the ``forwards`` forward passes of a draft model."""

    asked: int
    drafted: int
    accepted: int
    verify_us: float = math.nan
    match: int = 0
    draft_us: float = math.nan
    forwards: int = 0
    emitted: Sequence[int] = ()


@dataclass
class Learned:
    """What a run's draft length learned, to store and to show: the relative verify costs it
    timed itself (block size -> cost; empty: nothing worth storing), the proposal calibration
    for the next run of this model and drafter (None: nothing to store), and what it did with
    its proposals (None for a fixed K)."""

    costs: dict[int, float] = field(default_factory=dict)
    prices: dict[str, tuple[float, float]] | None = None
    decisions: DraftDecisions | None = None


@runtime_checkable
class LengthPolicy(Protocol):
    """A draft length (see the module's docstring)."""

    @property
    def k_max(self) -> int:
        """The longest block it asks for."""

    @property
    def sees_proposal(self) -> bool:
        """It prices a free drafter's proposal as it stands (asked for ``k_max`` tokens first):
        False where K does not depend on what was proposed (a fixed K)."""

    def propose(self, context: LengthContext) -> int: ...

    def observe(self, outcome: Outcome) -> None: ...

    def learned(self) -> Learned: ...


class FixedLength:
    """K, whatever the drafter proposes: nothing to learn."""

    sees_proposal = False

    def __init__(self, k: int) -> None:
        self.k = self.k_min = self.k_max = k

    def propose(self, context: LengthContext) -> int:
        return self.k

    def observe(self, outcome: Outcome) -> None:
        return None

    def learned(self) -> Learned:
        return Learned()
