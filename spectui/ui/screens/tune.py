"""The tune screen: the latest ``spectui tune`` result for the dashboard's target, and a short
tune run from the dashboard when there is none (or it is stale).

What it shows is the JSON ``spectui.tune.store`` keeps per target (the same ``tune --json``
prints): the verify-cost curve, the plan per prompt tier with its check, the verdicts, the
settings to use and the plotext charts. The store's key is the target's cost-curve key
(``models.cost_curves.curve_key``), computed here from the config without loading a model.

Reading the store (hashing the model file the first time) and running tune happen in thread
workers: the UI never waits on them. A tune from here is short (``TUNE_TIERS``, one check
round) and refused while a dashboard session runs: two engines on one machine would measure
each other. Leaving the screen cancels a tune in flight (it stops after its current step).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static

from spectui.config import RunConfig
from spectui.sessions.runner import SessionRunner
from spectui.format import num, text_table

#: prompt tiers a tune from the dashboard covers (``spectui tune`` does every tier)
TUNE_TIERS = ("short", "copy")
#: its token budget per prompt (``spectui tune``'s default) and check rounds
TUNE_TOKENS = 160
TUNE_REPS = 1
#: curve sizes shown in the table (as ``spectui tune`` prints them)
SHOWN_SIZES = (2, 3, 4, 5, 8, 9, 12, 16)
#: a prediction and its check agree within this share (``spectui.tune.report.AGREEMENT``)
AGREEMENT = 0.15


def target_key(config: RunConfig) -> str:
    """The key ``spectui tune`` stores ``config``'s target under (``Engine.cost_key()``),
    without loading the model: its file's sha256 (remembered per path, size and mtime), the
    backend, and the threads and GPU layers the backend reports (MLX reports neither)."""
    from spectui.models.artifacts import file_sha256
    from spectui.models.cost_curves import curve_key
    from spectui.models.registry import resolve_model

    b = config.backend
    threads, gpu_layers = 0, 0
    if b.name == "llamacpp":
        from spectui.engine.llamacpp import default_threads  # imports llama_cpp: only here, in a worker

        threads, gpu_layers = b.n_threads or default_threads(), b.n_gpu_layers
    return curve_key(file_sha256(resolve_model(config.target)), b.name, threads, gpu_layers)


def short_plan():  # noqa: ANN201 - spectui.tune.runner.TunePlan, imported lazily
    """What a tune from the dashboard runs: the ``TUNE_TIERS`` prompts, ``TUNE_REPS`` checks."""
    from spectui.prompts import list_prompts
    from spectui.tune.runner import TunePlan

    return TunePlan(specs=[s for s in list_prompts() if s.tier in TUNE_TIERS], max_tokens=TUNE_TOKENS, reps=TUNE_REPS)


def _curve_row(label: str, curve: dict) -> list[str]:
    rel = [c for c in curve.get("relative") or [] if c is not None]
    unit = curve.get("unit_us")
    return [label, str(curve.get("depth", "")), num(None if unit is None else unit / 1000, ".1f", " ms"),
            *(f"{rel[n - 1]:.2f}" if n <= len(rel) else "-" for n in SHOWN_SIZES)]


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def format_result(doc: dict) -> str:
    """The stored result as text: curves, the plan per tier, verdicts and settings."""
    out = [f"{doc.get('model', '?')} ({doc.get('quant', '?')}), {doc.get('threads', '?')} threads, drafter "
           f"{doc.get('drafter', '?')} · measured {doc.get('measured_at') or '?'} · acceptance from {doc.get('acceptance_from', '?')}"]
    out.append("")
    out.append("verify cost: evaluating n tokens at once, in one-token evaluations")
    curves = [_curve_row("prompt depth", doc["curve"])] if doc.get("curve") else []
    if doc.get("long_curve"):
        curves.append(_curve_row("long context", doc["long_curve"]))
    out.append(text_table(["at", "depth", "1 token", *(f"n={n}" for n in SHOWN_SIZES)], curves,
                          right=set(range(1, 3 + len(SHOWN_SIZES))), rules_before={0}))
    if doc.get("draft_cost"):
        out.append(f"  draft model: {doc['draft_cost']:.2f} target one-token evaluations per drafted token")
    out.append("")
    out.append("plan per tier (predicted from the curve, checked by real runs)")
    rows = []
    for t in doc.get("tiers", []):
        agree = t.get("agreement")
        off = "-" if agree is None else f"{agree:+.0%}" + ("" if abs(agree) <= AGREEMENT else " !")
        rows.append([t.get("tier", "?"), (t.get("best") or {}).get("label", "?"), num(t.get("acceptance"), ".2f"),
                     num(t.get("break_even"), ".2f"), _x(t.get("predicted")), _x(t.get("measured")), off,
                     _x(t.get("copy_ceiling")), _x(t.get("perfect_ceiling"))])
    # the last two: what the weights allow (``spectui.tune.ceiling``)
    out.append(text_table(["tier", "setting", "accept", "break-even", "predicted", "measured", "off by",
                           "copying at best", "perfect drafter"], rows, right={2, 3, 4, 5, 6, 7, 8}, rules_before={0}))
    out.append("")
    out.extend(f"  {t['verdict']}" for t in doc.get("tiers", []) if t.get("verdict"))
    out.append("")
    out.append("settings to use")
    out.extend(f"  {line}" for line in doc.get("settings", []))
    return "\n".join(out)


@dataclass
class _ChartCurve:
    relative: list[float]


@dataclass
class _ChartTier:
    tier: str
    predicted: dict[str, float]


@dataclass
class _ChartResult:
    """The part of a ``TuneResult`` ``spectui.tune.report.format_charts`` reads, from the JSON:
    the same charts as ``spectui tune`` prints."""

    curve: _ChartCurve | None
    long_curve: _ChartCurve | None
    draft_cost: float
    tiers: list[_ChartTier]
    drafter: str = "ngram"

    @classmethod
    def of(cls, doc: dict) -> _ChartResult:
        def curve(c: dict | None) -> _ChartCurve | None:
            rel = [v for v in (c or {}).get("relative") or [] if v is not None]
            return _ChartCurve(rel) if rel else None

        tiers = [_ChartTier(t.get("tier", "?"), {k: math.nan if v is None else v for k, v in (t.get("predicted_by_setting") or {}).items()})
                 for t in doc.get("tiers", [])]
        return cls(curve(doc.get("curve")), curve(doc.get("long_curve")), doc.get("draft_cost") or 0.0, tiers,
                   doc.get("drafter") or "ngram")


def format_charts(doc: dict, width: int = 60, height: int = 14) -> str:
    """The cost curve and predicted speedup against K per tier, as ``spectui tune`` draws them."""
    from spectui.tune.report import format_charts as charts

    try:
        return charts(_ChartResult.of(doc), width=width, height=height)
    except Exception as exc:  # a chart is a nicety: the numbers above it stand without it
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

    class Loaded(Message):
        def __init__(self, key: str | None, doc: dict | None, error: str = "") -> None:
            super().__init__()
            self.key, self.doc, self.error = key, doc, error

    class Progress(Message):
        def __init__(self, done: int, total: int, text: str) -> None:
            super().__init__()
            self.done, self.total, self.text = done, total, text

    class Finished(Message):
        def __init__(self, doc: dict | None, error: str = "") -> None:
            super().__init__()
            self.doc, self.error = doc, error

    def __init__(self, config: RunConfig, service: SessionRunner, *, busy: Callable[[], bool] = lambda: False) -> None:
        """``config``: the dashboard's next run (its target is tuned); ``service``: the
        dashboard's engine thread, which runs the tune on the engine it keeps loaded;
        ``busy()``: a dashboard session is under way (a tune is refused then)."""
        super().__init__()
        self.config = config
        self.service = service
        self.busy = busy
        self.key: str | None = None
        self.doc: dict | None = None
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
            self.post_message(self.Loaded(None, None, "tune measures the embedded engine; a server has no tune result"))
            return
        from spectui.tune.store import load_result

        try:
            key = target_key(self.config)
        except Exception as exc:  # no such model file, an unreadable one
            self.post_message(self.Loaded(None, None, f"cannot find the target: {exc}"))
            return
        self.post_message(self.Loaded(key, load_result(key)))

    def _tune(self, config: RunConfig) -> threading.Event:
        """Tune ``config``'s target as a job on the dashboard's engine thread, on the engine its
        sessions run on (loaded once for both); returns the event that cancels it."""
        from spectui.sessions.runner import JobRequest
        from spectui.tune.runner import tune_config, tune_engine

        plan = short_plan()
        total, done = max(plan.phases(config), 1), 0
        stop = threading.Event()

        def progress(text: str) -> None:
            nonlocal done
            if stop.is_set():
                raise _Cancelled
            done = min(done + 1, total)
            self.post_message(self.Progress(done, total, text))

        def finished(result: object, error: str) -> None:
            if stop.is_set():
                return
            if result is None:
                self.post_message(self.Finished(None, error or "no result"))
                return
            from spectui.tune.report import to_json
            from spectui.tune.store import save_result

            stored = save_result(result)
            doc = {"key": result.key, "measured_at": result.measured_at, **to_json(result)}
            self.post_message(self.Finished(doc, "" if stored else "(not stored: the cache folder is not writable)"))

        self.post_message(self.Progress(0, total, "waiting for the engine"))
        self.service.submit(JobRequest(
            tune_config(config), lambda engine: tune_engine(engine, config, plan, progress), finished, stop,
            loading=lambda what: self.post_message(self.Progress(0, total, f"loading {what}")),
        ))
        return stop

    # -- messages --------------------------------------------------------------------------

    def on_tune_screen_loaded(self, msg: Loaded) -> None:
        self.loaded = True
        self.key, self.doc = msg.key, msg.doc
        if msg.error:
            self._show(f"tune: {msg.error}", "")
            return
        self._show_doc()

    def on_tune_screen_progress(self, msg: Progress) -> None:
        width = 24
        fill = width * msg.done // msg.total
        self._title(f"tuning {self._target()}: [{'#' * fill}{'.' * (width - fill)}] {msg.done}/{msg.total} {msg.text}")

    def on_tune_screen_finished(self, msg: Finished) -> None:
        self.tuning = None
        if msg.doc is None:
            self._title(f"tune failed: {msg.error}")
            return
        self.doc = msg.doc
        self.key = msg.doc.get("key") or self.key
        self._show_doc(note=msg.error)
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

    def _show_doc(self, note: str = "") -> None:
        if self.doc is None:
            self._show(
                f"tune: no result for {self._target()} on this machine yet",
                "No stored `spectui tune` result for this target, backend and thread count.\n\n"
                f"Press r to tune now: the {' and '.join(TUNE_TIERS)} prompt tiers, {TUNE_REPS} check round "
                "(about a minute on the embedded model; refused while a session runs).\n"
                "`spectui tune` in a shell covers every tier.",
            )
            return
        width = max(30, (self.size.width - 6) // 2)
        body = format_result(self.doc) + "\n\n" + format_charts(self.doc, width=width, height=14)
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
        if not self.config.sampling.greedy:
            self.notify("tune measures greedy decoding: set the temperature to 0 ([) first", severity="warning", timeout=4)
            return
        self.tuning = self._tune(self.config)

    def action_back(self) -> None:
        if self.tuning is not None:
            self.tuning.set()  # the tune stops at its next step
            self.notify("tune cancelled", timeout=3)
        self.app.pop_screen()
