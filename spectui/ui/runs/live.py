"""One session on screen as it decodes: a plain run (``SingleRun``) and a turn of the
conversation typed in the composer (``ChatTurn``). No Textual here."""

from __future__ import annotations

from spectui.config import RunConfig
from spectui.metrics.live import LiveRun
from spectui.recording.schema import End
from spectui.sessions.notes import SessionFinished
from spectui.sessions.runner import SessionRequest, SessionRunner
from spectui.ui.runs.base import Dashboard, RecordingNamer, RunKind
from spectui.ui.state import RunState


class SingleRun(RunKind):
    """One session of ``config`` on the engine thread, folded into ``live`` on the main screen.

    ``record_to`` names its recording (default: a new file in the recordings folder);
    ``runner`` is the engine service that runs it (default: the dashboard's)."""

    def __init__(
        self,
        dash: Dashboard,
        config: RunConfig,
        live: LiveRun | None = None,
        *,
        record_to: RecordingNamer | None = None,
        runner: SessionRunner | None = None,
    ) -> None:
        super().__init__(dash)
        self.config = config
        self.live = live if live is not None else LiveRun()
        self.record_to = record_to
        self.runner = runner

    def start(self) -> None:
        """Show the run and hand its session to the engine service."""
        dash = self.dash
        dash.show(self.live)
        dash.set_state(RunState.STARTING)
        run_id = self.new_run(self.live)
        request = SessionRequest(
            run_id=run_id, config=self.config, stop=self.stop_event, post=dash.host.post_note,
            record_to=dash.recording_namer(self.record_to),
        )
        (self.runner or dash.runner).submit(request)

    def on_end(self, end: End, live: LiveRun) -> None:
        self.dash.set_state(RunState.after(end.reason), end.error)
        self.dash.remember_models(live)

    def on_finished(self, note: SessionFinished, live: LiveRun) -> None:
        dash = self.dash
        self.drain(clear_wake=True)  # the run's last events, its End among them
        self.drop_run(note.run_id)
        if note.error:
            dash.failed(note.error)
        elif live.end is None:  # stopped before it began
            dash.set_state(RunState.IDLE)
        dash.baselines.note(live)
        self.ended(note, live)
        dash.touch()

    def ended(self, note: SessionFinished, live: LiveRun) -> None:
        """The run is over and its state set: what follows it (a pair's next run)."""


class ChatTurn(SingleRun):
    """The next turn of the conversation (``ChatState.begin`` made its config and ``live``):
    once it ends it joins the conversation; superseded, it is no turn."""

    def ended(self, note: SessionFinished, live: LiveRun) -> None:
        self.dash.chat.finished(live, note.path)

    def superseded(self) -> None:
        super().superseded()
        chat = self.dash.chat
        if chat.pending is not None and chat.pending.run is self.live:
            chat.abandon()
