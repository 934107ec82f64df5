"""The live dashboard's Textual app: keys, timers, the repaints and the screens.

What the dashboard knows and does (runs, notes, folding, comparisons, baselines, replay)
lives in ``spectui.ui.controller`` and its run kinds (``spectui.ui.runs``), without Textual;
this app carries the engine thread's notes to it, turns keys and the screens' requests
(``spectui.ui.messages``) into its calls, and has the screens draw its ``DashboardView``.

Threads and timing:

* The controller's ``SessionRunner`` serves every session on the app's one engine thread, a
  Textual *thread* worker started at mount (why one: see ``spectui.sessions.runner``). It
  hands notes to ``post_note``, which wraps each in an ``EngineNote`` message:
  ``post_message`` is thread-safe and never blocks the engine (``call_from_thread`` waits for
  the UI and costs ~100x more per token: never used here).
* Events reach the controller's outboxes without a message each; it folds them on the
  ``SessionEvents`` wake-up and on every repaint tick. A timer repaints at ``REPAINT_HZ`` at
  most, the details at ``DETAIL_HZ``, within the UI's CPU budget while a session decodes
  (``spectui.ui.cpu_budget``).
* Quitting stops the run, and the engine thread closes the engine and exits before the app
  does.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from pathlib import Path

from textual.app import App
from textual.binding import Binding
from textual.timer import Timer
from textual.worker import Worker, WorkerState, get_current_worker

from spectui.config import RunConfig
from spectui.sessions.notes import Note
from spectui.sessions.open import EngineFactory
from spectui.ui.backends import engine_label
from spectui.ui.controller import TEMPERATURE_STEP, DashboardController
from spectui.ui.cpu_budget import CpuBudget
from spectui.ui.messages import (
    CompareRequested,
    DiffRequested,
    EngineNote,
    InterleaveToggled,
    RunRequested,
    StopRequested,
)
from spectui.ui.remembered import Memory
from spectui.ui.replay import SEEK_S, ReplayPlayer
from spectui.ui.runs.pairs import NodePair
from spectui.ui.screens.compare import CompareScreen
from spectui.ui.screens.live import LiveScreen
from spectui.ui.screens.pickers import OpenRecording, PromptPicker
from spectui.ui.screens.plot import PlotScreen
from spectui.ui.themes import register_themes
from spectui.ui.view import DashboardView

#: Token stream repaints per second at most: fast enough to read as live.
REPAINT_HZ = 12
#: Everything else (header, stats, sparklines) repaints this often while a run is live, and at
#: once on any change of state. Rendering is the dashboard's whole CPU cost, and on a small
#: machine every millisecond of it is taken from the engine's cores (the benchmark measures
#: dashboard vs headless decode speed); numbers that change 12 times a second cannot be read
#: anyway.
DETAIL_HZ = 3
#: A settings change during a run restarts it after this pause, so a burst of K presses
#: costs one restart instead of one per key.
RESTART_DEBOUNCE_S = 0.4


def _worker_cancelled() -> bool:
    """True once Textual cancelled the calling worker (the app is exiting)."""
    return get_current_worker().is_cancelled


class SpectuiApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "spectui"
    # Short descriptions: the footer shows every shown binding in one row at 80 columns.
    BINDINGS = [
        Binding("r", "run", "Run"),
        Binding("s", "stop", "Stop"),
        Binding("m", "toggle_mode", "Mode"),
        # one footer entry per pair: 80 columns hold every key that way
        Binding("plus,equals_sign", "step_k(1)", "K", key_display="+-"),
        Binding("minus", "step_k(-1)", "K-", show=False),
        Binding("right_square_bracket", "temperature_up", "T", key_display="]["),
        Binding("left_square_bracket", "temperature_down", "T-", show=False),
        # a prompt (in a chat, the next message); priority: acts as the key arrives, so the keys typed
        # after it reach the composer, not the focused dashboard (text under a modal: check_action)
        Binding("e", "compose", "Edit", priority=True),
        # a new conversation (shown during one only); priority as e's: "n e" typed fast keeps its n
        Binding("n", "new_chat", "New", priority=True),
        Binding("p", "pick_prompt", "Prompt"),
        Binding("o", "open_recording", "Open"),
        Binding("h", "history", "History", show=False),  # spectui history over the recordings folder
        Binding("t", "tune", "Tune", show=False),  # the latest spectui tune result; r there tunes
        Binding("M", "pick_models", "Models", show=False),  # the next run's target, then its draft
        Binding("g", "plot", "Plot", show=False),  # out of the 80-column footer: n (new chat) needs the room
        Binding("b", "toggle_blocks", "Blocks", show=False),  # the legend shows it: "blocks off (b)"
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
    LIVE_SETTINGS = frozenset({"step_k", "temperature_up", "temperature_down", "toggle_backend"})
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
        versus: NodePair | None = None,
        remember: bool = False,
    ) -> None:
        super().__init__()
        self.memory = Memory(enabled=remember)  # the theme, K and mode picked here: a state file, never the config
        self.controller = DashboardController(
            config, self, record=record, recordings_dir=recordings_dir, engine_factory=engine_factory, versus=versus
        )
        #: what the screens read (they never hold the app or the controller)
        self.view = DashboardView(self.controller)
        self.autostart = autostart
        self.on_mount_open: Callable[[], object] | None = None  # replay / compare from the CLI
        self.show_blocks = False
        self._restart_timer: Timer | None = None
        self._painted: tuple[int, int] | None = None
        self._dirty = True  # a change of Textual's own (a theme): everything needs a repaint
        self._details_owed = False  # events drawn in the stream, not yet in the details
        self._detailed_at = -1e9
        self._cpu_budget = CpuBudget()
        self._themes = register_themes(self)

    # -- the controller's host ------------------------------------------------------------

    def post_note(self, note: Note) -> None:
        """The engine thread's ``post``: a plain note, wrapped as a message (thread-safe)."""
        self.post_message(EngineNote(note))

    def on_engine_note(self, msg: EngineNote) -> None:
        self.controller.on_note(msg.note)

    def replay_mode_changed(self) -> None:
        self.refresh_bindings()  # the replay keys show in the footer, or leave it

    # -- plumbing -------------------------------------------------------------------------

    def get_default_screen(self) -> LiveScreen:
        return LiveScreen(self.view)

    def on_mount(self) -> None:
        # The one engine thread of this app (see spectui.sessions.runner for why only one), and
        # node B's beside it for ``compare --hosts`` (a remote engine decodes on its node: this
        # thread only reads its stream, and no OpenMP team is shared)
        self.engine_worker, *_ = [
            self.run_worker(
                functools.partial(runner.serve, should_exit=_worker_cancelled),
                name="spectui-engine" if n == 0 else f"spectui-engine-{n + 1}",
                group="engine",
                thread=True,
                exit_on_error=False,
            )
            for n, runner in enumerate(self.controller.runners)
        ]
        self.set_interval(1 / REPAINT_HZ, self._repaint)
        self._replay_timer = self.set_interval(1 / self.REPLAY_HZ, self._replay_tick, pause=True)
        # a theme picked anywhere (the command palette too) restyles the baked-in texts
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        if self.autostart:
            self.controller.start_run()
        if self.on_mount_open is not None:
            self.call_after_refresh(self.on_mount_open)

    def on_unmount(self) -> None:
        self.controller.shutdown()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.group == "engine":
            self.controller.engine_failed(event.worker.error)

    def _touch(self) -> None:
        self._dirty = True

    def _theme_changed(self, theme) -> None:  # noqa: ANN001 - a Textual Theme
        self._touch()
        self.memory.keep(theme=theme.name)

    def _repaint(self, *, force: bool = False) -> None:
        ctl = self.controller
        ctl.drain(clear_wake=True)
        if not self._cpu_budget.allows(busy=ctl.state.busy) and not force:
            return
        live = ctl.live
        painted = (id(live), live.version)
        changed = painted != self._painted
        dirty = self._dirty or ctl.changed
        if not (force or dirty or changed or self._details_owed):
            return
        if not self.screen_stack:  # the app is closing: its last screen went before the timer
            return
        screen = self.screen
        if not isinstance(screen, (LiveScreen, CompareScreen)):
            return
        now = time.monotonic()
        full = force or dirty or live.finished or now - self._detailed_at >= 1 / DETAIL_HZ
        if not (full or changed):
            return  # nothing new for the stream; the details wait for their tick
        if screen.redraw(full=full):
            self._painted = painted
            if full:
                self._dirty = ctl.changed = self._details_owed = False
                self._detailed_at = now
            else:
                self._details_owed = True

    def refresh_now(self) -> None:
        """Repaint at once (tests and snapshots; the timer does it otherwise)."""
        self._repaint(force=True)

    # -- runs and settings ----------------------------------------------------------------

    def action_run(self) -> None:
        self.controller.start_run()

    def action_stop(self) -> None:
        self.controller.stop_run()

    def on_run_requested(self, _msg: RunRequested) -> None:
        self.action_run()

    def on_stop_requested(self, _msg: StopRequested) -> None:
        self.action_stop()

    def _restart_after(self, restart: bool | None) -> None:
        """A setting changed during a run, which stopped: start it again after the debounce
        (a newer change re-arms it)."""
        if not restart:
            return
        if self._restart_timer is not None:
            self._restart_timer.stop()
        self._restart_timer = self.set_timer(RESTART_DEBOUNCE_S, self._restart)

    def _restart(self) -> None:
        if self.controller.restart_pending:  # else a stop or a newer run came first
            self.controller.start_run()

    def action_toggle_mode(self) -> None:
        self._restart_after(self.controller.toggle_mode())
        self.memory.keep(mode=self.controller.config.mode)

    def action_toggle_backend(self) -> None:
        """llama.cpp -> MLX -> the runtimes for the next run (one that cannot run here: skipped, a line)."""
        restart = self.controller.toggle_backend()
        if restart is None:  # the server decides its own engine; an embedded one is another run
            self.notify("measuring a server: its backend is the server's (restart without --server for an embedded engine)", timeout=4)
            return
        self._restart_after(restart)
        self.notify(f"backend: {engine_label(self.controller.config)}", timeout=2)

    def action_step_k(self, delta: int) -> None:
        """A fixed K, or a cost-aware K's limit (``DraftConfig.stepped``); a fixed K is remembered."""
        self._restart_after(self.controller.step_k(delta))
        self.memory.keep(k=self.controller.config.draft.fixed_k)

    def action_temperature_up(self) -> None:
        self._restart_after(self.controller.step_temperature(+TEMPERATURE_STEP))

    def action_temperature_down(self) -> None:
        self._restart_after(self.controller.step_temperature(-TEMPERATURE_STEP))

    def action_pick_prompt(self) -> None:
        def chosen(spec) -> None:  # noqa: ANN001 - PromptSpec | None
            if spec is not None:
                self._restart_after(self.controller.use_prompt(spec))

        self.push_screen(PromptPicker(), chosen)

    async def action_compose(self) -> None:
        """The composer, empty (``up`` there brings back the last prompt): the first message
        of a new conversation, or the next message of the one going on."""
        from spectui.ui.screens.composer import Composed, Composer

        ctl = self.controller
        cfg = ctl.config

        def sent(composed: Composed | None) -> None:
            if composed is not None:
                ctl.send_message(composed.text, system=composed.system, chat=composed.chat)
                self.refresh_bindings()  # n (new chat) shows now
                if not isinstance(self.screen, LiveScreen):
                    self.pop_screen()  # the reply streams on the main screen

        composer = Composer(recall=ctl.last_prompt, system=cfg.system, chat=cfg.chat, turn=ctl.chat.next_turn(),
                            context=cfg.backend.n_ctx)
        await self.push_screen(composer, sent)  # mounted, its text focused, before the next key is handed on

    def action_new_chat(self) -> None:
        self.controller.new_conversation()
        self.refresh_bindings()
        self.notify("a new conversation: e types its first message", timeout=3)

    # -- recordings and replay ------------------------------------------------------------

    def action_open_recording(self) -> None:
        def chosen(path: str | None) -> None:
            if path:
                self.open_recording(path)

        self.push_screen(OpenRecording(self.controller.recordings_dir), chosen)

    def action_history(self) -> None:
        from spectui.ui.screens.history import HistoryScreen

        self.push_screen(HistoryScreen([self.controller.recordings_dir]))

    def action_tune(self) -> None:
        from spectui.ui.screens.tune import TuneScreen

        if not isinstance(self.screen, TuneScreen):
            self.push_screen(TuneScreen(self.controller.config, self.controller.run_job, busy=lambda: self.controller.running))

    def action_pick_models(self) -> None:
        """The model picker (``spectui models``' catalogue): the next run's target and draft."""
        from spectui.drafting import Lookup
        from spectui.engine.drafters import drafter_kind, parse_drafter
        from spectui.ui.screens.model_picker import ModelPicker

        busy = "a session is running: stop it (s) before choosing models"
        if self.controller.running:
            self.notify(busy, severity="warning", timeout=4)
            return
        if isinstance(self.screen, ModelPicker):
            return

        def chosen(picked: tuple[str, str] | None) -> None:
            if picked is None:
                return
            if self.controller.running:  # one started while the picker was open
                self.notify(busy, severity="warning", timeout=4)
                return
            target, source = picked
            # the same rule as the flags: a model-free drafter cost-aware, a draft model's K as it was chosen
            d = self.controller.config.draft
            drafter = parse_drafter(source)
            free = isinstance(drafter, Lookup)
            self.controller.set_config(target=target, draft=d.drafting_with(drafter, fixed_k=None if free else d.fixed_k))
            with_ = f"{drafter_kind(source).label} drafting" if free else Path(source).name
            self.notify(f"next run: {Path(target).name} with {with_}", timeout=4)

        self.push_screen(ModelPicker(), chosen)

    def open_recording(self, path: str | Path, *, play: bool = False, speed: float = 1.0, paused: bool = False) -> bool:
        """Show a recording: its final state at once, or (``play``) replayed at ``speed``."""
        if not self.controller.open_recording(path, play=play, speed=speed, paused=paused):
            return False
        player = self.controller.player  # the recording's, now it is open
        if player is not None and not player.paused:
            self._replay_timer.resume()
        self.refresh_now()
        return True

    def _replay_tick(self) -> None:
        if not self.controller.replay_tick(time.monotonic()):
            self._replay_timer.pause()  # no wake-ups while nothing plays (resumed by play keys)

    def _replay_control(self, control: Callable[[ReplayPlayer, float], object]) -> None:
        if self.controller.replay_control(control, time.monotonic()):
            self._replay_timer.resume()

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

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.REPLAY_ACTIONS:
            return self.controller.player is not None
        if action == "compose":  # under a modal screen (the composer, a picker) e is text
            return not self.screen.is_modal
        if action == "new_chat":  # n: text under a modal; steps a replay instead
            return not self.screen.is_modal and self.controller.player is None and self.controller.chat.conversation is not None
        if action in self.LIVE_SETTINGS:
            return self.controller.player is None
        return True

    # -- views ----------------------------------------------------------------------------

    def action_plot(self) -> None:
        if isinstance(self.screen, PlotScreen):
            self.pop_screen()
        else:
            self.push_screen(PlotScreen(self.view))

    def action_toggle_blocks(self) -> None:
        self.show_blocks = not self.show_blocks
        screen = self.screen
        if isinstance(screen, LiveScreen):
            screen.set_show_blocks(self.show_blocks)

    def action_compare(self) -> None:
        """The compare screen; with nothing to compare yet, run the pair live."""
        if isinstance(self.screen, CompareScreen):
            self.pop_screen()
            return
        self.push_screen(CompareScreen(self.view))
        if self.controller.side_by_side.pair is None:
            self.controller.run_compare()

    def on_compare_requested(self, _msg: CompareRequested) -> None:
        self.controller.run_compare()

    def on_interleave_toggled(self, _msg: InterleaveToggled) -> None:
        if self.controller.versus is not None:
            self.notify("two nodes run one after the other: interleaving shares one engine", timeout=4)
            return
        self.controller.toggle_interleave()
        how = "interleaved block by block" if self.controller.side_by_side.interleave else "one after the other"
        self.notify(f"live compare: {how} (r runs it)", timeout=3)

    def open_compare(self, baseline: str | Path, candidate: str | Path) -> bool:
        """Two recordings side by side (baseline first)."""
        if not self.controller.open_compare(baseline, candidate):
            return False
        if not isinstance(self.screen, CompareScreen):
            self.push_screen(CompareScreen(self.view))
        return True

    def on_diff_requested(self, _msg: DiffRequested) -> None:
        from spectui.ui.screens.diff import DiffScreen, diff_text

        paths = self.controller.side_by_side.paths()
        if paths is None:
            self.notify("the diff needs two finished, recorded runs", severity="warning", timeout=4)
            return
        self.push_screen(DiffScreen(diff_text(*paths)))

    def action_cycle_theme(self) -> None:
        names = [t.name for t in self._themes] or ["textual-dark", "textual-light", "textual-ansi"]
        i = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(i + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)
        self._touch()

    async def action_quit(self) -> None:
        self.controller.stop_run()
        self.exit(0)
