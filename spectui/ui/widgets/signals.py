"""A live signal: caption (name, current value, p50 / p95) beside or above a sparkline.

One row at small sizes (caption left, sparkline right); on tall screens the app adds the
``-tall`` class to the screen and the sparkline gets three rows under its caption.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Static

from spectui.format import DASH, num, pct, size
from spectui.metrics.live import LiveRun, percentiles
from spectui.metrics.stats import Summary
from spectui.ui.widgets.spark import SparkBars

CAPTION_WIDTH = 51


class SignalPanel(Widget):
    DEFAULT_CSS = """
    SignalPanel {
        layout: horizontal;
        height: 1;
        padding: 0 1;
    }
    SignalPanel > .signal-caption {
        width: 51;  /* CAPTION_WIDTH */
        height: 1;
    }
    SignalPanel > SparkBars {
        width: 1fr;
        height: 1;
    }
    SignalPanel > .signal-panel--name { color: $text-primary; text-style: bold; }
    SignalPanel > .signal-panel--value { color: $foreground; text-style: bold; }
    SignalPanel > .signal-panel--muted { color: $text-muted; }
    """
    COMPONENT_CLASSES = {"signal-panel--name", "signal-panel--value", "signal-panel--muted"}

    def __init__(self, name: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.signal_name = name
        self._caption: tuple = ()
        self._shown: tuple | None = None

    def on_resize(self) -> None:
        if self._shown is not None:  # the caption's layout depends on the width
            self.call_after_refresh(lambda: self.show(*self._shown))

    def compose(self) -> ComposeResult:
        yield Static(self.signal_name, classes="signal-caption", markup=False)
        yield SparkBars()

    def show(self, current: str, p50: str, p95: str, data: Sequence[float]) -> None:
        """Update the caption and the sparkline (which shows the most recent points that fit,
        one bar each; the plot view has the whole run)."""
        get = self.get_component_rich_style
        name_style, value_style, muted = styles = tuple(
            get(f"signal-panel--{part}") for part in ("name", "value", "muted")
        )
        self._shown = (current, p50, p95, data)
        caption_widget = self.query_one(".signal-caption", Static)
        # Aligned columns where there is room (51 cells); packed tight in a narrow column, and
        # in a very narrow one the percentiles go, p95 first, so the current value stays.
        room = caption_widget.size.width
        wide = room >= CAPTION_WIDTH or room == 0
        caption = (current, p50, p95, styles, wide or room)  # styles are baked in: a theme change redraws
        if caption != self._caption:
            self._caption = caption
            w = (9, 11, 9) if wide else (0, 0, 0)
            text = Text(no_wrap=True, overflow="ellipsis")
            text.append(f"{self.signal_name:<{w[0]}}", name_style)
            text.append(f"{current:>{w[1]}}" if wide else f" {current}", value_style)
            for label, value in (("p50", p50), ("p95", p95)):
                lead, shown = (f"  {label} " if wide else f" {label} "), f"{value:>{w[2]}}"
                if not wide and text.cell_len + len(lead) + len(shown) > room:
                    break
                text.append(lead, muted)
                text.append(shown, muted)
            caption_widget.update(text, layout=False)  # fixed size
        self.query_one(SparkBars).show(data)


class SignalGroup(Vertical):
    """The three live signals of one run: inter-token latency, acceptance per block, headroom;
    under them, once the run crossed a limit of its declared envelope, a breach row: when and
    which limit (``breach 00:42 headroom 8.1 GiB < floor 10.0 GiB``), there until the next run.
    (The main screen has one; the compare screen one per column.)"""

    DEFAULT_CSS = """
    SignalGroup { height: auto; }
    SignalGroup > #signal-breach {
        height: 1;
        padding: 0 1;
        color: $text-warning;
        text-style: bold;
        display: none;
    }
    """

    _breach: str | None = None  # the breach row's text as last drawn

    def compose(self) -> ComposeResult:
        yield SignalPanel("ITL", id="signal-itl")
        yield SignalPanel("accept", id="signal-acceptance")
        yield SignalPanel("headroom", id="signal-headroom")
        yield Static("", id="signal-breach", markup=False)

    def show_breach(self, text: str) -> None:
        """The breach row: ``text`` (from ``DashboardView.breach_marker``), hidden when ""."""
        if text != self._breach:
            self._breach = text
            row = self.query_one("#signal-breach", Static)
            row.update(Text(f"⚠ {text}", no_wrap=True, overflow="ellipsis") if text else "")
            row.display = bool(text)

    def show_run(self, live: LiveRun, summary: Summary, mode: str, breach: str = "") -> None:
        """Draw ``live``'s signals and its breach row (``DashboardView.breach_marker``; "" = none)."""
        self.show_breach(breach)
        itl = live.itl_ms
        # "Now" is the latest wait between deliveries: tokens of one block share a timestamp,
        # so the very last gap is usually 0 in a speculative run and says nothing.
        last_wait = next((v for v in reversed(itl) if v > 0), 0.0) if itl else None
        self.query_one("#signal-itl", SignalPanel).show(
            num(last_wait, ".2f", " ms"), num(summary.itl_p50_ms, ".2f"), num(summary.itl_p95_ms, ".2f"), itl
        )
        acc = live.block_acceptance
        a50, a95 = percentiles(acc)
        self.query_one("#signal-acceptance", SignalPanel).show(
            pct(acc[-1]) if acc else ("AR" if mode == "ar" else DASH), pct(a50), pct(a95), acc
        )
        head = live.headroom
        h50, h95 = percentiles(head)
        self.query_one("#signal-headroom", SignalPanel).show(
            size(head[-1]) if head else DASH,
            size(int(h50)) if head else DASH,
            size(int(h95)) if head else DASH,
            head,
        )
