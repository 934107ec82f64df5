"""What the compare screen shows, and which runs make a live pair, without Textual.

The compare screen holds a pair of runs, baseline first: two recordings read from files, or
two runs the dashboard starts. ``SideBySide`` keeps that pair, the files or the recordings
behind it (for ``d``, the diff), and how the next live pair runs (one after the other, or
interleaved block by block). The functions below say which runs a live pair is: AR then
speculative on the same settings, node A then node B, or a conversation's turn against the
conversation re-run in the other mode. Starting them is the controller's
(``spectui.ui.controller``): it owns the run ids and the screen.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.metrics.live import LiveRun
from spectui.sessions.conversation import Conversation
from spectui.sessions.runner import SessionRunner
from spectui.ui.runs.pairs import NodePair, QueuedRun

#: a pair on the compare screen: (baseline, candidate)
Pair = tuple[LiveRun, LiveRun]


class SideBySide:
    """The compare screen's pair (``pair``), the two recordings it was read from (``files``;
    None for a live pair), the recording of each live run as it is written, and whether the
    next live AR/speculative pair runs interleaved (``interleave``)."""

    def __init__(self) -> None:
        self.pair: Pair | None = None
        self.files: tuple[str, str] | None = None
        self.interleave = False
        self._recorded: dict[int, Path | None] = {}  # id(LiveRun) -> its recording

    def show(self, pair: Pair, files: tuple[str, str] | None = None) -> None:
        """``pair`` takes the screen: read from ``files``, or live (its recordings are known as
        they are written)."""
        self.pair, self.files = pair, files

    def recorded(self, live: LiveRun, path: Path | None) -> None:
        self._recorded[id(live)] = path

    def paths(self) -> tuple[str, str] | None:
        """The recordings behind the pair: its files, or a finished live pair's recordings."""
        if self.files is not None:
            return self.files
        if self.pair is None:
            return None
        paths = tuple(self._recorded.get(id(live)) for live in self.pair)
        return (str(paths[0]), str(paths[1])) if all(paths) and all(live.end for live in self.pair) else None


def read_pair(baseline: str | Path, candidate: str | Path) -> Pair:
    """Two recordings as a pair, baseline first; one that cannot be read is a ``SpectuiError``
    that names it."""
    from spectui.recording.reader import read_recording

    runs = []
    for path in (baseline, candidate):
        try:
            runs.append(LiveRun.from_events(read_recording(path).events))
        except (SpectuiError, OSError) as exc:
            raise SpectuiError(f"{path}: {exc}") from exc
    return runs[0], runs[1]


def ar_then_spec(config: RunConfig) -> tuple[RunConfig, RunConfig]:
    """The same settings in AR, then speculative."""
    return msgspec.structs.replace(config, mode="ar"), msgspec.structs.replace(config, mode="spec")


def node_runs(config: RunConfig, versus: NodePair, runner: SessionRunner) -> tuple[QueuedRun, QueuedRun]:
    """The same settings on node A (the dashboard's ``runner``), then on node B (never both at
    once: two nodes may share a link, or be one machine, and would measure each other's load)."""
    namers = versus.record_to or (None, None)
    a, b = (QueuedRun(config, LiveRun(), namer, node) for namer, node in zip(namers, (runner, versus.runner)))
    return a, b


def turn_reruns(conv: Conversation, turn: int, shown: LiveRun) -> tuple[Pair, list[QueuedRun]]:
    """Turn ``turn`` of ``conv`` (``shown``, on the main screen) against the conversation re-run
    in the other mode up to it, into the conversation's folder: the pair (AR first) and the runs
    to start (the earlier turns are re-run too, not shown: see ``Conversation.rerun``)."""
    reruns = conv.rerun(turn)
    rerun = LiveRun()
    pair = (rerun, shown) if reruns[-1].mode == "ar" else (shown, rerun)
    record_to = conv.record_path if conv.folder is not None else None
    runs = [QueuedRun(c, LiveRun(), record_to) for c in reruns[:-1]] + [QueuedRun(reruns[-1], rerun, record_to)]
    return pair, runs
