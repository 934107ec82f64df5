"""A live signal: caption (name, current value, p50 / p95) beside or above a sparkline.

One row at small sizes (caption left, sparkline right); on tall screens the app adds the
``-tall`` class to the screen and the sparkline gets three rows under its caption.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Static

from spectui.ui.widgets.spark import SparkBars


class SignalPanel(Widget):
    DEFAULT_CSS = """
    SignalPanel {
        layout: horizontal;
        height: 1;
        padding: 0 1;
    }
    SignalPanel > .signal-caption {
        width: 51;
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

    def __init__(self, name: str, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.signal_name = name
        self._caption: tuple = ()

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
        caption = (current, p50, p95, styles)  # styles are baked in: a theme change redraws
        if caption != self._caption:
            self._caption = caption
            text = Text(no_wrap=True, overflow="ellipsis")
            text.append(f"{self.signal_name:<9}", name_style)
            text.append(f"{current:>11}", value_style)
            text.append("  p50 ", muted)
            text.append(f"{p50:>9}", muted)
            text.append("  p95 ", muted)
            text.append(f"{p95:>9}", muted)
            self.query_one(".signal-caption", Static).update(text, layout=False)  # fixed size
        self.query_one(SparkBars).show(data)
