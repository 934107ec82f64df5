"""Is a request under load still exact? Every greedy request against the same request's AR
output at one client (the reference), the way ``spectui.compare.divergence`` judges one run.

Under load the server evaluates several clients' tokens in one batch, and llama.cpp's
evaluation is not batch-invariant: AR itself may part from AR at one client. Where AR under the
same load parts there too, the load moved the output, not speculation: such a request is
``BATCHED``, and one whose reference moved under the load is held against its AR twin at that
load instead. Otherwise a parting is classified with both runs' top-2 margins against the
backend's calibrated batch-shape noise: a near-tie, a defect, or unjudged where no margin
reaches the parting.
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

    def __call__(self, s: Setting, out: RequestOutcome, events: list[Event], at: tuple[int, float, int]) -> None:
        """Against the same request's AR output at one client (the reference). Where the AR
        under the same load parts from the reference too, the load's batching moved the output,
        not speculation: such a request is held against that AR twin instead, and a request that
        follows its twin past the reference's parting is ``BATCHED``."""
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
        if s.ar or (twin is not None and common_tokens(twin.tokens, ref.tokens) == n and common_tokens(out.tokens, twin.tokens) > n):
            against = "" if s.ar else " as AR under the same load does"
            cause = self.cause(s, n, ref, mine)
            out.exact = BATCHED
            out.why = f"parts at token {n}{against}: the load's batching, not speculation ({cause.reason.split(': ', 1)[-1]})"
            return
        if twin is not None and common_tokens(twin.tokens, ref.tokens) < len(ref.tokens):
            ref, against = twin, "its AR twin under the same load"  # the reference itself moved under this load
            n = common_tokens(out.tokens, ref.tokens)
            if n == len(out.tokens) == len(ref.tokens):
                out.exact, out.why = BATCHED, "equals AR under the same load, which parts from AR at one client"
                return
        else:
            against = "AR at one client"
        if n == min(len(out.tokens), len(ref.tokens)):
            out.exact, out.why = DEFECT, f"ends at token {len(out.tokens)} where {against} has {len(ref.tokens)}"
            return
        cause = self.cause(s, n, ref, mine)
        out.exact = NEAR_TIE if cause.verdict == NEAR_TIE else (UNJUDGED if cause.verdict == "unclassified" else DEFECT)
        out.why = f"parts from {against} at token {n}: {cause.reason}"

    def cause(self, s: Setting, n: int, ref: _Output, mine: _Output) -> DivergenceCause:
        def side(o: _Output) -> tuple[int | None, tuple[int, int] | None]:
            return (o.tokens[n] if n < len(o.tokens) else None), (o.top[n] if n < len(o.top) else None)

        return classify(index=n, baseline=side(ref), candidate=side(mine), prompt_tokens=max(ref.n_prompt, mine.n_prompt),
                        noises=[self.noises.get(s.family)])

