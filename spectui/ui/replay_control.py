"""Replay on the dashboard: a recording (or a conversation's folder) played through the same
outbox, ``LiveRun`` and repaint as a live run, so the screen cannot tell them apart but by the
badge. A mixin of ``DashboardController``: it reads and sets the controller's run state
(``live``, ``run_id``, ``player``, the outboxes) as a live run does. No Textual here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from spectui.errors import SpectuiError
from spectui.metrics.live import LiveRun
from spectui.sessions.notes import Outbox, SessionEvents
from spectui.ui.chat import ShownTurn
from spectui.ui.replay import ReplayPlayer
from spectui.ui.state import RunState


class ReplayControl:
    """``DashboardController``'s recordings and replay (see the module docstring)."""

    def open_recording(
        self, path: str | Path, *, play: bool = False, speed: float = 1.0, paused: bool = False, now: float | None = None
    ) -> bool:
        """Show a recording through the same outbox, ``LiveRun`` and repaint as a live run:
        its final state at once, or (``play``) replayed at ``speed`` times its own pace. A
        conversation's folder shows its turns one after another, as they were chatted."""
        from spectui.recording.reader import read_recording
        from spectui.sessions.conversation import turn_paths

        try:
            paths = turn_paths(path) if Path(path).is_dir() else [Path(path)]
            recs = [(p, read_recording(p)) for p in paths]
        except SpectuiError as exc:
            self.host.notify(str(exc), title="cannot open recording", severity="error", timeout=8)
            return False
        except OSError as exc:
            self.host.notify(f"{path}: {exc.strerror or exc}", title="cannot open recording", severity="error", timeout=8)
            return False
        self.stop_run()
        self.chat.new()
        conversation = Path(path).is_dir()
        now = time.monotonic() if now is None else now
        if not play:  # every turn at its end, at once
            for p, rec in recs:
                self._start_replay(p, rec, play=False, speed=speed, paused=paused, now=now, turn=conversation)
        else:
            self._start_replay(*recs[0], play=True, speed=speed, paused=paused, now=now, turn=conversation)
            self._replay_turns = recs[1:]
        self.host.replay_mode_changed()
        return True

    def _start_replay(self, path: Path, rec, *, play: bool, speed: float, paused: bool, now: float, turn: bool) -> None:  # noqa: ANN001
        from spectui.recording.timeline import Timeline

        self.replay_path = str(path)
        self.replay_truncated = rec.truncated or not rec.complete
        self.player = ReplayPlayer(Timeline(rec.events), speed=speed, paused=paused, at_end=not play, now=now)
        self._set_state(RunState.REPLAY)
        if turn:  # the turn's user message above its reply (the rebuild gives it its run)
            self.chat.turns.append(ShownTurn(rec.header.config.prompt, self.live))
        self._rebuild_replay()
        if rec.truncated:
            self.host.notify(
                f"cut off at byte {rec.truncated_at}: every complete record is shown",
                title="truncated recording",
                severity="warning",
                timeout=6,
            )
        if not play:
            self.baselines.note(self.live)

    def _rebuild_replay(self) -> None:
        """Show the player's first ``shown`` events at once (open, seek, restart). A new run id
        and a new outbox drop what was handed out for the old position."""
        player = self.player
        assert player is not None
        self.run_id += 1
        previous, self.live = self.live, LiveRun()
        self._forget_envelopes()
        self._replay_outbox = outbox = Outbox()
        self._outboxes.clear()
        self._outboxes[self.run_id] = outbox
        if self.chat.turns and self.chat.turns[-1].run is previous:
            self.chat.turns[-1].run = self.live  # a replayed turn redrawn from its start
        outbox.extend(player.timeline.events[: player.shown])
        self.drain(clear_wake=False)
        self._touch()

    def _replay_events(self, indices: range) -> None:
        """Hand the player's due events over as the engine thread does: into the run's outbox,
        with a ``SessionEvents`` wake-up when none is pending."""
        assert self.player is not None
        outbox, events, run_id = self._replay_outbox, self.player.timeline.events, self.run_id
        for i in indices:
            if outbox.put(events[i]):
                self.host.post_note(SessionEvents(run_id, outbox))
        if indices:
            self._touch()

    def replay_tick(self, now: float) -> bool:
        """Hand out what is due by ``now``; False while nothing plays (the app's replay timer
        then sleeps until a replay key wakes it)."""
        player = self.player
        if player is None or player.paused:
            return False
        self._replay_events(player.tick(now))
        if player.finished and self._replay_turns:  # a conversation: its next turn
            path, rec = self._replay_turns.pop(0)
            self._start_replay(path, rec, play=True, speed=player.speed, paused=False, now=now, turn=True)
        return True

    def replay_control(self, control: Callable[[ReplayPlayer, float], object], now: float) -> bool:
        """Apply a replay key to the player and catch the screen up with it; True if it plays."""
        player = self.player
        if player is None:
            return False
        before = player.shown
        control(player, now)
        if player.shown < before:
            self._rebuild_replay()  # backwards (or play again from the start): redraw from zero
        else:
            self._replay_events(range(before, player.shown))
        self._touch()
        return not player.paused
