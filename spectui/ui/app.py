"""The live dashboard: runs sessions on an engine thread and shows the four signals.

Threads and data flow:

* Sessions run on the app's one engine thread, a Textual *thread* worker started at mount
  (``SessionRunner.serve``): it loads the engine (or reuses it), iterates ``engine.run``,
  writes every event to the recording and puts it in the session's ``Outbox``, posting a
  ``SessionEvents`` wake-up with ``post_message`` (thread-safe, never blocks the engine)
  only when none is pending. (``call_from_thread`` waits for the UI and costs ~100x more
  per token: never used here.) Why one thread for every session: see ``spectui.ui.session``.
* The app drains the outbox on the wake-up and on every repaint tick, folds each event into
  a ``LiveRun`` (cheap, no drawing) and marks the screen dirty; a timer repaints at
  ``REPAINT_HZ`` at most, within ``UI_CPU_BUDGET`` while a session decodes. A 200 tok/s run
  costs about 12 wake-ups and 12 repaints a second, not 200.
* Replays post their events as ``SessionEvent`` messages from a timer (``ReplayPlayer``
  decides which are due) and so take the same path into the ``LiveRun`` and the screen.
* Stopping sets the run's ``threading.Event``: the engine ends after its current step with
  ``End(reason='interrupted')``. A new run (restart, mode switch, new settings) is queued
  behind it on the engine thread, so two runs never share the engine; messages from a
  superseded run are dropped by ``run_id``. Quitting stops the run, and the engine thread
  closes the engine and exits before the app does.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from textual.app import App
from textual.binding import Binding
from textual.timer import Timer
from textual.worker import Worker, WorkerState, get_current_worker

from spectui.config import MAX_DRAFT_LENGTH, RunConfig
from spectui.errors import SpectuiError
from spectui.metrics.live import LiveRun
from spectui.recording.schema import End, Event
from spectui.ui.messages import Outbox, SessionEvent, SessionEvents, SessionFinished, SessionStatus
from spectui.ui.replay import SEEK_S, ReplayPlayer, speed_label
from spectui.ui.screens.compare import CompareScreen, run_label
from spectui.ui.screens.live import LiveScreen
from spectui.ui.screens.pickers import OpenRecording, PromptPicker
from spectui.ui.screens.plot import PlotScreen
from spectui.ui.session import EngineFactory, PairRequest, SessionRequest, SessionRunner
from spectui.ui.themes import register_themes
from spectui.ui.widgets.header import HeaderInfo
from spectui.ui.widgets.stats import Baseline

#: Token stream repaints per second at most: fast enough to read as live.
REPAINT_HZ = 12
#: Everything else (header, stats, sparklines) repaints this often while a run is live, and at
#: once on any change of state. Rendering is the dashboard's whole CPU cost, and on a small
#: machine every millisecond of it is taken from the engine's cores (the benchmark measures
#: dashboard vs headless decode speed); numbers that change 12 times a second cannot be read
#: anyway.
DETAIL_HZ = 3
#: While a session decodes, the UI thread may use this share of one core, measured with
#: ``time.thread_time`` (everything: message handling, our redraws, Textual's compositor).
#: A repaint that would overdraw the allowance waits, so the stream then updates less often
#: instead of slowing the engine: on a two-core machine llama.cpp's threads own both cores,
#: and every millisecond the UI takes is a millisecond of decode lost (the benchmark holds
#: dashboard decode speed to >= 0.98 of headless). A fast machine never reaches the budget.
UI_CPU_BUDGET = 0.02
#: The most allowance saved up while idle, so a burst of repaints after a quiet spell is short.
UI_CPU_BURST_S = 0.05
#: A settings change during a run restarts it after this pause, so a burst of K presses
#: costs one restart instead of one per key.
RESTART_DEBOUNCE_S = 0.4
TEMPERATURE_STEP = 0.1
MAX_TEMPERATURE = 2.0

_BACKEND_LABEL = {"llamacpp": "llama.cpp", "mlx": "MLX"}
_FINISHED = {"length": "done", "stop": "done", "context": "done", "interrupted": "interrupted", "error": "error"}


def default_config() -> RunConfig:
    """The embedded default model, speculative with n-gram drafts, on the CLI's default prompt."""
    try:
        from spectui.cli import DEFAULT_PROMPT
    except ImportError:  # pragma: no cover - the CLI always has it; keep the UI standalone
        DEFAULT_PROMPT = "Fix the typos in this text and return it unchanged otherwise: Speculative decodng is fast."
    return RunConfig(prompt=DEFAULT_PROMPT)


def _worker_cancelled() -> bool:
    """True once Textual cancelled the calling worker (the app is exiting)."""
    return get_current_worker().is_cancelled


def _model_label(spec: str) -> str:
    if spec in ("", "smollm2"):
        return "SmolLM2-135M (embedded)"
    return Path(spec).name.removesuffix(".gguf")


def _artifact_label(a, spec: str) -> tuple[str, str]:  # noqa: ANN001 - ModelArtifacts
    """(name, quant) for the header: the file name (what people pass and recognise; GGUF
    ``general.name`` strings are often long and odd), the quant only when the name lacks it."""
    name = Path(a.path).name.removesuffix(".gguf") if a.path else (a.name or _model_label(spec))
    quant = a.quant if a.quant and a.quant.lower() not in name.lower() else ""
    return name, quant


def _baseline_key(cfg: RunConfig) -> tuple:
    # What must match for an AR run to be the yardstick of a speculative one.
    return (cfg.target, cfg.backend, cfg.prompt, cfg.chat, cfg.max_tokens, cfg.sampling)


class SpectuiApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "spectui"
    # Short descriptions: the footer shows every shown binding in one row at 80 columns.
    BINDINGS = [
        Binding("r", "run", "Run"),
        Binding("s", "stop", "Stop"),
        Binding("m", "toggle_mode", "Mode"),
        # one footer entry per pair: 80 columns hold every key that way
        Binding("plus,equals_sign", "k_up", "K", key_display="+-"),
        Binding("minus", "k_down", "K-", show=False),
        Binding("right_square_bracket", "temperature_up", "T", key_display="]["),
        Binding("left_square_bracket", "temperature_down", "T-", show=False),
        Binding("p", "pick_prompt", "Prompt"),
        Binding("o", "open_recording", "Open"),
        Binding("g", "plot", "Plot"),
        Binding("b", "toggle_blocks", "Blocks"),
        Binding("v", "compare", "Compare"),
        Binding("c", "cycle_theme", "Theme", show=False),
        Binding("x", "toggle_backend", "Backend", show=False),
        Binding("q", "quit", "Quit"),
        # replay only (hidden otherwise, see check_action)
        Binding("space", "replay_pause", "Play", key_display="␣"),
        Binding("greater_than_sign,full_stop", "replay_faster", "Faster", key_display=">"),
        Binding("less_than_sign,comma", "replay_slower", "Slower", key_display="<"),
        Binding("n", "replay_step", "Step"),
        Binding("left", "replay_seek(-1)", "Back", show=False),
        Binding("right", "replay_seek(1)", "Fwd", show=False),
        Binding("home", "replay_restart", "Start", show=False),
    ]
    REPLAY_ACTIONS = frozenset(
        {"replay_pause", "replay_faster", "replay_slower", "replay_step", "replay_seek", "replay_restart"}
    )
    #: Settings of the next live run: out of the footer while a replay needs the room.
    LIVE_SETTINGS = frozenset({"k_up", "k_down", "temperature_up", "temperature_down", "toggle_backend"})
    #: Replay timer ticks per second: events are handed out at this granularity.
    REPLAY_HZ = 30

    def __init__(
        self,
        config: RunConfig,
        *,
        record: bool = True,
        recordings_dir: str | Path | None = None,
        autostart: bool = False,
        engine_factory: EngineFactory | None = None,
    ) -> None:
        super().__init__()
        self.config = config if config.prompt else msgspec.structs.replace(config, prompt=default_config().prompt)
        self.record = record
        self._recordings_dir = Path(recordings_dir) if recordings_dir is not None else None
        self.autostart = autostart
        self.runner = SessionRunner(engine_factory)

        self.live = LiveRun()
        self.run_id = 0
        self.state = "idle"
        self.detail = "press r to run"
        self.recording_path: Path | None = None
        self.replay_path: str | None = None
        self.replay_truncated = False
        self.player: ReplayPlayer | None = None
        self.on_mount_open: Callable[[], object] | None = None  # replay / compare from the CLI
        self.compare: tuple[LiveRun, LiveRun] | None = None  # (baseline, candidate)
        self.compare_files: tuple[str, str] | None = None
        self._compare_queue: list[tuple[RunConfig, LiveRun]] = []
        self._recorded: dict[int, Path | None] = {}  # id(LiveRun) -> its recording
        self._outboxes: dict[int, Outbox] = {}  # run id -> its events in flight to the UI
        self.compare_interleave = False
        self._pair: dict[int, LiveRun] = {}  # run id -> run, for an interleaved pair in flight
        self.show_blocks = False
        self._stop: threading.Event | None = None
        self._restart_timer: Timer | None = None
        self._baselines: dict[tuple, Baseline] = {}
        self._models: dict[str, tuple[str, str]] = {}  # target spec -> (name, quant) once loaded
        self._painted: tuple[int, int] | None = None
        self._dirty = True  # a change of state: everything needs a repaint
        self._details_owed = False  # events drawn in the stream, not yet in the details
        self._detailed_at = -1e9
        self._cpu_allowance = UI_CPU_BURST_S
        self._cpu_mark = (time.monotonic(), time.thread_time())

        self._themes = register_themes(self)

    # -- plumbing ---------------------------------------------------------------------------

    def get_default_screen(self) -> LiveScreen:
        return LiveScreen()

    @property
    def recordings_dir(self) -> Path:
        if self._recordings_dir is None:
            from spectui.recording.writer import recordings_dir

            self._recordings_dir = recordings_dir()
        return self._recordings_dir

    @property
    def running(self) -> bool:
        return self.state in ("loading", "running", "starting", "stopping")

    def on_mount(self) -> None:
        # The one engine thread of this app (see spectui.ui.session for why only one).
        self.engine_worker = self.run_worker(
            functools.partial(self.runner.serve, should_exit=_worker_cancelled),
            name="spectui-engine",
            group="engine",
            thread=True,
            exit_on_error=False,
        )
        self.set_interval(1 / REPAINT_HZ, self._repaint)
        self._replay_timer = self.set_interval(1 / self.REPLAY_HZ, self._replay_tick, pause=True)
        # a theme picked anywhere (the command palette too) restyles the baked-in texts
        self.theme_changed_signal.subscribe(self, lambda _theme: self._touch())
        if self.autostart:
            self.start_run()
        if self.on_mount_open is not None:
            self.call_after_refresh(self.on_mount_open)

    def on_unmount(self) -> None:
        # The engine thread ends the step in flight, closes the engine and exits.
        if self._stop is not None:
            self._stop.set()
        self.runner.shutdown()

    def _touch(self) -> None:
        self._dirty = True

    def _within_cpu_budget(self) -> bool:
        """Charge the UI thread's CPU since the last tick against ``UI_CPU_BUDGET``."""
        now, cpu = time.monotonic(), time.thread_time()
        then, cpu_then = self._cpu_mark
        self._cpu_mark = (now, cpu)
        if not self.running:
            self._cpu_allowance = UI_CPU_BURST_S  # nothing to take CPU from
            return True
        earned = (now - then) * UI_CPU_BUDGET
        self._cpu_allowance = min(UI_CPU_BURST_S, self._cpu_allowance + earned - (cpu - cpu_then))
        return self._cpu_allowance > 0

    def _repaint(self, *, force: bool = False) -> None:
        self._drain_outbox(clear_wake=True)
        if not self._within_cpu_budget() and not force:
            return
        live = self.live
        painted = (id(live), live.version)
        changed = painted != self._painted
        if not (force or self._dirty or changed or self._details_owed):
            return
        screen = self.screen
        if not isinstance(screen, (LiveScreen, CompareScreen)):
            return
        now = time.monotonic()
        full = force or self._dirty or live.finished or now - self._detailed_at >= 1 / DETAIL_HZ
        if not (full or changed):
            return  # nothing new for the stream; the details wait for their tick
        if screen.redraw(full=full):
            self._painted = painted
            if full:
                self._dirty = self._details_owed = False
                self._detailed_at = now
            else:
                self._details_owed = True

    def refresh_now(self) -> None:
        """Repaint at once (tests and snapshots; the timer does it otherwise)."""
        self._repaint(force=True)

    # -- what the screen shows ----------------------------------------------------------------

    def shown_config(self) -> RunConfig:
        """The config of the recording on screen, else the one ``r`` runs."""
        if self.replay_path is not None and self.live.header is not None:
            return self.live.header.config
        return self.config

    def header_info(self) -> HeaderInfo:
        cfg = self.shown_config()
        live = self.live
        h = live.header if live.header is not None and live.header.config.target == cfg.target else None
        if h is not None:
            target, quant = _artifact_label(h.artifacts.target, cfg.target)
        else:
            target, quant = self._models.get(cfg.target, (_model_label(cfg.target), ""))
        d = cfg.draft
        if cfg.mode == "ar":
            draft = "AR"
        else:
            k = f"K={d.k_min}..{d.k_max} adaptive" if d.adaptive else f"K={d.k}"
            draft = f"spec n-gram {k}" if d.is_ngram else f"spec draft {_model_label(d.source)} {k}"
        s = cfg.sampling
        if s.greedy:
            sampling = "greedy"
        else:
            sampling = f"T={s.temperature:.2f}"
            sampling += f" top-k {s.top_k}" if s.top_k else ""
            sampling += f" top-p {s.top_p:g}" if s.top_p < 1 else ""
            sampling += f" seed {s.seed}"
        words = " ".join(cfg.prompt.split())
        prompt = (f"{cfg.prompt_tier}: " if cfg.prompt_tier else "") + (words[:40] + "…" if len(words) > 40 else words)

        detail = self.detail
        if self.state in ("running", "stopping"):
            detail = f"{live.n_tokens}/{cfg.max_tokens} tokens"
        elif self.state == "replay" and self.player is not None:
            detail = self._replay_detail()
        elif self.state in ("done", "interrupted") and live.end is not None:
            detail = f"{live.n_tokens} tokens ({live.end.reason})"
        if self.replay_path is not None:
            recording, path = "replay", self.replay_path
        elif not self.record:
            recording, path = "off", ""
        else:
            recording = "rec"
            path = str(self.recording_path) if self.recording_path is not None else f"{self.recordings_dir}/ (on run)"
        return HeaderInfo(
            backend=_BACKEND_LABEL.get(cfg.backend.name, cfg.backend.name),
            target=target,
            quant=quant,
            draft=draft,
            sampling=sampling,
            prompt=prompt,
            state=self.state,
            detail=detail,
            recording=recording,
            path=path,
        )

    def baseline_for(self, live: LiveRun) -> Baseline | None:
        if live.header is None:
            return None
        return self._baselines.get(_baseline_key(live.header.config))

    def _note_baseline(self, live: LiveRun) -> None:
        """A finished AR run becomes the yardstick for speculative runs of the same setup."""
        h = live.header
        if h is None or h.config.mode != "ar" or live.end is None or live.end.reason not in ("length", "stop"):
            return
        rate = live.decode_tok_s()
        if not math.isnan(rate):
            self._baselines[_baseline_key(h.config)] = Baseline(rate, live.mean_ar_step_us)

    # -- sessions -------------------------------------------------------------------------------

    def _record_path_factory(self) -> Callable[[RunConfig], Path] | None:
        if not self.record:
            return None
        from spectui.recording.writer import default_recording_path

        directory = self.recordings_dir
        return lambda cfg: default_recording_path(cfg, directory)

    def start_run(self, config: RunConfig | None = None, live: LiveRun | None = None) -> None:
        """Start a session with ``config`` (default: the current one), stopping the one in
        progress; its events fold into ``live`` (default: a new ``LiveRun``)."""
        if live is None:
            self._compare_queue.clear()  # a plain run ends a live comparison
        stop = self._begin_run(live)
        self.runner.submit(
            SessionRequest(
                run_id=self.run_id,
                config=config or self.config,
                stop=stop,
                post=self.post_message,
                record_to=self._record_path_factory(),
            )
        )

    def _begin_run(self, live: LiveRun | None) -> threading.Event:
        """Stop what runs, take a new run id, show ``live``: the common start of every run."""
        if self._restart_timer is not None:
            self._restart_timer.stop()
            self._restart_timer = None
        if self._stop is not None:
            self._stop.set()
        self.run_id += 1
        self._stop = stop = threading.Event()
        self._outboxes.clear()
        self._pair = {}
        self.live = live if live is not None else LiveRun()
        if self.player is not None:
            self.player = None
            self.refresh_bindings()
        self.replay_path = None
        self.recording_path = None
        self.state, self.detail = "starting", ""
        self._touch()
        return stop

    def stop_run(self) -> None:
        if self._restart_timer is not None:
            self._restart_timer.stop()
            self._restart_timer = None
        if self._stop is not None and self.running:
            self._stop.set()
            self.state = "stopping"
            self._touch()

    def on_session_status(self, msg: SessionStatus) -> None:
        live = self._run_for(msg.run_id)
        if live is None:
            return
        self.state = msg.state
        if msg.state == "running":
            path = Path(msg.detail) if msg.detail else None
            self._recorded[id(live)] = path
            if live is self.live:
                self.recording_path = path
            self.detail = ""
        else:
            self.detail = msg.detail
        self._touch()

    def on_session_event(self, msg: SessionEvent) -> None:
        live = self._run_for(msg.run_id)
        if live is not None:  # else a superseded run's last steps
            self._fold(msg.event, live)

    def _run_for(self, run_id: int) -> LiveRun | None:
        """The run a session's messages fold into; None for a superseded session."""
        if self._pair:
            return self._pair.get(run_id)
        return self.live if run_id == self.run_id else None

    def on_session_events(self, msg: SessionEvents) -> None:
        if self._run_for(msg.run_id) is not None:
            self._outboxes[msg.run_id] = msg.outbox
            self._drain_outbox(clear_wake=False)  # the next tick clears it: one wake per tick

    def _drain_outbox(self, *, clear_wake: bool) -> None:
        for run_id, outbox in self._outboxes.items():
            live = self._run_for(run_id)
            while outbox and live is not None:
                self._fold(outbox.popleft(), live)
            if clear_wake:
                outbox.wake_pending = False

    def _fold(self, ev: Event, live: LiveRun) -> None:
        live.feed(ev)
        # one run's end is the app's (an interleaved pair ends with its last session)
        if type(ev) is End and self.player is None and not self._pair:
            self.state = _FINISHED.get(ev.reason, "done")
            self.detail = ev.error
            h = self.live.header
            if h is not None:
                self._models[h.config.target] = _artifact_label(h.artifacts.target, h.config.target)

    def on_session_finished(self, msg: SessionFinished) -> None:
        if msg.run_id in self._pair:
            self._pair_finished(msg)
            return
        if msg.run_id != self.run_id:
            return
        self._drain_outbox(clear_wake=True)  # the run's last events, its End among them
        self._outboxes.pop(msg.run_id, None)
        if msg.error:
            self.state, self.detail = "error", msg.error
            self.notify(msg.error, title="run failed", severity="error", timeout=8)
        elif self.live.end is None:  # stopped before it began
            self.state, self.detail = "idle", ""
        self._note_baseline(self.live)
        if self._compare_queue and self.state in ("done", "interrupted") and self.live.end is not None:
            if self.state == "done":
                self._start_next_compare()
            else:
                self._compare_queue.clear()  # stopped: the pair stays half-done
        self._touch()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # SessionRunner catches every session's errors; this is the net under it.
        if event.state == WorkerState.ERROR and event.worker.group == "engine":
            self.state, self.detail = "error", f"the engine thread failed: {event.worker.error}"
            self.notify(self.detail, severity="error", timeout=8)
            self._touch()

    def _settings_changed(self) -> None:
        """A new setting applies to the next run; a run in progress restarts with it."""
        self._touch()
        if self.running and self.replay_path is None:
            self.stop_run()
            self._restart_timer = self.set_timer(RESTART_DEBOUNCE_S, self.start_run)

    # -- recordings -----------------------------------------------------------------------------

    def open_recording(self, path: str | Path, *, play: bool = False, speed: float = 1.0, paused: bool = False) -> bool:
        """Show a recording through the same messages, ``LiveRun`` and repaint as a live run:
        its final state at once, or (``play``) replayed at ``speed`` times its own pace."""
        from spectui.recording.reader import read_recording
        from spectui.recording.timeline import Timeline

        try:
            rec = read_recording(path)
        except SpectuiError as exc:
            self.notify(str(exc), title="cannot open recording", severity="error", timeout=8)
            return False
        except OSError as exc:
            self.notify(f"{path}: {exc.strerror or exc}", title="cannot open recording", severity="error", timeout=8)
            return False
        self.stop_run()
        self.replay_path = str(path)
        self.replay_truncated = rec.truncated or not rec.complete
        self.player = ReplayPlayer(
            Timeline(rec.events), speed=speed, paused=paused, at_end=not play, now=time.monotonic()
        )
        self.state, self.detail = "replay", ""
        self._rebuild_replay()
        if not self.player.paused:
            self._replay_timer.resume()
        if rec.truncated:
            self.notify(
                f"cut off at byte {rec.truncated_at}: every complete record is shown",
                title="truncated recording",
                severity="warning",
                timeout=6,
            )
        if not play:
            self._note_baseline(self.live)
        self.refresh_bindings()  # the replay keys show in the footer
        self.refresh_now()
        return True

    def _rebuild_replay(self) -> None:
        """Show the player's first ``shown`` events at once (open, seek, restart). A new run id
        drops replay messages already posted for the old position."""
        player = self.player
        assert player is not None
        self.run_id += 1
        self._outboxes.clear()
        self.live = LiveRun.from_events(player.timeline.events[: player.shown])
        self._touch()

    def _replay_tick(self) -> None:
        player = self.player
        if player is None or player.paused:
            self._replay_timer.pause()  # no wake-ups while nothing plays (resumed by play keys)
            return
        self._post_replay(player.tick(time.monotonic()))

    def _post_replay(self, indices: range) -> None:
        events, run_id = self.player.timeline.events, self.run_id
        for i in indices:
            self.post_message(SessionEvent(run_id, events[i]))
        if indices:
            self._touch()

    def _replay_detail(self) -> str:
        player, live = self.player, self.live
        tl = player.timeline
        now = time.monotonic()
        at = tl.time_at(player.shown) if player.paused or player.finished else min(player.clock(now), tl.duration_us)
        state = f"paused ({speed_label(player.speed)})" if player.paused else speed_label(player.speed)
        if player.finished:
            state = "end" + (f" ({live.end.reason})" if live.end is not None else " (no end record)")
        parts = [
            state,
            f"{at / 1e6:.1f}/{tl.duration_us / 1e6:.1f} s",
            f"step {tl.blocks_done(player.shown)}/{len(tl.step_ends)}",
            f"{live.n_tokens} tokens",
        ]
        if self.replay_truncated:
            parts.append("truncated recording")
        return " · ".join(parts)

    # -- actions ----------------------------------------------------------------------------------

    def action_run(self) -> None:
        self.start_run()

    def action_stop(self) -> None:
        self.stop_run()

    def _set_config(self, **changes: Any) -> None:
        self.config = msgspec.structs.replace(self.config, **changes)
        self._settings_changed()

    def action_toggle_mode(self) -> None:
        self._set_config(mode="ar" if self.config.mode == "spec" else "spec")

    def action_toggle_backend(self) -> None:
        """llama.cpp <-> MLX for the next run (the engine thread loads the other backend)."""
        b = self.config.backend
        if b.name == "server":  # the server decides its own engine; an embedded one is another run
            self.notify("measuring a server: its backend is the server's (restart without --server for an embedded engine)", timeout=4)
            return
        self._set_config(backend=msgspec.structs.replace(b, name="mlx" if b.name == "llamacpp" else "llamacpp"))
        self.notify(f"backend: {_BACKEND_LABEL.get(self.config.backend.name, self.config.backend.name)}", timeout=2)

    def _set_k(self, delta: int) -> None:
        d = self.config.draft
        lo, hi = (d.k_min, d.k_max) if d.adaptive else (1, MAX_DRAFT_LENGTH)
        k = min(hi, max(lo, d.k + delta))
        if k != d.k:
            self._set_config(draft=msgspec.structs.replace(d, k=k))

    def action_k_up(self) -> None:
        self._set_k(+1)

    def action_k_down(self) -> None:
        self._set_k(-1)

    def _set_temperature(self, delta: float) -> None:
        s = self.config.sampling
        t = round(min(MAX_TEMPERATURE, max(0.0, s.temperature + delta)), 2)
        if t != s.temperature:
            self._set_config(sampling=msgspec.structs.replace(s, temperature=t))

    def action_temperature_up(self) -> None:
        self._set_temperature(+TEMPERATURE_STEP)

    def action_temperature_down(self) -> None:
        self._set_temperature(-TEMPERATURE_STEP)

    def action_pick_prompt(self) -> None:
        def chosen(spec) -> None:  # noqa: ANN001 - PromptSpec | None
            if spec is not None:
                self._set_config(
                    prompt=spec.text,
                    prompt_tier=spec.tier,
                    prompt_name=spec.name,
                    prompt_check=spec.check,
                    max_tokens=spec.max_tokens,
                )

        self.push_screen(PromptPicker(), chosen)

    def action_open_recording(self) -> None:
        def chosen(path: str | None) -> None:
            if path:
                self.open_recording(path)

        self.push_screen(OpenRecording(self.recordings_dir), chosen)

    def action_plot(self) -> None:
        if isinstance(self.screen, PlotScreen):
            self.pop_screen()
        else:
            self.push_screen(PlotScreen())

    def action_toggle_blocks(self) -> None:
        self.show_blocks = not self.show_blocks
        screen = self.screen
        if isinstance(screen, LiveScreen):
            screen.set_show_blocks(self.show_blocks)

    # -- side by side -----------------------------------------------------------------------------

    def action_compare(self) -> None:
        """The compare screen; with nothing to compare yet, run the pair live."""
        if isinstance(self.screen, CompareScreen):
            self.pop_screen()
            return
        self.push_screen(CompareScreen())
        if self.compare is None:
            self.action_run_compare()

    def action_run_compare(self) -> None:
        """AR then speculative, same prompt and settings, one after the other (never at once:
        they would share the cores and neither number would be true)."""
        base = msgspec.structs.replace(self.config, mode="ar")
        cand = msgspec.structs.replace(self.config, mode="spec")
        self.compare = (LiveRun(), LiveRun())
        self.compare_files = None
        if self.compare_interleave:
            self._start_interleaved(base, cand)
            return
        self._compare_queue[:] = [(base, self.compare[0]), (cand, self.compare[1])]
        self._start_next_compare()

    def action_toggle_interleave(self) -> None:
        self.compare_interleave = not self.compare_interleave
        how = "interleaved block by block" if self.compare_interleave else "one after the other"
        self.notify(f"live compare: {how} (r runs it)", timeout=3)
        self._touch()

    def _start_interleaved(self, base: RunConfig, cand: RunConfig) -> None:
        """Both runs at once, one block each in turn on two engines (``PairRequest``): the
        machine's load drifts alike for both, and each clock leaves out the other's time."""
        self._compare_queue.clear()
        stop = self._begin_run(self.compare[0])
        first = self.run_id
        self.run_id += 1
        record_to = self._record_path_factory()
        self._pair = {first: self.compare[0], self.run_id: self.compare[1]}
        self.runner.submit(
            PairRequest(
                requests=(
                    SessionRequest(run_id=first, config=base, stop=stop, post=self.post_message, record_to=record_to),
                    SessionRequest(run_id=self.run_id, config=cand, stop=stop, post=self.post_message, record_to=record_to),
                )
            )
        )

    def _pair_finished(self, msg: SessionFinished) -> None:
        live = self._pair[msg.run_id]
        self._drain_outbox(clear_wake=True)
        if msg.error:
            self.state, self.detail = "error", msg.error
            self.notify(msg.error, title="run failed", severity="error", timeout=8)
        self._outboxes.pop(msg.run_id, None)
        del self._pair[msg.run_id]
        self._note_baseline(live)
        if not self._pair and self.state != "error":
            ends = [run.end for run in self.compare or () if run.end is not None]
            stopped = any(e.reason == "interrupted" for e in ends) or len(ends) < 2
            self.state, self.detail = ("interrupted" if stopped else "done"), ""
        self._touch()

    def _start_next_compare(self) -> None:
        config, live = self._compare_queue.pop(0)
        self.start_run(config, live)

    def open_compare(self, baseline: str | Path, candidate: str | Path) -> bool:
        """Two recordings side by side (baseline first)."""
        from spectui.recording.reader import read_recording

        runs = []
        for path in (baseline, candidate):
            try:
                runs.append(LiveRun.from_events(read_recording(path).events))
            except (SpectuiError, OSError) as exc:
                self.notify(f"{path}: {exc}", title="cannot open recording", severity="error", timeout=8)
                return False
        self.stop_run()
        self._compare_queue.clear()
        self.compare = (runs[0], runs[1])
        self.compare_files = (str(baseline), str(candidate))
        if not isinstance(self.screen, CompareScreen):
            self.push_screen(CompareScreen())
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

    def action_diff(self) -> None:
        from spectui.ui.screens.diff import DiffScreen, diff_text

        paths = self.compare_paths()
        if paths is None:
            self.notify("the diff needs two finished, recorded runs", severity="warning", timeout=4)
            return
        self.push_screen(DiffScreen(diff_text(*paths)))

    def compare_title(self) -> str:
        if self.compare_files is not None:
            return f"compare · files {self.compare_files[0]}  vs  {self.compare_files[1]}"
        if self.compare is None:
            return "compare · press r to run AR, then speculative"
        base, cand = self.compare
        if self._pair or self.compare_interleave:
            how = "live, interleaved block by block (each clock without the other's time)"
            state = self.state
        else:
            how = "live, one after the other"
            which = "AR" if self.live is base else run_label(cand)
            state = f"{self.state}: {which}" if self.running else self.state
        return f"compare · {how} · {state}"

    def action_cycle_theme(self) -> None:
        names = [t.name for t in self._themes] or ["textual-dark", "textual-light", "textual-ansi"]
        i = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(i + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)
        self._touch()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.REPLAY_ACTIONS:
            return self.player is not None
        if action in self.LIVE_SETTINGS:
            return self.player is None
        return True

    def _replay_control(self, control: Callable[[ReplayPlayer, float], object]) -> None:
        """Apply a replay key to the player, then catch the screen up with it."""
        player = self.player
        if player is None:
            return
        before = player.shown
        control(player, time.monotonic())
        if player.shown < before:
            self._rebuild_replay()  # backwards (or play again from the start): redraw from zero
        else:
            self._post_replay(range(before, player.shown))
        if not player.paused:
            self._replay_timer.resume()
        self._touch()

    def action_replay_pause(self) -> None:
        self._replay_control(ReplayPlayer.toggle_pause)

    def action_replay_faster(self) -> None:
        self._replay_control(ReplayPlayer.faster)

    def action_replay_slower(self) -> None:
        self._replay_control(ReplayPlayer.slower)

    def action_replay_step(self) -> None:
        self._replay_control(ReplayPlayer.step_block)

    def action_replay_seek(self, direction: int) -> None:
        self._replay_control(lambda p, now: p.seek(direction * SEEK_S, now))

    def action_replay_restart(self) -> None:
        self._replay_control(lambda p, now: p.seek(-math.inf, now))

    async def action_quit(self) -> None:
        self.stop_run()
        self.exit(0)


def make_app(
    config: RunConfig,
    *,
    record: bool = True,
    recordings_dir: str | None = None,
    autostart: bool = False,
    engine_factory: EngineFactory | None = None,
    theme: str | None = None,
) -> SpectuiApp:
    """The dashboard for ``config`` (shared by the CLI and the tests).

    ``record`` writes every live session to ``recordings_dir`` (default: $SPECTUI_RECORDINGS,
    ./recordings, or the user data folder); ``autostart`` starts a run at once;
    ``engine_factory(config) -> Engine`` replaces ``Engine.load`` (tests, benchmarks);
    ``theme`` names a theme (themes/*.toml or a Textual built-in; default spectui-dark).
    """
    app = SpectuiApp(
        config, record=record, recordings_dir=recordings_dir, autostart=autostart, engine_factory=engine_factory
    )
    if theme is not None:
        if theme not in app.available_themes:
            raise SpectuiError(f"unknown theme {theme!r} (known: {', '.join(sorted(app.available_themes))})")
        app.theme = theme
    return app


#: Used when the terminal has no truecolor (TERM=xterm-256color, no COLORTERM): its colours
#: are exact palette entries, where the default theme's would be rounded to neighbours.
THEME_256 = "spectui-256"


def run_dashboard(
    config: RunConfig, *, record: bool = True, recordings_dir: str | None = None, theme: str | None = None
) -> int:
    """Run the dashboard in this terminal until the user quits; returns the exit code.

    Keyboard only: the mouse is not captured, so the terminal's own text selection keeps
    working (copying a recording path over SSH, for one).
    """
    app = make_app(config, record=record, recordings_dir=recordings_dir, theme=theme)
    return _run_in_terminal(app, theme)


def run_replay(path: str, *, speed: float = 1.0, paused: bool = False, theme: str | None = None) -> int:
    """``spectui replay``: play ``path`` from the start in the dashboard (no engine, no models)."""
    from spectui.config import RunConfig

    app = make_app(RunConfig(prompt="(replay)"), record=False, theme=theme)
    app.on_mount_open = functools.partial(app.open_recording, path, play=True, speed=speed, paused=paused)
    return _run_in_terminal(app, theme)


def _run_in_terminal(app: SpectuiApp, theme: str | None) -> int:
    if theme is None and app.console.color_system != "truecolor" and THEME_256 in app.available_themes:
        app.theme = THEME_256
    result = app.run(mouse=False)
    if app.return_code not in (None, 0):
        return app.return_code
    return result if isinstance(result, int) else 0


def run_compare(
    files: list[str],
    *,
    config: RunConfig | None = None,
    record: bool = True,
    theme: str | None = None,
    interleave: bool = False,
) -> int:
    """``spectui compare``: two recordings side by side, or (no files) AR and speculative live."""
    app = make_app(config or RunConfig(prompt="(compare)"), record=record and not files, theme=theme)
    app.compare_interleave = interleave
    if files:
        app.on_mount_open = functools.partial(app.open_compare, files[0], files[1])
    else:
        app.on_mount_open = app.action_compare
    return _run_in_terminal(app, theme)

