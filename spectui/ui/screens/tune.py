"""The tune screen: the latest ``spectui tune`` result for the dashboard's target, and a short
tune run from the dashboard when there is none (or it is stale).

What it shows is the ``TuneResult`` ``spectui.tune.store`` keeps per target (the JSON ``tune
--json`` prints, read back), rendered by ``spectui.tune.report`` as ``spectui tune`` renders its
own: the verify-cost curve, the plan per prompt tier with its check, the verdicts, the settings
to use and the plotext charts. The store's key is the target's cost-curve key
(``models.cost_curves.curve_key``), computed here from the config without loading a model.

Reading the store (hashing the model file the first time) and running tune happen in thread
workers: the UI never waits on them. A tune from here is short (``TUNE_TIERS``, one check
round) and refused while a dashboard session runs: two engines on one machine would measure
each other. Leaving the screen cancels a tune in flight (it stops after its current step). The
tune runs as a job the screen hands to the controller (``DashboardController.run_job``), on the
engine the dashboard's sessions run on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from spectui.config import RunConfig
from spectui.sessions.runner import JobRequest
from spectui.ui.messages import TuneFinished, TuneLoaded, TuneProgress

if TYPE_CHECKING:
    from spectui.tune.result import TuneResult

#: prompt tiers a tune from the dashboard covers (``spectui tune`` does every tier)
TUNE_TIERS = ("short", "copy")
#: its token budget per prompt (``spectui tune``'s default) and check rounds
TUNE_TOKENS = 160
TUNE_REPS = 1


def target_key(config: RunConfig) -> str:
    """The key ``spectui tune`` stores ``config``'s target under (``Engine.cost_key()``),
    without loading the model: its file's sha256 (remembered per path, size and mtime), the
    backend, and the threads and GPU layers the backend reports (MLX reports neither)."""
    from spectui.models.artifacts import file_sha256
    from spectui.models.cost_curves import curve_key
    from spectui.models.registry import resolve_model

    b = config.backend
    threads, gpu_layers = 0, 0
    path = resolve_model(config.target)
    if b.name == "llamacpp":
        # imports llama_cpp: only here, in a worker
        from spectui.engine.backends.llamacpp import default_threads
        from spectui.engine.host.weights import resolve_target

        threads, gpu_layers = b.n_threads or default_threads(), b.n_gpu_layers
        path = resolve_target(config.target, b, probe=False).path  # the embedded default's chosen copy
    return curve_key(file_sha256(path), b.name, threads, gpu_layers)


def short_plan():  # noqa: ANN201 - spectui.tune.runner.TunePlan, imported lazily
    """What a tune from the dashboard runs: the ``TUNE_TIERS`` prompts, ``TUNE_REPS`` checks."""
    from spectui.prompts import list_prompts
    from spectui.tune.runner import TunePlan

    return TunePlan(specs=[s for s in list_prompts() if s.tier in TUNE_TIERS], max_tokens=TUNE_TOKENS, reps=TUNE_REPS)


def format_charts(result: TuneResult, width: int = 60, height: int = 14) -> str:
    """The cost curve and predicted speedup against K per tier, as ``spectui tune`` draws them."""
    from spectui.tune.report import format_charts as charts

    try:
        return charts(result, width=width, height=height)
    except Exception as exc:  # noqa: BLE001 - a chart is a nicety: the numbers above it stand without it
        return f"(charts unavailable: {exc})"


class _Cancelled(Exception):
    """The screen went away: the tune stops at its next step."""


class TuneScreen(Screen[None]):
    DEFAULT_CSS = """
    TuneScreen > #tune-title { height: auto; padding: 0 1; background: $panel; color: $text-primary; text-style: bold; }
    TuneScreen > #tune-body { height: 1fr; padding: 0 1; }
    TuneScreen #tune-detail { width: 1fr; }  /* long verdicts and settings wrap */
    """
    BINDINGS = [
        Binding("t,escape", "back", "Back"),
        Binding("r", "run_tune", "Tune now"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, config: RunConfig, run_job: Callable[[JobRequest], None], *, busy: Callable[[], bool] = lambda: False) -> None:
        """``config``: the dashboard's next run (its target is tuned); ``run_job``: the
        dashboard's way to run a job on its engine thread, on the engine it keeps loaded
        (``DashboardController.run_job``); ``busy()``: a dashboard session is under way (a
        tune is refused then)."""
        super().__init__()
        self.config = config
        self.run_job = run_job
        self.busy = busy
        self.key: str | None = None
        self.result: TuneResult | None = None  # the result shown
        self.loaded = False
        self.tuning: threading.Event | None = None  # set to cancel the tune in flight
        self.status = ""

    def compose(self) -> ComposeResult:
        yield Static("tune: reading the stored result…", id="tune-title")
        with VerticalScroll(id="tune-body"):
            yield Static("", id="tune-detail", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.run_worker(self._load, thread=True, exclusive=True, group="tune-load", exit_on_error=False)

    # -- workers (threads: they only post messages) ----------------------------------------

    def _load(self) -> None:
        if self.config.backend.name == "server":
            self.post_message(TuneLoaded(None, None, "tune measures the embedded engine; a server has no tune result"))
            return
        if self.config.backend.is_runtime:
            self.post_message(TuneLoaded(None, None, f"tune here measures the embedded engine; for {self.config.backend.name}'s own "
                                          f"methods run: spectui tune --runtime {self.config.backend.name}"))
            return
        from spectui.tune.store import load_result

        try:
            key = target_key(self.config)
        except Exception as exc:  # noqa: BLE001 - no such model file, an unreadable one: shown on the screen
            self.post_message(TuneLoaded(None, None, f"cannot find the target: {exc}"))
            return
        self.post_message(TuneLoaded(key, load_result(key)))

    def _tune(self, config: RunConfig) -> threading.Event:
        """Tune ``config``'s target as a job on the dashboard's engine thread, on the engine its
        sessions run on (loaded once for both); returns the event that cancels it."""
        from spectui.engine.embedded import Engine
        from spectui.errors import SpectuiError
        from spectui.sessions.protocol import EngineProtocol
        from spectui.tune.result import TuneResult
        from spectui.tune.runner import tune_config, tune_engine

        plan = short_plan()
        total, done = max(plan.phases(config), 1), 0
        stop = threading.Event()

        def progress(text: str) -> None:
            nonlocal done
            if stop.is_set():
                raise _Cancelled
            done = min(done + 1, total)
            self.post_message(TuneProgress(done, total, text))

        def job(engine: EngineProtocol) -> TuneResult:
            if not isinstance(engine, Engine):  # a runtime's or a node's engine: tune measures models loaded here
                raise SpectuiError(f"tune measures the embedded engine; this target runs on {type(engine).__name__}")
            return tune_engine(engine, config, plan, progress)

        def finished(result: object, error: str) -> None:
            if stop.is_set():
                return
            if not isinstance(result, TuneResult):  # None: the job failed or was stopped (``error`` says)
                self.post_message(TuneFinished(None, error or "no result"))
                return
            from spectui.tune.store import save_result

            stored = save_result(result)
            self.post_message(TuneFinished(result, "" if stored else "(not stored: the cache folder is not writable)"))

        self.post_message(TuneProgress(0, total, "waiting for the engine"))
        self.run_job(JobRequest(
            tune_config(config), job, finished, stop,
            loading=lambda what: self.post_message(TuneProgress(0, total, f"loading {what}")),
        ))
        return stop

    # -- messages --------------------------------------------------------------------------

    def on_tune_loaded(self, msg: TuneLoaded) -> None:
        self.loaded = True
        self.key, self.result = msg.key, msg.result
        if msg.error:
            self._show(f"tune: {msg.error}", "")
            return
        self._show_result()

    def on_tune_progress(self, msg: TuneProgress) -> None:
        width = 24
        fill = width * msg.done // msg.total
        self._title(f"tuning {self._target()}: [{'#' * fill}{'.' * (width - fill)}] {msg.done}/{msg.total} {msg.text}")

    def on_tune_finished(self, msg: TuneFinished) -> None:
        self.tuning = None
        if msg.result is None:
            self._title(f"tune failed: {msg.error}")
            return
        self.result = msg.result
        self.key = msg.result.key or self.key
        self._show_result(note=msg.error)
        self.notify("tune done: result stored", timeout=3)

    # -- drawing ---------------------------------------------------------------------------

    def _target(self) -> str:
        from spectui.ui.labels import model_label

        return model_label(self.config.target)

    def _title(self, text: str) -> None:
        self.status = text
        self.query_one("#tune-title", Static).update(text)

    def _show(self, title: str, body: str) -> None:
        self._title(title)
        self.query_one("#tune-detail", Static).update(body)

    def _show_result(self, note: str = "") -> None:
        if self.result is None:
            self._show(
                f"tune: no result for {self._target()} on this machine yet",
                "No stored `spectui tune` result for this target, backend and thread count.\n\n"
                f"Press r to tune now: the {' and '.join(TUNE_TIERS)} prompt tiers, {TUNE_REPS} check round "
                "(about a minute on the embedded model; refused while a session runs).\n"
                "`spectui tune` in a shell covers every tier.",
            )
            return
        width = max(30, (self.size.width - 6) // 2)
        from spectui.tune.report import format_summary

        body = format_summary(self.result) + "\n\n" + format_charts(self.result, width=width, height=14)
        self._show(f"tune: {self._target()} · r tunes again{' ' + note if note else ''}", body)

    # -- keys ------------------------------------------------------------------------------

    def action_run_tune(self) -> None:
        if self.tuning is not None:
            self.notify("tune is already running", timeout=3)
            return
        if self.busy():
            self.notify("a session is running: stop it (s) before tuning", severity="warning", timeout=4)
            return
        if self.config.backend.name == "server":
            self.notify("tune measures the embedded engine, not a server", severity="warning", timeout=4)
            return
        if self.config.backend.is_runtime:
            self.notify(f"tune here measures the embedded engine: spectui tune --runtime {self.config.backend.name} "
                        "measures the runtime's methods", severity="warning", timeout=6)
            return
        if not self.config.sampling.greedy:
            self.notify("tune measures greedy decoding: set the temperature to 0 ([) first", severity="warning", timeout=4)
            return
        self.tuning = self._tune(self.config)

    def action_back(self) -> None:
        if self.tuning is not None:
            self.tuning.set()  # the tune stops at its next step
            self.notify("tune cancelled", timeout=3)
        self.app.pop_screen()
