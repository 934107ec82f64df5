"""The runtime fallback policy: step down when speculation stops paying, probe back up later.

A session with the policy on walks a ladder of rungs, richest first::

    model K=4  ->  model K=3  ->  ngram K=3  ->  AR        (a draft model is configured)
    ngram K=4  ->  ngram K=3  ->  AR                       (n-gram drafting)

It steps down one rung when acceptance stays below the floor for ``low_windows`` consecutive
windows of ``window_blocks`` drafted blocks, or when swap has grown past the ceiling or memory
pressure reaches it (those are re-checked on every memory sample; no probing while they hold).
A drafter or verifier error drops straight past every rung using that part: a failing draft
model leaves the n-gram rung, a failing verification block leaves AR, the one path that needs
no block. After ``probe_after_steps`` decode steps below the top, it climbs one rung; if the
probe's first window is below the floor it steps back down at once and the next probe waits
twice as long (up to 16x), so a prompt where drafting never pays costs a probe window now and
then, not a flapping policy.

Exactness does not depend on any of this: every rung verifies against the target, so greedy
output is the target's own whatever the policy does. The policy only decides what to draft.
Every transition is returned as a ``PolicyChange`` for the session's event stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spectui.config import PolicyConfig, RunConfig
from spectui.engine.protocol import Drafter
from spectui.recording.schema import MemorySample, PolicyChange

#: The draft lengths a shrink steps through (also the sweep's K grid, {2, 3, 4, 6, 8}).
K_LADDER = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
MAX_PROBE_BACKOFF = 16
_MB = 1024 * 1024


@dataclass(frozen=True)
class Rung:
    drafter: str  # "model", "ngram" or "ar"
    k: int = 0

    @property
    def label(self) -> str:
        return "AR" if self.drafter == "ar" else f"{self.drafter} K={self.k}"


def shrink_k(k: int) -> int:
    """One step down the K ladder (K=1 has nowhere to go)."""
    smaller = [v for v in K_LADDER if v < k]
    return smaller[-1] if smaller else k


def ladder(config: RunConfig) -> list[Rung]:
    """The rungs of ``config``'s plan, richest first. A rung's K caps the draft length, so the
    top rung is the plan's own bound: K for a fixed K, ``k_max`` for the cost-aware K (which
    picks each step's K below it). A top rung at the configured K would cap the cost-aware K
    there and make a run with the policy on draft differently from one without it while the
    policy has not acted: the same settings must run the same plan."""
    if config.mode == "ar":
        return [Rung("ar")]
    kind = config.draft.kind  # "ngram", "suffix" or "model": the rung names are the drafter kinds
    k = config.draft.k_range[1]
    rungs = [Rung(kind, k)]
    if shrink_k(k) < k:
        rungs.append(Rung(kind, shrink_k(k)))
    if kind == "model":
        rungs.append(Rung("ngram", rungs[-1].k))
    rungs.append(Rung("ar"))
    return rungs


class FallbackPolicy:
    """Decides the rung before every decode step from what the steps and samples showed.

    Only the thread that runs the session calls it (``decode`` per step, ``Engine.run`` per
    memory sample), so it keeps plain counters and no lock.
    """

    def __init__(self, config: PolicyConfig, rungs: Sequence[Rung], drafters: dict[str, Drafter]) -> None:
        self.config = config
        self.rungs = list(rungs)
        self.drafters = drafters
        self.level = 0
        self._pending: list[tuple[int, str]] = []  # (target level, reason) decided between steps
        self._window_drafted = self._window_accepted = self._window_blocks = 0
        self._low_streak = 0
        self._steps_here = 0
        self._probing = False
        self._backoff = 1
        self._swap_base: int | None = None
        self._memory_reason = ""  # non-empty while swap or pressure is over its ceiling

    # -- what to draft now -----------------------------------------------------------

    @property
    def rung(self) -> Rung:
        return self.rungs[self.level]

    @property
    def drafter(self) -> Drafter | None:
        return self.drafters.get(self.rung.drafter)

    @property
    def k(self) -> int:
        return self.rung.k

    def reset(self, prompt: Sequence[int]) -> None:
        for d in self.drafters.values():
            d.reset(prompt)

    # -- observations --------------------------------------------------------------

    def observe_block(self, drafted: int, accepted: int) -> None:
        """One decode step's draft result (blocks with nothing drafted are AR steps: they
        say nothing about acceptance)."""
        self._steps_here += 1
        if drafted == 0:
            return
        self._window_drafted += drafted
        self._window_accepted += accepted
        self._window_blocks += 1
        if self._window_blocks < self.config.window_blocks:
            return
        rate = self._window_accepted / self._window_drafted
        self._window_drafted = self._window_accepted = self._window_blocks = 0
        floor = self.config.acceptance_floor
        if rate >= floor:
            self._low_streak = 0
            if self._probing:  # the probe paid: the next one need not wait longer
                self._probing = False
                self._backoff = 1
            return
        self._low_streak += 1
        if self._probing:
            self._backoff = min(self._backoff * 2, MAX_PROBE_BACKOFF)
            self._step_down(f"probe failed: acceptance {rate:.2f} < floor {floor:.2f} in its first window")
        elif self._low_streak >= self.config.low_windows:
            windows = f"{self._low_streak} window{'s' if self._low_streak > 1 else ''}"
            self._step_down(
                f"acceptance {rate:.2f} < floor {floor:.2f} for {windows} of {self.config.window_blocks} blocks"
            )

    def observe_memory(self, sample: MemorySample) -> None:
        if self._swap_base is None:
            self._swap_base = sample.swap_used
        growth_mb = (sample.swap_used - self._swap_base) / _MB
        reason = ""
        if growth_mb > self.config.swap_growth_ceiling_mb:
            reason = f"swap grew {growth_mb:.0f} MB (ceiling {self.config.swap_growth_ceiling_mb:.0f} MB)"
        elif sample.pressure >= self.config.pressure_ceiling:
            reason = f"memory pressure {sample.pressure:g} (ceiling {self.config.pressure_ceiling:g})"
        if reason and not self._memory_reason:
            self._step_down(reason)  # once per crossing; it holds the policy down while it lasts
        self._memory_reason = reason

    def part_failed(self, part: str, exc: BaseException) -> None:
        """``part`` ("drafter" or "verifier") raised: leave every rung that uses it."""
        what = f"{part} error: {type(exc).__name__}: {exc}"
        if part == "verifier":
            self._pending.append((len(self.rungs) - 1, what))
            return
        failing = self.rung.drafter
        target = next((i for i in range(self.level + 1, len(self.rungs)) if self.rungs[i].drafter != failing), None)
        self._pending.append((len(self.rungs) - 1 if target is None else target, what))

    # -- decisions -----------------------------------------------------------------

    def _step_down(self, reason: str) -> None:
        if self.level < len(self.rungs) - 1:
            self._pending.append((self.level + 1, reason))

    def decide(self, t_us: int) -> PolicyChange | None:
        """Before a step: apply a pending step down, or probe up; the change, if any."""
        if self._pending:
            target, reason = max(self._pending)  # the deepest fall wins
            self._pending.clear()
            probing = False
        elif self.level > 0 and not self._memory_reason and self._steps_here >= self.config.probe_after_steps * self._backoff:
            target, reason = self.level - 1, f"probe after {self._steps_here} steps at {self.rung.label}"
            probing = True
        else:
            return None
        if target <= self.level and not probing:
            return None
        before = self.rung.label
        self.level = target
        self._probing = probing
        self._steps_here = 0
        self._low_streak = 0
        self._window_drafted = self._window_accepted = self._window_blocks = 0
        return PolicyChange(t_us=t_us, before=before, after=self.rung.label, reason=reason)
