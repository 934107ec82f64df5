"""Replay on the dashboard: a recording (or a conversation's folder) played through the same
outbox, ``LiveRun`` and repaint as a live run, so the screen cannot tell them apart but by the
badge. The clock is ``spectui.ui.replay.ReplayPlayer``. No Textual here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from spectui.metrics.live import LiveRun
from spectui.recording.reader import Recording
from spectui.sessions.notes import Outbox, SessionEvents, SessionFinished
from spectui.ui.chat import ShownTurn
from spectui.ui.replay import ReplayPlayer
from spectui.ui.runs.base import Dashboard, RunKind
from spectui.ui.state import RunState


class Replay(RunKind):
    """Recordings shown one after another: each at its end at once, or (``play``) replayed at
    ``speed`` times its own pace. ``conversation``: they are the turns of one conversation,
    each shown under its user message as it was chatted."""

    def __init__(self, dash: Dashboard, recordings: Sequence[tuple[Path, Recording]], *, conversation: bool) -> None:
        super().__init__(dash)
        self.recordings = list(recordings)
        self.conversation = conversation
        self.path: str | None = None  # the recording on screen
        self.truncated = False  # ... is cut off, or has no end record
        self.player: ReplayPlayer | None = None
        self.turns_left: list[tuple[Path, Recording]] = []  # a conversation's turns still to play
        self.run_id = 0  # the run id of the position on screen
        self.outbox = Outbox()

    def open(self, *, play: bool, speed: float, paused: bool, now: float) -> None:
        if not play:  # every turn at its end, at once
            for path, rec in self.recordings:
                self._start(path, rec, play=False, speed=speed, paused=paused, now=now)
        else:
            self._start(*self.recordings[0], play=True, speed=speed, paused=paused, now=now)
            self.turns_left = self.recordings[1:]

    def _start(self, path: Path, rec: Recording, *, play: bool, speed: float, paused: bool, now: float) -> None:
        from spectui.recording.timeline import Timeline

        dash = self.dash
        self.path = str(path)
        self.truncated = rec.truncated or not rec.complete
        self.player = ReplayPlayer(Timeline(rec.events), speed=speed, paused=paused, at_end=not play, now=now)
        dash.set_state(RunState.REPLAY)
        if self.conversation:  # the turn's user message above its reply (the rebuild gives it its run)
            dash.chat.turns.append(ShownTurn(rec.header.config.prompt, dash.live))
        self._rebuild()
        if rec.truncated:
            dash.host.notify(
                f"cut off at byte {rec.truncated_at}: every complete record is shown",
                title="truncated recording",
                severity="warning",
                timeout=6,
            )
        if not play:
            dash.baselines.note(dash.live)

    def _rebuild(self) -> None:
        """Show the player's first ``shown`` events at once (open, seek, restart). A new run id
        and a new outbox drop what was handed out for the old position."""
        player, dash = self.player, self.dash
        assert player is not None
        for run_id in list(self.runs):
            self.drop_run(run_id)
        previous, live = dash.live, LiveRun()
        dash.show(live)
        self.run_id = self.new_run(live)
        self.outbox = self.outboxes[self.run_id] = Outbox()
        turns = dash.chat.turns
        if turns and turns[-1].run is previous:
            turns[-1].run = live  # a replayed turn redrawn from its start
        self.outbox.extend(player.timeline.events[: player.shown])
        self.drain(clear_wake=False)
        dash.touch()

    def _hand_out(self, indices: range) -> None:
        """Hand the player's due events over as the engine thread does: into the run's outbox,
        with a ``SessionEvents`` wake-up when none is pending."""
        assert self.player is not None
        outbox, events, run_id = self.outbox, self.player.timeline.events, self.run_id
        for i in indices:
            if outbox.put(events[i]):
                self.dash.host.post_note(SessionEvents(run_id, outbox))
        if indices:
            self.dash.touch()

    def tick(self, now: float) -> bool:
        """Hand out what is due by ``now``; False while nothing plays."""
        player = self.player
        if player is None or player.paused:
            return False
        self._hand_out(player.tick(now))
        if player.finished and self.turns_left:  # a conversation: its next turn
            path, rec = self.turns_left.pop(0)
            self._start(path, rec, play=True, speed=player.speed, paused=False, now=now)
        return True

    def control(self, control: Callable[[ReplayPlayer, float], object], now: float) -> bool:
        """Apply a replay key to the player and catch the screen up with it; True if it plays."""
        player = self.player
        if player is None:
            return False
        before = player.shown
        control(player, now)
        if player.shown < before:
            self._rebuild()  # backwards (or play again from the start): redraw from zero
        else:
            self._hand_out(range(before, player.shown))
        self.dash.touch()
        return not player.paused

    def on_finished(self, note: SessionFinished, live: LiveRun) -> None:
        """A replay runs no session: nothing finishes on the engine thread."""
