"""The dashboard's state and everything that changes it, without Textual.

``DashboardController`` owns the runs: it submits sessions to the engine thread
(``spectui.sessions.runner.SessionRunner``), routes the notes that come back to the run they
belong to (the live run, the two runs of a live comparison, or the two interleaved sessions of
a pair) by ``run_id``, folds each run's events into a ``LiveRun``, queues the second run of a
comparison behind the first, keeps finished AR runs as baselines, keeps the conversation typed in the composer
(``spectui.ui.chat``), and plays recordings back (``spectui.ui.replay_control``).
Its ``state`` is a ``RunState``.

Data flow, per token: the engine thread appends each event to its session's ``Outbox`` and
posts a ``SessionEvents`` wake-up only when none is pending. ``drain`` folds what the outboxes
hold (cheap, no drawing); the app calls it on the wake-up and on every repaint tick, so a
200 tok/s run costs about 12 wake-ups a second, not 200. A replay hands its due events to an
``Outbox`` in the same way from the UI thread, so one folding path serves both: the screen
cannot tell a replay from a live run except by the badge.

Whoever shows the controller (the Textual app; a test) is its ``ControllerHost``: it carries
the notes to the UI thread and shows notifications. Screens read it through a
``spectui.ui.view.DashboardView``, never change it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import msgspec

from spectui.config import MAX_DRAFT_LENGTH, RunConfig
from spectui.engine.noise import CALIBRATION_NOTICE
from spectui.errors import SpectuiError
from spectui.metrics.envelope import Breach, EnvelopeMonitor, header_envelope
from spectui.metrics.live import LiveRun
from spectui.prompts import DEFAULT_PROMPT, PromptSpec
from spectui.recording.schema import End, Event, Header, MemorySample
from spectui.sessions.notes import Note, Outbox, SessionEvents, SessionFinished, SessionStatus
from spectui.sessions.open import EngineFactory
from spectui.sessions.runner import CALIBRATING, PairRequest, SessionRequest, SessionRunner
from spectui.ui.chat import ChatState
from spectui.ui.labels import artifact_label
from spectui.ui.replay import ReplayPlayer
from spectui.ui.replay_control import ReplayControl
from spectui.ui.state import Baselines, RunState

TEMPERATURE_STEP = 0.1
MAX_TEMPERATURE = 2.0


class ControllerHost(Protocol):
    """What the controller needs from whoever shows it."""

    def post_note(self, note: Note) -> None:
        """Hand ``note`` to the UI thread, which passes it to ``DashboardController.on_note``.
        Called on the engine thread: must be thread-safe and must never block."""

    def notify(self, message: str, *, title: str = "", severity: Any = "information", timeout: float | None = None) -> None:
        """Tell the user something that does not fit the header (a failed run, a bad file)."""

    def replay_mode_changed(self) -> None:
        """A replay started or ended: the replay keys come or go."""


class DashboardController(ReplayControl):
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
    ) -> None:
        self.config = config if config.prompt else msgspec.structs.replace(config, prompt=DEFAULT_PROMPT)
        self.host = host
        self.record = record
        self._recordings_dir = Path(recordings_dir) if recordings_dir is not None else None
        self.runner = runner if runner is not None else SessionRunner(engine_factory)

        self.live = LiveRun()
        self.run_id = 0
        self.state = RunState.IDLE
        self.detail = "press r to run"
        #: something the header or the details show changed: the next repaint draws everything
        self.changed = True
        #: a settings change stopped the run; the app's debounce timer starts the next one
        self.restart_pending = False
        self.recording_path: Path | None = None
        self.replay_path: str | None = None
        self.replay_truncated = False
        self.player: ReplayPlayer | None = None
        self.compare: tuple[LiveRun, LiveRun] | None = None  # (baseline, candidate)
        self.compare_files: tuple[str, str] | None = None
        self.compare_interleave = False
        #: the runs of a comparison still to start: (config, run, recording namer or None)
        self._compare_queue: list[tuple[RunConfig, LiveRun, Any]] = []
        self._pair: dict[int, LiveRun] = {}  # run id -> run, for an interleaved pair in flight
        self._outboxes: dict[int, Outbox] = {}  # run id -> its events in flight to the UI
        self._replay_outbox = Outbox()
        self._recorded: dict[int, Path | None] = {}  # id(LiveRun) -> its recording
        self._stop: threading.Event | None = None
        self.baselines = Baselines()
        #: target spec -> (name, quant) once loaded: the header names a model before its next run
        self.models: dict[str, tuple[str, str]] = {}
        #: the declared envelope of each run on screen (by ``id`` of its LiveRun), and every
        #: breach so far: marked live where it happens, the same fold the verdicts use
        self.envelopes: dict[int, EnvelopeMonitor] = {}
        self.breaches: list[Breach] = []
        #: the conversation typed in the composer (``e``), its turns on screen
        self.chat = ChatState()
        self._replay_turns: list[tuple[Path, Any]] = []  # a replayed conversation's turns still to play (path, Recording)

    @property
    def running(self) -> bool:
        return self.state.busy

    @property
    def pair_in_flight(self) -> bool:
        """An interleaved pair is running (its two sessions share one state)."""
        return bool(self._pair)

    @property
    def recordings_dir(self) -> Path:
        if self._recordings_dir is None:
            from spectui.recording.writer import recordings_dir

            self._recordings_dir = recordings_dir()
        return self._recordings_dir

    def _touch(self) -> None:
        self.changed = True

    def _set_state(self, state: RunState, detail: str = "") -> None:
        self.state, self.detail = state, detail
        self.changed = True

    # -- settings of the next run ---------------------------------------------------------

    def set_config(self, **changes: Any) -> bool:
        """Change the next run's settings. A run in progress stops and ``restart_pending`` is
        set: True when the caller should start it again (after its debounce)."""
        self.config = msgspec.structs.replace(self.config, **changes)
        self._touch()
        if self.running and self.replay_path is None:
            self.stop_run()
            self.restart_pending = True
            return True
        return False

    def toggle_mode(self) -> bool:
        return self.set_config(mode="ar" if self.config.mode == "spec" else "spec")

    def toggle_backend(self) -> bool | None:
        """llama.cpp <-> MLX; None for a server, whose backend is the server's own."""
        b = self.config.backend
        if b.name == "server":
            return None
        return self.set_config(backend=msgspec.structs.replace(b, name="mlx" if b.name == "llamacpp" else "llamacpp"))

    def step_k(self, delta: int) -> bool:
        d = self.config.draft
        lo, hi = (d.k_min, d.k_max) if d.adaptive else (1, MAX_DRAFT_LENGTH)
        k = min(hi, max(lo, d.k + delta))
        return k != d.k and self.set_config(draft=msgspec.structs.replace(d, k=k))

    def step_temperature(self, delta: float) -> bool:
        s = self.config.sampling
        t = round(min(MAX_TEMPERATURE, max(0.0, s.temperature + delta)), 2)
        return t != s.temperature and self.set_config(sampling=msgspec.structs.replace(s, temperature=t))

    def use_prompt(self, spec: PromptSpec) -> bool:
        return self.set_config(
            prompt=spec.text,
            prompt_tier=spec.tier,
            prompt_name=spec.name,
            prompt_check=spec.check,
            max_tokens=spec.max_tokens,
        )

    # -- sessions -------------------------------------------------------------------------

    def _record_path_factory(self) -> Callable[[RunConfig], Path] | None:
        if not self.record:
            return None
        from spectui.recording.writer import default_recording_path

        directory = self.recordings_dir
        return lambda cfg: default_recording_path(cfg, directory)

    def _request(self, run_id: int, config: RunConfig, stop: threading.Event, record_to) -> SessionRequest:  # noqa: ANN001
        return SessionRequest(run_id=run_id, config=config, stop=stop, post=self.host.post_note, record_to=record_to)

    def start_run(self, config: RunConfig | None = None, live: LiveRun | None = None, record_to=None) -> None:  # noqa: ANN001
        """Start a session with ``config`` (default: the current one), stopping the one in
        progress; its events fold into ``live`` (default: a new ``LiveRun``) and its recording
        is named by ``record_to`` (default: a new file in the recordings folder)."""
        if live is None:
            self._compare_queue.clear()  # a plain run ends a live comparison
        stop = self._begin_run(live)
        if record_to is None or not self.record:
            record_to = self._record_path_factory()
        self.runner.submit(self._request(self.run_id, config or self.config, stop, record_to))

    # -- a conversation -------------------------------------------------------------------

    def send_message(self, text: str, *, system: str, chat: bool) -> None:
        """The composer's message: the next turn of the conversation, or the first of a new
        one (also when the system prompt or the template changed: they begin every turn)."""
        conv = self.chat.conversation
        if conv is not None and (system != conv.system or chat != self.config.chat):
            self.chat.new()
            self.host.notify("a new conversation: the system prompt or the chat template changed", timeout=4)
        self.config = msgspec.structs.replace(self.config, system=system, chat=chat)
        config, live = self.chat.begin(self.config, text, recordings=self.recordings_dir if self.record else None)
        conv = self.chat.conversation
        self.start_run(config, live, record_to=conv.record_path if conv is not None and conv.folder is not None else None)

    def new_conversation(self) -> None:
        self.stop_run()
        self.chat.new()
        self._touch()

    def _begin_run(self, live: LiveRun | None) -> threading.Event:
        """Stop what runs, take a new run id, show ``live``: the common start of every run."""
        self.restart_pending = False
        if self._stop is not None:
            self._stop.set()
        self.run_id += 1
        self._stop = stop = threading.Event()
        self._outboxes.clear()
        self._pair = {}
        if self.chat.pending is not None and self.chat.pending.run is not live:
            self.chat.abandon()  # a turn superseded by another run is no turn
        self.live = live if live is not None else LiveRun()
        self._replay_turns = []
        if self.player is not None:
            self.player = None
            self.host.replay_mode_changed()
        self.replay_path = None
        self.recording_path = None
        self._forget_envelopes()
        self._set_state(RunState.STARTING)
        return stop

    def _forget_envelopes(self) -> None:
        """Keep the envelope folds of the runs still on screen only: a new run starts with no
        breach marked (and a new ``LiveRun`` that reuses a freed one's ``id`` inherits none)."""
        kept = {id(run) for run in self.compare or ()} - {id(self.live)}  # self.live is fresh
        self.envelopes = {key: m for key, m in self.envelopes.items() if key in kept}

    def breaches_for(self, live: LiveRun) -> list[Breach]:
        """The breaches of ``live`` so far, in the order they happened (none before its header)."""
        monitor = self.envelopes.get(id(live))
        return monitor.f.breaches if monitor is not None else []

    def stop_run(self) -> None:
        self.restart_pending = False
        if self._stop is not None and self.running:
            self._stop.set()
            self.state = RunState.STOPPING
            self._touch()

    def shutdown(self) -> None:
        """Stop the run; the engine thread ends the step in flight, closes the engine, exits."""
        if self._stop is not None:
            self._stop.set()
        self.runner.shutdown()

    # -- notes from the engine thread -----------------------------------------------------

    def on_note(self, note: Note) -> None:
        kind = type(note)
        if kind is SessionEvents:
            self.on_events(note)
        elif kind is SessionStatus:
            self.on_status(note)
        else:
            self.on_finished(note)

    def _run_for(self, run_id: int) -> LiveRun | None:
        """The run a session's notes fold into; None for a superseded session."""
        if self._pair:
            return self._pair.get(run_id)
        return self.live if run_id == self.run_id else None

    def on_events(self, note: SessionEvents) -> None:
        if self._run_for(note.run_id) is not None:
            self._outboxes[note.run_id] = note.outbox
            self.drain(clear_wake=False)  # the next tick clears it: one wake per tick

    def drain(self, *, clear_wake: bool) -> None:
        """Fold every event the outboxes hold into its run. ``clear_wake``: let their producers
        post a wake-up again (once per repaint tick)."""
        for run_id, outbox in self._outboxes.items():
            live = self._run_for(run_id)
            while outbox and live is not None:
                self._fold(outbox.popleft(), live)
            if clear_wake:
                outbox.wake_pending = False

    def _fold(self, ev: Event, live: LiveRun) -> None:
        live.feed(ev)
        kind = type(ev)
        if kind is Header:
            self.envelopes[id(live)] = EnvelopeMonitor(header_envelope(ev))
        elif kind is MemorySample and id(live) in self.envelopes:
            for b in self.envelopes[id(live)].add(ev):  # each limit once, when first crossed
                self.breaches.append(b)
                title = "shared machine" if b.limit == "other load" else "envelope breach"
                self.host.notify(f"{b.text} at {b.t_s:.1f} s", title=title, severity="warning", timeout=10)
        # one run's end is the app's (an interleaved pair ends with its last session)
        if type(ev) is End and self.player is None and not self._pair:
            self.state = RunState.after(ev.reason)
            self.detail = ev.error
            h = self.live.header
            if h is not None:
                self.models[h.config.target] = artifact_label(h.artifacts.target, h.config.target)

    def on_status(self, note: SessionStatus) -> None:
        live = self._run_for(note.run_id)
        if live is None:
            return
        if note.state == "running":
            path = Path(note.detail) if note.detail else None
            self._recorded[id(live)] = path
            if live is self.live:
                self.recording_path = path
            self._set_state(RunState.RUNNING)
        else:
            self._set_state(RunState(note.state), note.detail)
            if note.detail == CALIBRATING:  # the header says what and how long; this says why
                self.host.notify(CALIBRATION_NOTICE.removeprefix("spectui: "), title="calibrating", timeout=10)

    def _failed(self, error: str, title: str = "run failed") -> None:
        self._set_state(RunState.ERROR, error)
        self.host.notify(error, title=title, severity="error", timeout=8)

    def on_finished(self, note: SessionFinished) -> None:
        if note.run_id in self._pair:
            self._pair_finished(note)
            return
        if note.run_id != self.run_id:
            return
        self.drain(clear_wake=True)  # the run's last events, its End among them
        self._outboxes.pop(note.run_id, None)
        if note.error:
            self._failed(note.error)
        elif self.live.end is None:  # stopped before it began
            self._set_state(RunState.IDLE)
        self.baselines.note(self.live)
        self.chat.finished(self.live, note.path)
        if self._compare_queue and self.state in (RunState.DONE, RunState.INTERRUPTED) and self.live.end is not None:
            if self.state is RunState.DONE:
                self._start_next_compare()
            else:
                self._compare_queue.clear()  # stopped: the pair stays half-done
        self._touch()

    def engine_failed(self, error: BaseException | None) -> None:
        """The engine thread died (``SessionRunner`` catches every session's errors: this is
        the net under it)."""
        self._set_state(RunState.ERROR, f"the engine thread failed: {error}")
        self.host.notify(self.detail, severity="error", timeout=8)

    # -- side by side ---------------------------------------------------------------------

    def run_compare(self) -> None:
        """AR then speculative, same prompt and settings, one after the other (never at once:
        they would share the cores and neither number would be true), or interleaved. On a
        finished turn of a conversation: that turn against the conversation re-run in the
        other mode up to it (``Conversation.rerun``), into the conversation's folder."""
        if self.chat.turn_of(self.live):
            self._compare_turn(self.chat.turn_of(self.live))
            return
        base = msgspec.structs.replace(self.config, mode="ar")
        cand = msgspec.structs.replace(self.config, mode="spec")
        self.compare = (LiveRun(), LiveRun())
        self.compare_files = None
        if self.compare_interleave:
            self._start_interleaved(base, cand)
            return
        self._compare_queue[:] = [(base, self.compare[0], None), (cand, self.compare[1], None)]
        self._start_next_compare()

    def _compare_turn(self, turn: int) -> None:
        conv = self.chat.conversation
        assert conv is not None
        shown = self.live
        reruns = conv.rerun(turn)
        rerun = LiveRun()
        self.compare = (rerun, shown) if reruns[-1].mode == "ar" else (shown, rerun)
        self.compare_files = None
        record_to = conv.record_path if conv.folder is not None else None
        # the earlier turns are re-run too (their runs are not shown): see Conversation.rerun
        self._compare_queue[:] = [(c, LiveRun(), record_to) for c in reruns[:-1]] + [(reruns[-1], rerun, record_to)]
        self._start_next_compare()

    def _start_next_compare(self) -> None:
        config, live, record_to = self._compare_queue.pop(0)
        self.start_run(config, live, record_to)

    def toggle_interleave(self) -> None:
        self.compare_interleave = not self.compare_interleave
        self._touch()

    def _start_interleaved(self, base: RunConfig, cand: RunConfig) -> None:
        """Both runs at once, one block each in turn on two engines (``PairRequest``): the
        machine's load drifts alike for both, and each clock leaves out the other's time."""
        assert self.compare is not None
        self._compare_queue.clear()
        stop = self._begin_run(self.compare[0])
        first = self.run_id
        self.run_id += 1
        record_to = self._record_path_factory()
        self._pair = {first: self.compare[0], self.run_id: self.compare[1]}
        self.runner.submit(
            PairRequest(
                requests=(self._request(first, base, stop, record_to), self._request(self.run_id, cand, stop, record_to))
            )
        )

    def _pair_finished(self, note: SessionFinished) -> None:
        live = self._pair[note.run_id]
        self.drain(clear_wake=True)
        if note.error:
            self._failed(note.error)
        self._outboxes.pop(note.run_id, None)
        del self._pair[note.run_id]
        self.baselines.note(live)
        if not self._pair and self.state is not RunState.ERROR:
            ends = [run.end for run in self.compare or () if run.end is not None]
            stopped = any(e.reason == "interrupted" for e in ends) or len(ends) < 2
            self._set_state(RunState.INTERRUPTED if stopped else RunState.DONE)
        self._touch()

    def open_compare(self, baseline: str | Path, candidate: str | Path) -> bool:
        """Two recordings side by side (baseline first)."""
        from spectui.recording.reader import read_recording

        runs = []
        for path in (baseline, candidate):
            try:
                runs.append(LiveRun.from_events(read_recording(path).events))
            except (SpectuiError, OSError) as exc:
                self.host.notify(f"{path}: {exc}", title="cannot open recording", severity="error", timeout=8)
                return False
        self.stop_run()
        self._compare_queue.clear()
        self.compare = (runs[0], runs[1])
        self.compare_files = (str(baseline), str(candidate))
        self._touch()
        return True

    def compare_paths(self) -> tuple[str, str] | None:
        """The recordings behind the compared pair (files, or the live pair's recordings)."""
        if self.compare_files is not None:
            return self.compare_files
        if self.compare is None:
            return None
        paths = tuple(self._recorded.get(id(live)) for live in self.compare)
        return (str(paths[0]), str(paths[1])) if all(paths) and all(l.end for l in self.compare) else None
