"""The one judge of exactness: why two greedy outputs part, and whether speculation did it.

Every command that says whether a greedy speculative output is exact (``spectui diff``, the
gate, the workload and its gate, the dashboard's compare bar) asks ``judge`` here, with one
input shape, a ``Parting``: where the two outputs part, each run's token and top-2 margin there,
the parting's depth in the sequence and each run's batch-noise calibration (and, under load
only, what load alone did). So the same two recordings get the same verdict from every command.

A greedy run records, for every emitted token, the target's margin between its best and
second-best logit and the second-best token (``Step.margins_milli`` / ``Step.runner_up``), and
its header carries the backend's calibrated batch-shape noise (``Header.batch_noise``: the
largest logit difference between block and single-token evaluation up to each depth).

At the parting the baseline emitted ``a`` with margin ``m_b`` over everything else and the
candidate emitted ``b`` with margin ``m_c``. So the baseline's ``l_a - l_b >= m_b`` and the
candidate's ``l_b - l_a >= m_c``: the difference ``l_a - l_b`` moved by at least ``m_b + m_c``
between the runs. If every logit moves by at most ``noise`` between evaluation shapes, that
difference moves by at most ``2 * noise``. The verdicts:

* **identical**: the outputs do not part;
* **near-tie**: ``m_b + m_c <= 2 * noise``, within what the backend's numerics alone do (the
  gate accepts it);
* **batched** (under load only: the workload): the candidate is AR itself under load, or AR
  under the same load parts at the same token and the candidate follows it, or the margins add
  up to no more than twice what a neighbouring request in the batch was calibrated to move the
  logits at that depth (``BatchNoise.beside_by_depth``, measured where the server's slots
  are), or no more than load moved AR itself in the same run: the server's batching of several
  clients' tokens, not speculation;
* **defect**: past all of that, speculation changed the output; its reason ends with the one
  command that shows it (``spectui diff`` of the two recordings), evidence to send upstream;
* **unjudged**: nothing decides it. One run has no token there (it stopped: a stop records no
  margin), a run recorded no margin at the parting (a server sends none for drafted tokens; a
  recording before schema 1.4, a sampled run), the prompt's length is unknown, or no
  calibration reaches the parting's depth. A verdict needs both margins: the bound is on their
  sum, and one run's margin alone against a bound that is 0.000 where the calibration saw no
  noise would convict every parting. And noise grows with depth, so a calibration is never
  read past the depth it measured (``BatchNoise.at``).

**Depth is the position in the sequence**: every token the model had before the parting's,
its prompt (system text and chat history included, as templated) and the output before it:
``prompt + index``. The calibration is looked up there, never at the output index alone.

Sampled runs are not judged here: their outputs differ by design, and the distribution tests
and quality checks speak for them.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Literal

import msgspec

from spectui.metrics.same_text import common_tokens
from spectui.recording.output import output_tokens, output_top_two
from spectui.recording.reader import Recording
from spectui.recording.schema import BatchNoise, End, Event, Header

IDENTICAL: Final = "identical"
NEAR_TIE: Final = "near-tie"
BATCHED: Final = "batched"
DEFECT: Final = "defect"
UNJUDGED: Final = "unjudged"
Verdict = Literal["identical", "near-tie", "batched", "defect", "unjudged"]
VERDICTS: Final = (IDENTICAL, NEAR_TIE, BATCHED, DEFECT, UNJUDGED)

#: one emitted token's (margin in thousandths of a logit, runner-up id); None: not recorded
TopTwo = tuple[int, int] | None


class Side(msgspec.Struct, frozen=True, kw_only=True):
    """One run at the parting."""

    #: its token there; None: it had ended (``ended`` says how)
    token: int | None = None
    #: its best logit minus its second best there, in logits; None: not recorded
    margin: float | None = None
    runner_up: int | None = None
    #: how it ended, where it has no token there (End.reason: "stop", "length", "error", ...)
    ended: str = ""
    #: the recording it is in ("": none, a run on screen): a defect's reproduction names it
    recording: str = ""


class Load(msgspec.Struct, frozen=True, kw_only=True):
    """What load alone did, where the candidate ran under load (the workload); None elsewhere."""

    #: the candidate is AR itself under load ("AR at 2"): no speculation in it
    ar_itself: str = ""
    #: AR under the same load parts at the same token, and the candidate follows it
    twin_parts_here: bool = False
    #: the most load moved AR's logits in this run (the sum of margins where it parted from
    #: itself, or the move of a top-two gap where it did not), and where
    moved: float | None = None
    moved_by: str = ""
    #: the candidate shared the server's batch with other requests (more than one client, or
    #: an open loop): what a neighbour moves (``BatchNoise.beside_at``) explains a parting too
    beside: bool = False


class Parting(msgspec.Struct, frozen=True, kw_only=True):
    """``judge``'s one input: where two greedy outputs part and what each run knew there."""

    #: the first output token that differs (or that one side lacks); None: they do not part
    index: int | None
    #: tokens before the output in the sequence (prompt, chat history included); None: unknown
    prompt: int | None
    baseline: Side
    candidate: Side
    #: each run's batch-noise calibration (the larger at the depth counts; every one must reach it)
    calibrations: tuple[BatchNoise | None, ...] = ()
    load: Load | None = None

    @property
    def depth(self) -> int | None:
        """The parting's position in the sequence: the prompt and the output before it."""
        return None if self.index is None or self.prompt is None else self.prompt + self.index


class Judgement(msgspec.Struct, kw_only=True):
    """``judge``'s verdict on one parting, with what it was decided by."""

    verdict: Verdict
    #: why, in one line (both margins and the bound when known; a defect's reproduction)
    reason: str
    index: int | None = None
    #: the parting's position in the sequence (prompt + index); None: unknown
    depth: int | None = None
    #: margins in logits at the parting, each run's own; None: not recorded
    baseline_margin: float | None = None
    candidate_margin: float | None = None
    baseline_runner_up: int | None = None
    candidate_runner_up: int | None = None
    #: calibrated largest logit difference at that depth (the larger of the calibrations')
    noise: float | None = None
    #: the most the two margins together can be moved by that noise: 2 x noise
    bound: float | None = None
    #: each run's token was the other's runner-up (a swap of the two best)
    swapped: bool = False
    #: a defect's reproduction, one command ("" when the recordings are not known)
    reproduce: str = ""

    @property
    def fails(self) -> bool:
        """Whether this parting fails a gate: a defect, or nothing that shows it is not one."""
        return self.verdict in (DEFECT, UNJUDGED)

    @property
    def moved(self) -> float | None:
        """The two margins added up: how far the logits moved to swap the tokens; None: unknown."""
        if self.baseline_margin is None or self.candidate_margin is None:
            return None
        return self.baseline_margin + self.candidate_margin

    @property
    def line(self) -> str:
        """The verdict and its reason, as every command prints it."""
        return f"{self.verdict}: {self.reason}"

    @property
    def short(self) -> str:
        """The verdict with the margins against the bound, for a status bar."""
        if self.moved is None or self.verdict == IDENTICAL:
            return self.verdict
        bound = f" vs noise bound {self.bound:.3f}" if self.bound is not None else ""
        return f"{self.verdict} (margins {self.baseline_margin:.3f}+{self.candidate_margin:.3f}{bound})"


def calibrated_noise(calibrations: Sequence[BatchNoise | None], depth: int) -> tuple[float | None, str]:
    """The larger calibrated noise at ``depth`` and, where there is none, why (one phrase):
    every calibration given must reach that depth (a shallower bucket's bound is never read)."""
    known = [c for c in calibrations if c is not None]
    if not known:
        return None, "no batch-noise calibration of these settings was recorded"
    values = [c.at(depth) for c in known]
    if any(v is None for v in values):
        reach = min(c.depth for c, v in zip(known, values) if v is None)
        return None, f"the batch-noise calibration reaches depth {reach}, not the parting's depth {depth}"
    return max(v for v in values if v is not None), ""


def beside_noise(calibrations: Sequence[BatchNoise | None], depth: int | None) -> float | None:
    """The larger calibrated move of a neighbour in the batch at ``depth``; None unless every
    calibration given measured it that deep."""
    if depth is None:
        return None
    values = [c.beside_at(depth) if c is not None else None for c in calibrations]
    if not values or any(v is None for v in values):
        return None
    return max(v for v in values if v is not None)


def judge(p: Parting) -> Judgement:
    """The verdict on one parting: identical, near-tie, batched, defect or unjudged (see the
    module's docstring for why each)."""
    b, c = p.baseline, p.candidate
    j = Judgement(verdict=UNJUDGED, reason="", index=p.index, depth=p.depth, baseline_margin=b.margin,
                  candidate_margin=c.margin, baseline_runner_up=b.runner_up, candidate_runner_up=c.runner_up)
    if p.index is None:
        j.verdict, j.reason = IDENTICAL, "the outputs do not part"
        return j
    i, load = p.index, p.load or Load()
    failed = next((s for s in (c, b) if s.token is None and s.ended in ("error", "interrupted")), None)
    if failed is not None:
        j.reason = f"the {_name(p, failed)} ended early at token {i} ({failed.ended}): no token choice to judge"
        return j
    j.swapped = b.token is not None and c.token is not None and b.runner_up == c.token and c.runner_up == b.token
    j.noise, short = calibrated_noise(p.calibrations, p.depth) if p.depth is not None else (None, "")
    j.bound = None if j.noise is None else 2 * j.noise
    margins = _margins(j)
    if load.ar_itself:
        j.verdict = BATCHED
        j.reason = f"AR itself parts at token {i} under this load ({margins}): its evaluation is batched otherwise, no speculation in it"
        return j
    if load.twin_parts_here:
        j.verdict, j.reason = BATCHED, f"parts at token {i} as AR under the same load does: the load's batching, not speculation"
        return j
    ended = next((s for s in (b, c) if s.token is None), None)
    if ended is not None:
        other = "AR" if ended is c else "the candidate"
        j.reason = (f"the {_name(p, ended)} ended at token {i} ({ended.ended or 'its end'}) where {other} went on:"
                    " a stop records no margin to judge")
        return j
    missing = [_name(p, s) for s in (b, c) if s.margin is None]
    if missing:
        j.reason = (f"no margin recorded by the {' and '.join(missing)} at token {i} (a server sends none for drafted"
                    " tokens; greedy embedded runs since schema 1.4 record them): one run's margin alone is no verdict")
        return j
    if p.depth is None:
        j.reason = f"{margins}; the prompt's length is not recorded, so the parting's depth in the sequence is unknown"
        return j
    if j.bound is None:
        j.reason = f"{margins}; {short}"
        return j
    moved = j.moved
    assert moved is not None
    where = f"2 x {j.noise:.3f}, the calibrated batch noise at depth {p.depth}: prompt {p.prompt} + token {i}"
    swap = "; each run's token was the other's runner-up" if j.swapped else ""
    if moved <= j.bound:
        j.verdict = NEAR_TIE
        j.reason = f"{margins} = {moved:.3f} <= {j.bound:.3f} ({where}): within what numerics alone move{swap}"
    elif load.beside and (neighbour := beside_noise(p.calibrations, p.depth)) is not None and moved <= 2 * neighbour:
        j.verdict = BATCHED
        j.reason = (f"{margins} = {moved:.3f} <= {2 * neighbour:.3f} (2 x {neighbour:.3f}, what a neighbouring request in the"
                    f" batch moves the logits at depth {p.depth}, calibrated): the load's batching, not shown to be speculation{swap}")
    elif load.moved is not None and moved <= load.moved:
        j.verdict = BATCHED
        j.reason = (f"{margins} = {moved:.3f}, within what load moved AR itself in this run ({load.moved:.3f}, "
                    f"{load.moved_by}): the load's batching, not shown to be speculation")
    else:
        j.verdict = DEFECT
        beyond = f"; beyond what load moved AR itself in this run ({load.moved:.3f})" if load.moved is not None else ""
        j.reason = (f"speculation changed the output: {margins} = {moved:.3f} > {j.bound:.3f} ({where}): more than"
                    f" numerics can move{beyond}{swap}")
        if b.recording and c.recording:
            j.reproduce = f"spectui diff {shlex.quote(b.recording)} {shlex.quote(c.recording)}"
            j.reason += f"; reproduce: {j.reproduce}"
    return j


def _name(p: Parting, s: Side) -> str:
    return "baseline" if s is p.baseline else "candidate"


def _margins(j: Judgement) -> str:
    if j.moved is None:
        return "no margins recorded there"
    return f"margins {j.baseline_margin:.3f} (baseline) + {j.candidate_margin:.3f} (candidate)"


# -- partings of runs and recordings -----------------------------------------------------------


class RunOutput(msgspec.Struct, frozen=True, kw_only=True):
    """A greedy output as the judge reads it: tokens, each token's top-two facts, the prompt's
    length in tokens, the run's calibration, how it ended and where it is recorded."""

    tokens: Sequence[int]
    top: Sequence[TopTwo] = ()
    #: tokens before the output in the sequence; None: not recorded
    prompt: int | None = None
    calibration: BatchNoise | None = None
    greedy: bool = True
    ended: str = ""  # End.reason
    recording: str = ""

    @classmethod
    def of(cls, events: Sequence[Event], recording: str = "") -> RunOutput:
        """A recorded run's output (its events, the header first)."""
        header = events[0] if events and type(events[0]) is Header else None
        end = events[-1] if events and type(events[-1]) is End else None
        return cls(tokens=output_tokens(events)[0], top=output_top_two(events), prompt=prompt_length(header, end),
                   calibration=header.batch_noise if header is not None else None,
                   greedy=header is None or header.config.sampling.greedy, ended=end.reason if end is not None else "",
                   recording=recording)

    @classmethod
    def of_recording(cls, rec: Recording) -> RunOutput:
        """A recording's output, named by the path it was read from (a defect's reproduction)."""
        return cls.of(rec.events, "" if rec.path == Path() else str(rec.path))

    def side(self, index: int) -> Side:
        top = self.top[index] if index < len(self.top) else None
        if index >= len(self.tokens):
            return Side(ended=self.ended, recording=self.recording)
        return Side(token=self.tokens[index], margin=None if top is None else top[0] / 1000,
                    runner_up=None if top is None else top[1], recording=self.recording)


def prompt_length(header: Header | None, end: End | None) -> int | None:
    """How many tokens precede the output in the sequence: the prompt as the model saw it (its
    chat history templated in), from the header's tokens, else what a server reported
    (``usage.prompt_tokens``); None where neither is recorded."""
    if header is not None and header.prompt_tokens:
        return len(header.prompt_tokens)
    if end is not None and end.server is not None and end.server.prompt_tokens > 0:
        return end.server.prompt_tokens
    return None


def parting(baseline: RunOutput, candidate: RunOutput, *, index: int | None = None, load: Load | None = None) -> Parting:
    """Where two outputs part (``index``, or their first difference) and what each run knew there."""
    if index is None:
        n = common_tokens(baseline.tokens, candidate.tokens)
        index = None if n == len(baseline.tokens) == len(candidate.tokens) else n
    prompts = [x for x in (baseline.prompt, candidate.prompt) if x is not None]
    side = (lambda o: o.side(index)) if index is not None else (lambda o: Side(recording=o.recording))
    return Parting(index=index, prompt=max(prompts) if prompts else None, baseline=side(baseline), candidate=side(candidate),
                   calibrations=(baseline.calibration, candidate.calibration), load=load)


def judge_outputs(
    baseline: RunOutput, candidate: RunOutput, *, index: int | None = None, load: Load | None = None
) -> Judgement | None:
    """``judge`` on two outputs; None unless both are greedy (sampled runs are not judged by margins)."""
    if not (baseline.greedy and candidate.greedy):
        return None
    return judge(parting(baseline, candidate, index=index, load=load))
