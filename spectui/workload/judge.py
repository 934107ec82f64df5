"""Is a request under load still exact? Every greedy request against the same request's AR
output at one client (the reference), the way ``spectui.compare.divergence`` judges one run.

Under load the server evaluates several clients' tokens in one batch, and llama.cpp's
evaluation is not batch-invariant: AR itself may part from AR at one client (``BATCHED``, with
its margins). A speculative request that parts where its AR twin under the same load parts, and
follows that twin, moved with the load, not with speculation: ``BATCHED`` too. Otherwise a
parting is classified with both runs' top-2 margins against the backend's calibrated one-sequence
batch-shape noise: a near-tie, a defect, or unjudged where no margin reaches the parting (a
server streams none for drafted tokens, nor for the end-of-text token that stops a stream).

A server's one-sequence noise says nothing of what batching several clients' tokens moves, and
AR's own partings under load measure it: where AR parted from itself at one client at margins
adding up to X, a speculative parting whose margins add up to no more than X, in the same run
and family, is what load moves too (``BATCHED``, the bound in its reason), not a defect. That
bound grows as AR's levels run, so ``settle`` judges the run's defects again at its end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spectui.compare.divergence import NEAR_TIE, DivergenceCause, classify
from spectui.metrics.same_text import common_tokens
from spectui.recording.output import output_top_two
from spectui.recording.schema import BatchNoise, End, Event
from spectui.workload.plan import Setting
from spectui.workload.result import BATCHED, DEFECT, IDENTICAL, REFERENCE, UNJUDGED, RequestOutcome


@dataclass(frozen=True)
class _Output:
    """A greedy output as judged: its tokens, each token's top-two facts, its prompt's length."""

    tokens: list[int]
    top: list[tuple[int, int] | None]
    n_prompt: int


@dataclass
class Judge:
    """The references as they run (AR first at each level), and the verdict of every request."""

    #: (family, request) -> AR at one client, first pass
    reference: dict[tuple[str, int], _Output] = field(default_factory=dict)
    #: (family, request, (clients, rate, pass)) -> AR under that load: the twin
    twins: dict[tuple[str, int, tuple[int, float, int]], _Output] = field(default_factory=dict)
    #: family -> the calibrated batch-shape noise its partings are judged against
    noises: dict[str, BatchNoise | None] = field(default_factory=dict)
    #: family -> the largest sum of margins at which AR parted from itself under load, and where
    load_forks: dict[str, tuple[float, str]] = field(default_factory=dict)
    #: defects so far: (family, the outcome, its sum of margins), judged again by ``settle``
    defects: list[tuple[str, RequestOutcome, float]] = field(default_factory=list)

    def __call__(self, s: Setting, out: RequestOutcome, events: list[Event], at: tuple[int, float, int]) -> None:
        """Against the same request's AR output at one client (the reference), recorded on ``out``."""
        if not s.config.sampling.greedy:
            out.why = "sampled: judged by distribution, not token by token"
            return
        top = output_top_two(events)
        end = events[-1] if events else None
        n_prompt = end.server.prompt_tokens if type(end) is End and end.server is not None and end.server.prompt_tokens > 0 else 0
        mine = _Output(out.tokens, top, n_prompt)
        key = (s.family, out.index)
        if s.ar:
            self.twins[(s.family, out.index, at)] = mine
        if key not in self.reference:
            if s.ar and at == (1, 0.0, 0):
                self.reference[key] = mine
                out.exact = REFERENCE
            return
        ref = self.reference[key]
        n = common_tokens(out.tokens, ref.tokens)
        if n == len(out.tokens) == len(ref.tokens):
            out.exact = IDENTICAL
            return
        out.parted_at = n
        if out.reason in ("error", "interrupted") and n == len(out.tokens):
            out.exact, out.why = UNJUDGED, f"ended early ({out.reason})"
            return
        twin = self.twins.get((s.family, out.index, at)) if not s.ar else None
        if s.ar:  # AR itself, under another load (or a later pass, its prefix cached): no speculation in it
            fork = self.cause(s, n, ref, mine)
            out.exact = BATCHED
            out.why = f"AR itself parts at token {n} under this load: its evaluation is batched otherwise ({_margins(fork)})"
            moved = _moved(fork)
            if moved is not None and moved > self.load_forks.get(s.family, (-1.0, ""))[0]:
                self.load_forks[s.family] = (moved, f"AR at {at[0] or at[1]:g}{'' if at[0] else '/s'}, request {out.index}")
            return
        if twin is not None and common_tokens(twin.tokens, ref.tokens) == n:
            follows = common_tokens(out.tokens, twin.tokens)
            if follows > n or follows == len(out.tokens) == len(twin.tokens):
                out.exact, out.why = BATCHED, f"parts at token {n} as AR under the same load does: the load's batching, not speculation"
                return
        if n == min(len(out.tokens), len(ref.tokens)):
            # one side stopped (an end-of-text token: a server streams no margin for it) where the other went on
            out.exact = UNJUDGED
            out.why = f"ends at token {len(out.tokens)} where AR at one client has {len(ref.tokens)}: no margin recorded for the end"
            return
        cause = self.cause(s, n, ref, mine)
        out.exact = NEAR_TIE if cause.verdict == NEAR_TIE else (UNJUDGED if cause.verdict == "unclassified" else DEFECT)
        out.why = f"parts from AR at one client at token {n}: {cause.reason}"
        moved = _moved(cause)
        if out.exact == DEFECT and moved is not None:
            self.defects.append((s.family, out, moved))
            self._within_load(s.family, out, moved)

    def settle(self) -> None:
        """Each defect so far judged again against what AR's own partings under load moved."""
        for family, out, moved in self.defects:
            self._within_load(family, out, moved)

    def _within_load(self, family: str, out: RequestOutcome, moved: float) -> None:
        """A defect whose margins add up to no more than what load moved AR itself: batched."""
        fork = self.load_forks.get(family)
        if out.exact == DEFECT and fork is not None and moved <= fork[0]:
            out.exact = BATCHED
            out.why = (f"parts from AR at one client at token {out.parted_at} at margins adding up to {moved:.3f}, within "
                       f"what load moved AR itself in this run ({fork[0]:.3f}, {fork[1]}): the load's batching, "
                       "not shown to be speculation")

    def cause(self, s: Setting, n: int, ref: _Output, mine: _Output) -> DivergenceCause:
        def side(o: _Output) -> tuple[int | None, tuple[int, int] | None]:
            return (o.tokens[n] if n < len(o.tokens) else None), (o.top[n] if n < len(o.top) else None)

        return classify(index=n, baseline=side(ref), candidate=side(mine), prompt_tokens=max(ref.n_prompt, mine.n_prompt),
                        noises=[self.noises.get(s.family)])


def _moved(cause: DivergenceCause) -> float | None:
    """The two margins at a parting added up: how far the logits moved to swap the tokens."""
    if cause.baseline_margin is None or cause.candidate_margin is None:
        return None
    return cause.baseline_margin + cause.candidate_margin


def _margins(cause: DivergenceCause) -> str:
    """The two margins at a parting, in words (or why there are none)."""
    if cause.baseline_margin is None or cause.candidate_margin is None:
        return "no margins recorded there"
    bound = f", beyond one-sequence noise bound {cause.bound:.3f}" if cause.bound is not None and cause.verdict != NEAR_TIE else ""
    return f"margins {cause.baseline_margin:.3f} + {cause.candidate_margin:.3f}{bound}"
