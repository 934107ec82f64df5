"""Is a request under load still exact? Every greedy request against the same request's AR
output at one client (the reference), by the one judge every command uses
(``spectui.compare.divergence.judge``): the same two recordings get the same verdict here as
from ``spectui diff``, which a defect's reason names as its reproduction.

What the workload adds is what load alone did (``Load``): under load the server evaluates
several clients' tokens in one batch, and llama.cpp's evaluation is not batch-invariant. The
calibration of a server spectui starts measures that too (``BatchNoise.beside_by_depth``: a
request walked alone, then beside a neighbour's tokens, as the server's slots share a batch),
and a parting under load within twice that is ``BATCHED``. AR
itself may part from AR at one client (``BATCHED``). A speculative request that parts where its
AR twin under the same load parts, and follows that twin, moved with the load: ``BATCHED`` too.
And AR under load measures how far load moves the logits: where AR parted from itself at
margins adding up to X, or where, short of parting, the gap between its top two tokens moved by
X from AR at one client (the same two tokens, before any parting: a parting is that gap moved
past zero, by the two runs' margins added), a speculative parting under load (more than one
client, or an open loop) whose margins add up to no more than X, in the same run and family, is
what load moves too; at one client nothing is batched with the request, and the bound does not
apply. That bound grows as AR's levels run, so ``settle`` judges the run's defects again at its
end. (Partings alone were too little evidence: on document-qa at 2 clients AR parted at 0.191,
while its top-two gaps moved up to 0.426 where it kept the token, and a speculative parting of
0.247 was called a defect in four settings of llama-server's n-gram methods alike.)

Each recording carries the calibration it is judged against in its header (a server's
recordings get their family's, ``Judge.noises``, written by the workload as they are made), and
the parting's depth is its position in the sequence (the prompt, chat history included, and the
output before it), read from the recording as ``spectui diff`` reads it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from spectui.compare.divergence import DEFECT, IDENTICAL, Load, Parting, RunOutput, judge, parting
from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.metrics.same_text import common_tokens
from spectui.recording.reader import read_recording
from spectui.recording.schema import BatchNoise, Event, Header
from spectui.workload.plan import Setting
from spectui.workload.result import REFERENCE, UNJUDGED, LevelResult, RequestOutcome, WorkloadResult, count_verdicts


@dataclass
class Judge:
    """The references as they run (AR first at each level), and the verdict of every request."""

    #: the workload's folder: a request's recording is ``folder / outcome.recording``
    folder: Path | None = None
    #: (family, request) -> AR at one client, first pass
    reference: dict[tuple[str, int], RunOutput] = field(default_factory=dict)
    #: (family, request, (clients, rate, pass)) -> AR under that load: the twin
    twins: dict[tuple[str, int, tuple[int, float, int]], RunOutput] = field(default_factory=dict)
    #: family -> the calibrated batch-shape noise written into the headers of its recordings
    #: that carry none (a server's: the workload calibrates the same GGUF and threads)
    noises: dict[str, BatchNoise | None] = field(default_factory=dict)
    #: family -> the most load moved AR's logits (the sum of margins where it parted from itself,
    #: or a top-two gap's move where it did not), and where
    load_forks: dict[str, tuple[float, str]] = field(default_factory=dict)
    #: defects so far: (family, the outcome, its parting), judged again by ``settle``
    defects: list[tuple[str, RequestOutcome, Parting]] = field(default_factory=list)

    def __call__(self, s: Setting, out: RequestOutcome, events: Sequence[Event], at: tuple[int, float, int]) -> None:
        """Against the same request's AR output at one client (the reference), recorded on ``out``."""
        if not s.config.sampling.greedy:
            out.why = "sampled: judged by distribution, not token by token"
            return
        recording = str(self.folder / out.recording) if self.folder is not None and out.recording else out.recording
        mine = RunOutput.of(events, recording)
        key = (s.family, out.index)
        if s.ar:
            self.twins[(s.family, out.index, at)] = mine
        if key not in self.reference:
            if s.ar and at == (1, 0.0, 0):
                self.reference[key] = mine
                out.exact = REFERENCE
            return
        ref = self.reference[key]
        n = common_tokens(mine.tokens, ref.tokens)
        # what load moved AR explains only a request that ran under load: one client alone is batched with nothing
        under_load = at[0] > 1 or at[1] > 0
        if s.ar and under_load:
            self._moved(s.family, gap_moved(ref, mine, n), f"AR at {_load(at)}, request {out.index}, a top-two gap")
        if n == len(mine.tokens) == len(ref.tokens):
            out.exact = IDENTICAL
            return
        out.parted_at = n
        load = Load(ar_itself=f"AR at {_load(at)}" if s.ar else "", twin_parts_here=not s.ar and self._twin_parts(s, out, at, mine, n),
                    beside=under_load)
        p = parting(ref, mine, index=n, load=self._with_forks(s.family, load) if under_load else load)
        verdict = judge(p)
        out.exact, out.why = verdict.verdict, f"parts from AR at one client at token {n}: {verdict.reason}"
        if s.ar:
            self._moved(s.family, verdict.moved, f"AR at {_load(at)}, request {out.index}")
        if verdict.verdict == DEFECT and under_load:
            self.defects.append((s.family, out, p))

    def _moved(self, family: str, moved: float | None, where: str) -> None:
        if moved is not None and moved > self.load_forks.get(family, (-1.0, ""))[0]:
            self.load_forks[family] = (moved, where)

    def settle(self) -> None:
        """Each defect so far judged again against the most load moved AR in the whole run."""
        for family, out, p in self.defects:
            if out.exact == DEFECT and p.load is not None:
                verdict = judge(msgspec.structs.replace(p, load=self._with_forks(family, p.load)))
                out.exact, out.why = verdict.verdict, f"parts from AR at one client at token {out.parted_at}: {verdict.reason}"

    def _twin_parts(self, s: Setting, out: RequestOutcome, at: tuple[int, float, int], mine: RunOutput, n: int) -> bool:
        """AR under the same load parts from AR at one client at token ``n`` too, and this request follows it."""
        twin = self.twins.get((s.family, out.index, at))
        if twin is None or common_tokens(twin.tokens, self.reference[(s.family, out.index)].tokens) != n:
            return False
        follows = common_tokens(mine.tokens, twin.tokens)
        return follows > n or follows == len(mine.tokens) == len(twin.tokens)

    def _with_forks(self, family: str, load: Load) -> Load:
        fork = self.load_forks.get(family)
        return load if fork is None else msgspec.structs.replace(load, moved=fork[0], moved_by=fork[1])


def gap_moved(ref: RunOutput, mine: RunOutput, until: int) -> float | None:
    """The most the gap between the top two tokens moved from ``ref`` to ``mine`` over their
    first ``until`` tokens (where they agree), in logits, at positions where both recorded the
    same runner-up; None where none did (a server's drafted tokens come without margins)."""
    moves = [abs(a[0] - b[0]) / 1000 for a, b in zip(ref.top[:until], mine.top[:until]) if a is not None and b is not None and a[1] == b[1]]
    return max(moves, default=None)


def _load(at: tuple[int, float, int]) -> str:
    return f"{at[0] or at[1]:g}{'' if at[0] else '/s'}"


def rejudge(folder: str | os.PathLike[str], result: WorkloadResult) -> tuple[list[str], str]:
    """A finished workload judged again from its recordings by this version's judge, in the
    order it ran (the references apart first, then each family's AR: the references and twins
    exist before anything is judged against them), its levels' counts recounted. Returns what
    changed, a line a request ("setting at load, request i: old -> new"), and why nothing could
    be judged again ("" = it was): a recording that cannot be read, or a greedy family whose
    reference (AR at one client) the folder does not hold, as a reference run apart before its
    result kept it. Then nothing is changed: a partial re-judging would mix two judges in one table."""
    judge = Judge(folder=Path(folder))
    levels = result.references + sorted(result.levels, key=lambda lv: (lv.family, not lv.ar))  # stable: the run's own order otherwise
    held = {lv.family for lv in levels if lv.ar and (lv.clients, lv.rate, lv.pass_no) == (1, 0.0, 0)}
    judged = {lv.family for lv in result.levels if any(r.exact != UNJUDGED for r in lv.requests)}
    if judged - held:
        return [], f"no reference (AR at one client) of {', '.join(sorted(judged - held))} is in this folder's result"
    read: list[tuple[LevelResult, RequestOutcome, list[Event]]] = []
    missing = 0
    for lv in levels:
        for r in lv.requests:
            try:
                read.append((lv, r, read_recording(Path(folder) / r.recording).events))
            except (OSError, SpectuiError):
                missing += 1
    if missing:
        return [], f"{missing} recording(s) of this workload cannot be read"
    before = {id(r): r.exact for _, r, _ in read}
    for lv, r, events in read:
        header = events[0] if events and type(events[0]) is Header else None
        config = header.config if header is not None else RunConfig(mode="ar" if lv.ar else "spec")
        r.exact, r.why, r.parted_at = IDENTICAL, "", -1  # what the judge leaves alone is not a parting
        judge(Setting(lv.setting, lv.family, config), r, events, (lv.clients, lv.rate, lv.pass_no))
    judge.settle()
    for lv in result.levels:
        count_verdicts(lv)
    return [f"{lv.setting} at {_load((lv.clients, lv.rate, lv.pass_no))}, request {r.index}: {before[id(r)]} -> {r.exact}"
            for lv, r, _ in read if r.exact != before[id(r)]], ""
