"""The dashboard's state and everything that changes it, without Textual.

``DashboardController`` keeps the settings of the next run, the run on screen (``live`` on the
main screen), the header's ``RunState``, the AR baselines, the envelope breaches, the
conversation typed in the composer (``spectui.ui.chat``) and the compare screen's pair
(``spectui.ui.side_by_side``, which also says which runs a live pair is). The runs
themselves belong to run kinds (``spectui.ui.runs``: a plain run, a chat turn, a sequential
or interleaved pair, a replay), one object per run started, each owning its run ids, outboxes and stop event. The controller hands out the run ids and
routes every note from the engine thread to the kind that took its id; a kind superseded by
the next run is forgotten with its ids, so what it still had in flight is dropped.

Whoever shows the controller (the Textual app; a test) is its ``ControllerHost``: it carries
the notes to the UI thread and shows notifications. Screens read it through a
``spectui.ui.view.DashboardView``, never change it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.metrics.envelope import Breach, EnvelopeMonitor, header_envelope
from spectui.metrics.live import LiveRun
from spectui.prompts import DEFAULT_PROMPT, PromptSpec
from spectui.recording.schema import Event, Header, MemorySample
from spectui.sessions.notes import Note
from spectui.sessions.open import EngineFactory
from spectui.sessions.runner import JobRequest, SessionRunner
from spectui.ui.backends import BackendCycle
from spectui.ui.chat import ChatState
from spectui.ui.labels import artifact_label
from spectui.ui.replay import ReplayPlayer
from spectui.ui.runs.base import ControllerHost, RecordingNamer, RunKind
from spectui.ui.runs.live import ChatTurn, SingleRun
from spectui.ui.runs.pairs import InterleavedPair, NodePair, QueuedRun, SequentialPair
from spectui.ui.runs.replay import Replay
from spectui.ui.side_by_side import SideBySide, ar_then_spec, node_runs, read_pair, turn_reruns
from spectui.ui.state import Baselines, RunState

__all__ = ["ControllerHost", "DashboardController", "MAX_TEMPERATURE", "TEMPERATURE_STEP"]

TEMPERATURE_STEP = 0.1
MAX_TEMPERATURE = 2.0


class DashboardController:
    """The runs of one dashboard (see the module docstring). Methods are called on the UI
    thread only; the engine thread reaches it through ``host.post_note``."""

    def __init__(
        self,
        config: RunConfig,
        host: ControllerHost,
        *,
        record: bool = True,
        recordings_dir: str | Path | None = None,
        engine_factory: EngineFactory | None = None,
        runner: SessionRunner | None = None,
        versus: NodePair | None = None,
    ) -> None:
        self.config = config if config.prompt else msgspec.structs.replace(config, prompt=DEFAULT_PROMPT)
        self.host = host
        self.record = record
        self._recordings_dir = Path(recordings_dir) if recordings_dir is not None else None
        self.runner = runner if runner is not None else SessionRunner(engine_factory)
        #: two nodes side by side (``compare --hosts``): ``v`` runs node A against node B
        self.versus = versus

        #: the run on the main screen (live or replayed), and the kind of run it belongs to
        self.live = LiveRun()
        self.current: RunKind | None = None
        #: the last run id handed out; each id's notes go to the kind that took it
        self.run_id = 0
        self._owners: dict[int, RunKind] = {}
        self.state = RunState.IDLE
        self.detail = "press r to run"
        #: something the header or the details show changed: the next repaint draws everything
        self.changed = True
        #: a settings change stopped the run; the app's debounce timer starts the next one
        self.restart_pending = False
        self.recording_path: Path | None = None  # the recording of the run on the main screen
        #: the compare screen's pair, the recordings behind it, how the next live pair runs
        self.side_by_side = SideBySide()
        self.baselines = Baselines()
        #: target spec -> (name, quant) once loaded: the header names a model before its next run
        self.models: dict[str, tuple[str, str]] = {}
        #: the declared envelope of each run on screen (by ``id`` of its LiveRun), and every
        #: breach so far: marked live where it happens, the same fold the verdicts use
        self.envelopes: dict[int, EnvelopeMonitor] = {}
        self.breaches: list[Breach] = []
        #: the conversation typed in the composer (``e``), its turns on screen
        self.chat = ChatState()
        #: what ``up`` in the empty composer brings back: the last message sent, or the
        #: prompt picked (``p``) since, else the prompt ``r`` runs
        self.last_prompt = self.config.prompt
        #: what ``x`` switches to next, and the drafting each kind of engine keeps
        self.backends = BackendCycle(self.config)

    @property
    def running(self) -> bool:
        return self.state.busy

    @property
    def pair_in_flight(self) -> bool:
        """An interleaved pair is running (its two sessions share one state)."""
        return isinstance(self.current, InterleavedPair) and self.current.in_flight

    @property
    def _replay(self) -> Replay | None:
        return self.current if isinstance(self.current, Replay) else None

    @property
    def player(self) -> ReplayPlayer | None:
        """The replay clock, while a recording is on screen."""
        replay = self._replay
        return replay.player if replay is not None else None

    @property
    def replay_path(self) -> str | None:
        """The recording on screen, if one is."""
        replay = self._replay
        return replay.path if replay is not None else None

    @property
    def replay_truncated(self) -> bool:
        replay = self._replay
        return replay is not None and replay.truncated

    @property
    def recordings_dir(self) -> Path:
        if self._recordings_dir is None:
            from spectui.recording.writer import recordings_dir

            self._recordings_dir = recordings_dir()
        return self._recordings_dir

    # -- what a run kind uses (``spectui.ui.runs.base.Dashboard``) ----------------------------

    def new_run_id(self, owner: RunKind) -> int:
        self.run_id += 1
        self._owners[self.run_id] = owner
        return self.run_id

    def forget_run(self, run_id: int) -> None:
        self._owners.pop(run_id, None)

    def show(self, live: LiveRun) -> None:
        self.live = live
        self.recording_path = None
        # keep the envelope folds of the runs still on screen only: a new run starts with no
        # breach marked (and a new ``LiveRun`` that reuses a freed one's ``id`` inherits none)
        kept = {id(run) for run in self.side_by_side.pair or ()} - {id(live)}
        self.envelopes = {key: m for key, m in self.envelopes.items() if key in kept}
        self.changed = True

    def touch(self) -> None:
        self.changed = True

    def set_state(self, state: RunState, detail: str = "") -> None:
        self.state, self.detail = state, detail
        self.changed = True

    def failed(self, error: str) -> None:
        self.set_state(RunState.ERROR, error)
        self.host.notify(error, title="run failed", severity="error", timeout=8)

    def fold(self, event: Event, live: LiveRun) -> None:
        live.feed(event)
        if type(event) is Header:
            self.envelopes[id(live)] = EnvelopeMonitor(header_envelope(event))
        elif type(event) is MemorySample and id(live) in self.envelopes:
            for b in self.envelopes[id(live)].add(event):  # each limit once, when first crossed
                self.breaches.append(b)
                title = "shared machine" if b.limit == "other load" else "envelope breach"
                self.host.notify(f"{b.text} at {b.t_s:.1f} s", title=title, severity="warning", timeout=10)

    def recorded(self, live: LiveRun, path: Path | None) -> None:
        self.side_by_side.recorded(live, path)
        if live is self.live:
            self.recording_path = path

    def remember_models(self, live: LiveRun) -> None:
        h = live.header
        if h is not None:
            self.models[h.config.target] = artifact_label(h.artifacts.target, h.config.target)

    def recording_namer(self, namer: RecordingNamer | None = None) -> RecordingNamer | None:
        if not self.record:
            return None
        if namer is not None:
            return namer
        from spectui.recording.writer import default_recording_path

        directory = self.recordings_dir
        return lambda cfg: default_recording_path(cfg, directory)

    def breaches_for(self, live: LiveRun) -> list[Breach]:
        """The breaches of ``live`` so far, in the order they happened (none before its header)."""
        monitor = self.envelopes.get(id(live))
        return monitor.f.breaches if monitor is not None else []

    # -- settings of the next run ---------------------------------------------------------

    def set_config(self, **changes: Any) -> bool:
        """Change the next run's settings. A run in progress stops and ``restart_pending`` is
        set: True when the caller should start it again (after its debounce)."""
        self.config = msgspec.structs.replace(self.config, **changes)
        self.touch()
        if self.running and self.replay_path is None:
            self.stop_run()
            self.restart_pending = True
            return True
        return False

    def toggle_mode(self) -> bool:
        return self.set_config(mode="ar" if self.config.mode == "spec" else "spec")

    def toggle_backend(self) -> bool | None:
        """The next engine that can run here (``spectui.ui.backends``: llama.cpp, MLX, then the
        runtimes); each one skipped is a notice of one line. None for a server, whose backend
        is the server's own."""
        if self.config.backend.name == "server":
            return None
        config, skipped = self.backends.next(self.config)
        for line in skipped:
            self.host.notify(line, title="backend", severity="warning", timeout=6)
        if config is None:
            return False
        return self.set_config(backend=config.backend, draft=config.draft)

    def step_k(self, delta: int) -> bool:
        d = self.config.draft
        stepped = d.stepped(delta)
        return stepped != d and self.set_config(draft=stepped)

    def step_temperature(self, delta: float) -> bool:
        s = self.config.sampling
        t = round(min(MAX_TEMPERATURE, max(0.0, s.temperature + delta)), 2)
        return t != s.temperature and self.set_config(sampling=msgspec.structs.replace(s, temperature=t))

    def use_prompt(self, spec: PromptSpec) -> bool:
        self.last_prompt = spec.text
        return self.set_config(
            prompt=spec.text,
            prompt_tier=spec.tier,
            prompt_name=spec.name,
            prompt_check=spec.check,
            max_tokens=spec.max_tokens,
        )

    # -- runs -----------------------------------------------------------------------------

    def _take_screen(self, kind: RunKind) -> None:
        """``kind``'s runs take the screen: the run of the kind before stops, and its notes
        (what it still had in flight) are dropped from here on."""
        self.restart_pending = False
        old, self.current = self.current, kind
        self._owners.clear()
        if old is not None:
            old.superseded()
            if isinstance(old, Replay):
                self.host.replay_mode_changed()  # the replay keys leave the footer

    def _start(self, kind: SingleRun | InterleavedPair) -> None:
        self._take_screen(kind)
        kind.start()

    def start_run(self, config: RunConfig | None = None) -> None:
        """Start a session with ``config`` (default: the current one), stopping the one in
        progress; its recording is a new file in the recordings folder."""
        self._start(SingleRun(self, config or self.config))

    def stop_run(self) -> None:
        self.restart_pending = False
        if self.current is not None and self.running:
            self.current.stop()
            self.state = RunState.STOPPING
            self.touch()

    def shutdown(self) -> None:
        """Stop the run; the engine thread ends the step in flight, closes the engine, exits."""
        if self.current is not None:
            self.current.stop()
        for runner in self.runners:
            runner.shutdown()

    def run_job(self, request: JobRequest) -> None:
        """Run a job (a function of the loaded engine: the tune screen's tune) on the dashboard's
        engine thread, on the engine its sessions use: a screen asks here, never the runner."""
        self.runner.submit(request)

    def engine_failed(self, error: BaseException | None) -> None:
        """The engine thread died (``SessionRunner`` catches every session's errors: this is
        the net under it)."""
        self.set_state(RunState.ERROR, f"the engine thread failed: {error}")
        self.host.notify(self.detail, severity="error", timeout=8)

    # -- a conversation -------------------------------------------------------------------

    def send_message(self, text: str, *, system: str, chat: bool) -> None:
        """The composer's message: the next turn of the conversation, or the first of a new
        one (also when the system prompt or the template changed: they begin every turn)."""
        conv = self.chat.conversation
        if conv is not None and (system != conv.system or chat != self.config.chat):
            self.chat.new()
            self.host.notify("a new conversation: the system prompt or the chat template changed", timeout=4)
        self.config = msgspec.structs.replace(self.config, system=system, chat=chat)
        self.last_prompt = text
        config, live = self.chat.begin(self.config, text, recordings=self.recordings_dir if self.record else None)
        conv = self.chat.conversation
        record_to = conv.record_path if conv is not None and conv.folder is not None else None
        self._start(ChatTurn(self, config, live, record_to=record_to))

    def new_conversation(self) -> None:
        self.stop_run()
        self.chat.new()
        self.touch()

    # -- notes from the engine thread -----------------------------------------------------

    def on_note(self, note: Note) -> None:
        """A note of a run: to the kind that took its run id; a superseded run's is dropped."""
        owner = self._owners.get(note.run_id)
        if owner is not None:
            owner.on_note(note)

    def drain(self, *, clear_wake: bool) -> None:
        """Fold every event the outboxes hold into its run. ``clear_wake``: let their producers
        post a wake-up again (once per repaint tick)."""
        for owner in dict.fromkeys(self._owners.values()):
            owner.drain(clear_wake=clear_wake)

    # -- side by side (``spectui.ui.side_by_side``) ----------------------------------------

    def run_compare(self) -> None:
        """AR then speculative, same prompt and settings, one after the other, or interleaved
        (``side_by_side.interleave``). On a finished turn of a conversation: that turn against
        the conversation re-run in the other mode up to it, into the conversation's folder."""
        turn = self.chat.turn_of(self.live)
        conv = self.chat.conversation
        if turn and conv is not None:
            pair, runs = turn_reruns(conv, turn, self.live)
            self.side_by_side.show(pair)
            self._start(SequentialPair(self, runs))
        elif self.versus is not None:
            self.run_pair(*node_runs(self.config, self.versus, self.runner))
        elif not self.side_by_side.interleave:
            base, cand = ar_then_spec(self.config)
            self.run_pair(QueuedRun(base, LiveRun()), QueuedRun(cand, LiveRun()))
        else:
            pair = (LiveRun(), LiveRun())
            self.side_by_side.show(pair)
            self._start(InterleavedPair(self, ar_then_spec(self.config), pair))

    def run_pair(self, baseline: QueuedRun, candidate: QueuedRun) -> None:
        """Two runs on the compare screen, one after the other; each runs on the engine
        service it names (``QueuedRun.runner``: two engine sources, two nodes say), else on
        the dashboard's."""
        self.side_by_side.show((baseline.live, candidate.live))
        self._start(SequentialPair(self, [baseline, candidate]))

    @property
    def runners(self) -> tuple[SessionRunner, ...]:
        """Every engine service this dashboard serves: its own, and node B's for ``versus``."""
        return (self.runner,) if self.versus is None else (self.runner, self.versus.runner)

    def toggle_interleave(self) -> None:
        self.side_by_side.interleave = not self.side_by_side.interleave
        self.touch()

    def open_compare(self, baseline: str | Path, candidate: str | Path) -> bool:
        """Two recordings side by side (baseline first); one that cannot be read is a notice."""
        try:
            pair = read_pair(baseline, candidate)
        except SpectuiError as exc:
            self.host.notify(str(exc), title="cannot open recording", severity="error", timeout=8)
            return False
        self.stop_run()  # a pair in flight stops there, half done
        self.side_by_side.show(pair, (str(baseline), str(candidate)))
        self.touch()
        return True

    # -- recordings and replay ------------------------------------------------------------

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
        replay = Replay(self, recs, conversation=Path(path).is_dir())
        self._take_screen(replay)
        replay.open(play=play, speed=speed, paused=paused, now=time.monotonic() if now is None else now)
        self.host.replay_mode_changed()
        return True

    def replay_tick(self, now: float) -> bool:
        """Hand out what is due by ``now``; False while nothing plays (the app's replay timer
        then sleeps until a replay key wakes it)."""
        replay = self._replay
        return replay is not None and replay.tick(now)

    def replay_control(self, control: Callable[[ReplayPlayer, float], object], now: float) -> bool:
        """Apply a replay key to the player and catch the screen up with it; True if it plays."""
        replay = self._replay
        return replay is not None and replay.control(control, now)
