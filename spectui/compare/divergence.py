"""Why two greedy runs part: a numerical near-tie, or speculation changing the output.

A greedy run records, for every emitted token, the target's margin between its best and
second-best logit and the second-best token (``Step.margins_milli`` / ``Step.runner_up``), and
its header carries the backend's calibrated batch-shape noise (``Header.batch_noise``: the
largest logit difference between block and single-token evaluation up to each depth).

At the first divergence the baseline emitted ``a`` with margin ``m_b`` over everything else
and the candidate emitted ``b`` with margin ``m_c``. So the baseline's ``l_a - l_b >= m_b`` and
the candidate's ``l_b - l_a >= m_c``: the difference ``l_a - l_b`` moved by at least
``m_b + m_c`` between the runs. If every logit moves by at most ``noise`` between evaluation
shapes, that difference moves by at most ``2 * noise``. Hence:

* ``m_b + m_c <= 2 * noise``: a **near-tie**, within what the backend's numerics alone do
  (both margins and the bound are shown; the gate accepts it);
* otherwise **speculation changed the output**: no batch noise this backend showed explains
  it, and the gate fails it.

Where either margin or the calibration is missing (a recording before schema 1.4, a
sampled run, a server that sends no log-probabilities, a depth past the calibration), the
divergence is **unclassified** and judged as before: a difference fails the gate.

Sampled runs are not judged here: their outputs differ by design, and the distribution
tests and quality checks speak for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

import msgspec

from spectui.recording.output import output_tokens, output_top_two
from spectui.recording.reader import Recording
from spectui.recording.schema import BatchNoise, Header

NEAR_TIE: Final = "near-tie"
CHANGED: Final = "speculation changed the output"
UNCLASSIFIED: Final = "unclassified"
Verdict = Literal["near-tie", "speculation changed the output", "unclassified"]

#: one emitted token's (margin in thousandths of a logit, runner-up id); None: not recorded
TopTwo = tuple[int, int] | None


class DivergenceCause(msgspec.Struct, kw_only=True):
    verdict: Verdict
    #: why, in one line (both margins and the bound when known)
    reason: str
    #: margins in logits at the divergence, each run's own; None: not recorded
    baseline_margin: float | None = None
    candidate_margin: float | None = None
    baseline_runner_up: int | None = None
    candidate_runner_up: int | None = None
    #: the context position of the divergent token (prompt tokens + index)
    depth: int = 0
    #: calibrated largest logit difference at that depth (the larger of the two headers')
    noise: float | None = None
    #: the most the two margins together can be moved by that noise: 2 x noise
    bound: float | None = None
    #: each run's token was the other's runner-up (a swap of the two best)
    swapped: bool = False

    @property
    def fails(self) -> bool:
        """Whether this divergence fails the gate (a near-tie does not)."""
        return self.verdict != NEAR_TIE


def _noise(noises: Sequence[BatchNoise | None], depth: int) -> float | None:
    """The larger calibrated noise at ``depth``; None unless every calibration covers it."""
    known = [n.at(depth) for n in noises if n is not None]
    if not known or any(v is None for v in known):
        return None
    return max(v for v in known if v is not None)


def classify(
    *,
    index: int,
    baseline: tuple[int | None, TopTwo],
    candidate: tuple[int | None, TopTwo],
    prompt_tokens: int,
    noises: Sequence[BatchNoise | None],
) -> DivergenceCause:
    """Judge the first divergence at output ``index``: each side's (token, top-two facts)."""
    depth = prompt_tokens + index
    (tok_b, top_b), (tok_c, top_c) = baseline, candidate
    if tok_b is None or tok_c is None:
        side = "baseline" if tok_b is None else "candidate"
        return DivergenceCause(verdict=UNCLASSIFIED, reason=f"the {side} ended first: not a token choice", depth=depth)
    cause = DivergenceCause(verdict=UNCLASSIFIED, reason="", depth=depth)
    if top_b is not None:
        cause.baseline_margin, cause.baseline_runner_up = top_b[0] / 1000, top_b[1]
    if top_c is not None:
        cause.candidate_margin, cause.candidate_runner_up = top_c[0] / 1000, top_c[1]
    cause.noise = _noise(noises, depth)
    cause.bound = None if cause.noise is None else 2 * cause.noise
    cause.swapped = cause.baseline_runner_up == tok_c and cause.candidate_runner_up == tok_b
    if cause.baseline_margin is None or cause.candidate_margin is None:
        missing = [s for s, m in (("baseline", cause.baseline_margin), ("candidate", cause.candidate_margin)) if m is None]
        known = cause.baseline_margin if cause.candidate_margin is None else cause.candidate_margin
        if known is not None and cause.bound is not None and known > cause.bound:
            # the missing margin is >= 0, so one margin past the bound already settles it
            # (a speculative llama-server run sends no log-probabilities for drafted tokens)
            cause.verdict = CHANGED
            cause.reason = (
                f"{CHANGED}: one margin alone, {known:.3f}, exceeds {cause.bound:.3f} (2 x {cause.noise:.3f},"
                f" the calibrated batch noise at depth {depth}); the {missing[0]} recorded none"
            )
            return cause
        cause.reason = f"no top-2 margin recorded by the {' and '.join(missing)} (greedy runs since schema 1.4 record them)"
        return cause
    margins = f"margins {cause.baseline_margin:.3f} (baseline) + {cause.candidate_margin:.3f} (candidate)"
    if cause.bound is None:
        cause.reason = f"{margins}; no batch-noise calibration covers depth {depth}"
        return cause
    total = cause.baseline_margin + cause.candidate_margin
    bound = f"2 x {cause.noise:.3f}, the backend's calibrated batch noise at depth {depth}"
    swap = "; each run's token was the other's runner-up" if cause.swapped else ""
    if total <= cause.bound:
        cause.verdict = NEAR_TIE
        cause.reason = f"numerical near-tie: {margins} = {total:.3f} <= {cause.bound:.3f} ({bound}){swap}"
    else:
        cause.verdict = CHANGED
        cause.reason = f"{CHANGED}: {margins} = {total:.3f} > {cause.bound:.3f} ({bound}): more than numerics can move{swap}"
    return cause


def classify_runs(
    index: int, headers: tuple[Header, Header], baseline: tuple[int | None, TopTwo], candidate: tuple[int | None, TopTwo]
) -> DivergenceCause | None:
    """``classify`` for two runs described by their headers (a recording, or a run on screen);
    None unless both are greedy (sampled runs are not judged by margins)."""
    hb, hc = headers
    if not (hb.config.sampling.greedy and hc.config.sampling.greedy):
        return None
    return classify(
        index=index,
        baseline=baseline,
        candidate=candidate,
        # a server recording has no prompt tokens: the depth comes from the side that has them
        prompt_tokens=max(len(hb.prompt_tokens), len(hc.prompt_tokens)),
        noises=[hb.batch_noise, hc.batch_noise],
    )


def token_at(tokens: Sequence[int], top: Sequence[TopTwo], index: int) -> tuple[int | None, TopTwo]:
    """One side of a divergence: its token at ``index`` and that token's top-two facts."""
    return (tokens[index] if index < len(tokens) else None), (top[index] if index < len(top) else None)


def classify_recordings(baseline: Recording, candidate: Recording, index: int) -> DivergenceCause | None:
    """The cause of two recordings parting at output ``index`` (``classify_runs``)."""

    def side(rec: Recording) -> tuple[int | None, TopTwo]:
        return token_at(output_tokens(rec.events)[0], output_top_two(rec.events), index)

    return classify_runs(index, (baseline.header, candidate.header), side(baseline), side(candidate))
