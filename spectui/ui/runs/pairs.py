"""Two runs to compare, live: one after the other (``SequentialPair``), or interleaved block by
block on two contexts (``InterleavedPair``). No Textual here.

Never both at once on one machine: they would share the cores and neither number would be
true. A ``QueuedRun`` may name its own engine service (``runner``), so a sequential pair can
also set two engine sources side by side (two nodes, say); the interleaved pair runs on one
engine service, whose second engine gives the second run its own context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spectui.config import RunConfig
from spectui.metrics.live import LiveRun
from spectui.sessions.notes import SessionFinished
from spectui.sessions.runner import PairRequest, SessionRequest, SessionRunner
from spectui.ui.runs.base import Dashboard, RecordingNamer, RunKind
from spectui.ui.runs.live import SingleRun
from spectui.ui.state import RunState


@dataclass
class QueuedRun:
    """One run of a ``SequentialPair``: its config, the ``LiveRun`` it folds into, what names
    its recording (None: a new file in the recordings folder) and the engine service that runs
    it (None: the dashboard's)."""

    config: RunConfig
    live: LiveRun
    record_to: RecordingNamer | None = None
    runner: SessionRunner | None = None


@dataclass
class NodePair:
    """``spectui compare --hosts A,B`` in the dashboard: ``v`` (``r`` on the compare screen) runs the dashboard's settings on
    node A (the dashboard's own engine service) and then on node B (``runner``, its own engine
    service), live and side by side. ``record_to`` names each node's recordings (None: new
    files in the recordings folder)."""

    runner: SessionRunner
    record_to: tuple[RecordingNamer, RecordingNamer] | None = None


class SequentialPair(SingleRun):
    """Runs one after the other, each shown on the main screen while it runs; the next starts
    when one is done (a stopped or failed one ends the series, half done). AR then speculative;
    for a conversation's turn, the earlier turns re-run first (``Conversation.rerun``)."""

    def __init__(self, dash: Dashboard, runs: Sequence[QueuedRun]) -> None:
        first, *rest = runs
        super().__init__(dash, first.config, first.live, record_to=first.record_to, runner=first.runner)
        self.queue = list(rest)

    def ended(self, note: SessionFinished, live: LiveRun) -> None:
        if not self.queue or self.dash.state is not RunState.DONE or live.end is None:
            self.queue.clear()  # stopped or failed: the pair stays half done
            return
        nxt = self.queue.pop(0)
        self.config, self.live, self.record_to, self.runner = nxt.config, nxt.live, nxt.record_to, nxt.runner
        self.start()

    def stop(self) -> None:
        self.queue.clear()
        super().stop()


class InterleavedPair(RunKind):
    """Both runs at once, one block each in turn on two engines (``PairRequest``): the
    machine's load drifts alike for both, and each clock leaves out the other's time. The
    first run is the one on the main screen; the pair is done when both are."""

    def __init__(self, dash: Dashboard, configs: tuple[RunConfig, RunConfig], pair: tuple[LiveRun, LiveRun],
                 *, runner: SessionRunner | None = None) -> None:
        super().__init__(dash)
        self.configs = configs
        self.pair = pair
        self.runner = runner

    @property
    def in_flight(self) -> bool:
        """A session of the pair has not finished yet."""
        return bool(self.runs)

    def start(self) -> None:
        dash = self.dash
        dash.show(self.pair[0])
        dash.set_state(RunState.STARTING)
        record_to = dash.recording_namer()

        def request(config: RunConfig, live: LiveRun) -> SessionRequest:
            return SessionRequest(run_id=self.new_run(live), config=config, stop=self.stop_event, post=dash.host.post_note,
                                  record_to=record_to)

        first, second = (request(config, live) for config, live in zip(self.configs, self.pair))
        (self.runner or dash.runner).submit(PairRequest(requests=(first, second)))

    def on_finished(self, note: SessionFinished, live: LiveRun) -> None:
        dash = self.dash
        self.drain(clear_wake=True)
        if note.error:
            dash.failed(note.error)
        self.drop_run(note.run_id)
        dash.baselines.note(live)
        if not self.runs and dash.state is not RunState.ERROR:
            ends = [run.end for run in self.pair if run.end is not None]
            stopped = any(e.reason == "interrupted" for e in ends) or len(ends) < 2
            dash.set_state(RunState.INTERRUPTED if stopped else RunState.DONE)
        dash.touch()
