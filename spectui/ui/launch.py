"""The UI's public entry points: app factories (shared by the CLI, the tests and the
benchmarks) and the ``run_*`` functions that own a terminal until the user quits.

``spectui.cli`` imports these lazily, so a headless command never loads Textual.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App

from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.prompts import DEFAULT_PROMPT
from spectui.sessions.open import EngineFactory
from spectui.ui.app import SpectuiApp
from spectui.ui.runs.pairs import NodePair

if TYPE_CHECKING:
    import threading

    from spectui.lab.sweep import SweepPlan
    from spectui.prompts import PromptSpec
    from spectui.tune.traffic_report import TrafficResult
    from spectui.ui.background import BackgroundJobApp
    from spectui.ui.sweep import SweepApp
    from spectui.ui.watch_app import Feed, WatchApp
    from spectui.watch.board import WatchBoard
    from spectui.workload.plan import WorkloadPlan
    from spectui.workload.result import WorkloadResult
    from spectui.workload.run import Opener
    from spectui.workload.tuning import TrafficTune

#: Used when the terminal has no truecolor (TERM=xterm-256color, no COLORTERM): its colours
#: are exact palette entries, where the default theme's would be rounded to neighbours.
THEME_256 = "spectui-256"


def default_config() -> RunConfig:
    """The embedded default model, speculative with n-gram drafts (``DraftConfig()``: its K
    cost-aware), on the CLI's default prompt: what ``spectui`` with no flags runs."""
    return RunConfig(prompt=DEFAULT_PROMPT)


def _apply_theme(app: App, theme: str | None) -> None:
    if theme is None:
        return
    if theme not in app.available_themes:
        raise SpectuiError(f"unknown theme {theme!r} (known: {', '.join(sorted(app.available_themes))})")
    app.theme = theme


def _run_in_terminal(app: App, theme: str | None) -> int:
    """Run ``app`` here until it exits, keyboard only: the mouse is not captured, so the
    terminal's own text selection keeps working (copying a recording path over SSH, for one)."""
    if theme is None and app.console.color_system != "truecolor" and THEME_256 in app.available_themes:
        app.theme = THEME_256
    result = app.run(mouse=False)
    if app.return_code not in (None, 0):
        return app.return_code
    return result if isinstance(result, int) else 0


# -- the dashboard --------------------------------------------------------------------------


def make_app(
    config: RunConfig,
    *,
    record: bool = True,
    recordings_dir: str | None = None,
    autostart: bool = False,
    engine_factory: EngineFactory | None = None,
    theme: str | None = None,
    versus: NodePair | None = None,
    remember: bool = False,
) -> SpectuiApp:
    """The dashboard for ``config``.

    ``record`` writes every live session to ``recordings_dir`` (default: $SPECTUI_RECORDINGS,
    else the user data folder: ``spectui.paths``); ``autostart`` starts a run at once;
    ``engine_factory(config) -> Engine`` replaces ``open_engine`` (tests, benchmarks);
    ``theme`` names a theme (themes/*.toml or a Textual built-in; default spectui-dark);
    ``versus``: node B beside the engine factory's node A, for ``v`` (``compare --hosts``);
    ``remember``: keep the theme, K and mode picked in the dashboard (``spectui.ui.remembered``).
    """
    app = SpectuiApp(
        config, record=record, recordings_dir=recordings_dir, autostart=autostart, engine_factory=engine_factory,
        versus=versus, remember=remember,
    )
    _apply_theme(app, theme)
    return app


def run_dashboard(
    config: RunConfig,
    *,
    record: bool = True,
    recordings_dir: str | None = None,
    theme: str | None = None,
    engine_factory: EngineFactory | None = None,
    set_elsewhere: Collection[str] = (),
) -> int:
    """``spectui`` (``run`` without ``--headless``): the dashboard until the user quits; the exit
    code. ``engine_factory``: where engines come from (a node's, for ``--host``)."""
    app, theme = remembering_app(config, record=record, recordings_dir=recordings_dir, theme=theme, engine_factory=engine_factory,
                                 set_elsewhere=set_elsewhere)
    return _run_in_terminal(app, theme)


def remembering_app(
    config: RunConfig,
    *,
    theme: str | None,
    set_elsewhere: Collection[str],
    record: bool = True,
    recordings_dir: str | None = None,
    engine_factory: EngineFactory | None = None,
) -> tuple[SpectuiApp, str | None]:
    """``spectui``'s dashboard (the other arguments are ``make_app``'s) and the theme it shows
    (None: the default): the theme, K and mode last picked in a dashboard fill in what no flag
    or config file set (``set_elsewhere``: the options they did), and what is picked in this
    one is kept for the next (``spectui.ui.remembered``: a state file, never the config)."""
    from spectui.ui.remembered import restore

    config, remembered_theme = restore(config, theme, set_elsewhere=set_elsewhere)
    app = make_app(config, theme=theme, remember=True, record=record, recordings_dir=recordings_dir, engine_factory=engine_factory)
    if theme is None and remembered_theme in app.available_themes:  # one no longer installed is passed over
        app.theme = theme = remembered_theme
    return app, theme


def run_replay(path: str, *, speed: float = 1.0, paused: bool = False, theme: str | None = None) -> int:
    """``spectui replay``: play ``path`` from the start in the dashboard (no engine, no models)."""
    app = make_app(RunConfig(prompt="(replay)"), record=False, theme=theme)
    app.on_mount_open = functools.partial(app.open_recording, path, play=True, speed=speed, paused=paused)
    return _run_in_terminal(app, theme)


def run_compare(
    files: list[str],
    *,
    config: RunConfig | None = None,
    record: bool = True,
    theme: str | None = None,
    interleave: bool = False,
    engine_factory: EngineFactory | None = None,
    versus: NodePair | None = None,
) -> int:
    """``spectui compare``: two recordings side by side, or (no files) AR and speculative live,
    or (``versus``) the same session on the engine factory's node and on node B, live."""
    app = make_app(config or RunConfig(prompt="(compare)"), record=record and not files, theme=theme,
                   engine_factory=engine_factory, versus=versus)
    app.controller.side_by_side.interleave = interleave
    if files:
        app.on_mount_open = functools.partial(app.open_compare, files[0], files[1])
    else:
        app.on_mount_open = app.action_compare
    return _run_in_terminal(app, theme)


# -- the watch dashboard --------------------------------------------------------------------
# (imported on use: a watch needs neither the engine service nor the run screens)


def make_watch_app(board: WatchBoard, feed: Feed, *, theme: str | None = None) -> WatchApp:
    """The watch dashboard drawing ``board``, fed by ``feed`` (``spectui.watch.feed``)."""
    from spectui.ui.watch_app import WatchApp

    app = WatchApp(board, feed)
    _apply_theme(app, theme)
    return app


def run_watch(board: WatchBoard, feed: Feed, *, theme: str | None = None) -> int:
    """``spectui watch`` (and ``spectui replay`` of a watch): the dashboard until q. The feed
    is only asked to stop here; the caller waits for it (``finish``) with the terminal back."""
    return _run_in_terminal(make_watch_app(board, feed, theme=theme), theme)


# -- the sweep view -------------------------------------------------------------------------
# (imported on use: the sweep brings spectui.lab along, which the dashboard does not need)


def make_sweep_app(
    plan: SweepPlan,
    prompts: Sequence[PromptSpec],
    folder: str,
    *,
    max_tokens: int | None = None,
    theme: str | None = None,
    load_engine: EngineFactory | None = None,
    autostart: bool = True,
) -> SweepApp:
    """The sweep view of ``plan``; ``load_engine`` replaces ``open_engine`` (tests),
    ``autostart=False`` shows the plan without running it."""
    from spectui.ui.sweep import SweepApp

    app = SweepApp(plan, prompts, folder, max_tokens=max_tokens, load_engine=load_engine, autostart=autostart)
    _apply_theme(app, theme)
    return app


def run_sweep_view(
    plan: SweepPlan,
    prompts: Sequence[PromptSpec],
    folder: str,
    *,
    max_tokens: int | None = None,
    theme: str | None = None,
    load_engine: EngineFactory | None = None,
) -> int:
    """``spectui sweep`` in a terminal: run the plan in the view until the user quits, then
    print the table (the view's screen is gone by then). 0 when the sweep completed, 130 when
    the user stopped it; a failed sweep raises its error (a ``SpectuiError`` is one line)."""
    from spectui.lab.sweep_report import format_table
    from spectui.ui.sweep import JOIN_TIMEOUT_S

    app = make_sweep_app(plan, prompts, folder, max_tokens=max_tokens, theme=theme, load_engine=load_engine)
    code = _run_in_terminal(app, theme)
    # the engines close in the sweep thread; let it finish before the interpreter tears down
    app.stop.set()
    app.sweep_done.wait(JOIN_TIMEOUT_S)
    if app.error is not None:
        raise app.error
    if app.result is not None:
        print(format_table(app.result))
    return code


# -- the workload view ----------------------------------------------------------------------


def run_workload_view(
    plan: WorkloadPlan, folder: Path, opener: Opener, *, noise=None, theme: str | None = None  # noqa: ANN001 - WorkloadRun's noise hook
) -> tuple[int, WorkloadResult | None]:
    """``spectui workload`` in a terminal until the user quits: (exit code, the result), the
    view's screen gone by then; a failed workload raises its error (one line)."""
    from spectui.ui.workload_view import JOIN_TIMEOUT_S, WorkloadApp

    app = WorkloadApp(plan, folder, opener, noise=noise)
    return _run_job_view(app, app.done, theme, JOIN_TIMEOUT_S), app.result


def run_tune_traffic_view(tune: TrafficTune, *, theme: str | None = None) -> tuple[int, TrafficResult | None]:
    """``spectui tune --workload`` in a terminal until the user quits: (exit code, the result), the
    view's screen gone by then; a failed tune raises its error (one line)."""
    from spectui.ui.tune_traffic_view import JOIN_TIMEOUT_S, TrafficTuneApp

    app = TrafficTuneApp(tune)
    return _run_job_view(app, app.done, theme, JOIN_TIMEOUT_S), app.result


def _run_job_view(app: BackgroundJobApp, done: threading.Event, theme: str | None, join_timeout_s: float) -> int:
    """A view whose job runs in a thread, in the terminal until the user quits: the job is told
    to stop and given ``join_timeout_s`` (until ``done``) to stop its servers in its own thread;
    the error that ended it raised."""
    _apply_theme(app, theme)
    code = _run_in_terminal(app, theme)
    app.stop.set()
    done.wait(join_timeout_s)
    if app.error is not None:
        raise app.error
    return code
