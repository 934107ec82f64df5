"""Whole-run plots drawn with plotext: ITL, acceptance per block and memory over time.

plotext 6 rewrote its internals and textual-plotext 1.0.1 still imports the old ones, so the
figure is built here with plotext's public API (the module-level ``plotext.figure``,
``plotext.add_theme``, ``plotext.terminal``) and its ANSI text (``figure.build().string()``)
goes into a Static through ``Text.from_ansi``. Colours are the app theme's (primary, success, accent, secondary,
foreground) turned into plotext themes, so plots follow the theme like everything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import plotext
from rich.text import Text
from textual.color import Color
from textual.widgets import Static

from spectui.metrics.live import LiveRun

if TYPE_CHECKING:
    from spectui.ui.view import DashboardView

#: plotext draws braille: two points per cell across. More points than that per cell only
#: cost build time, so long runs are thinned to this many points per column.
_POINTS_PER_COLUMN = 2


def _rgb(value: str) -> tuple[int, int, int]:
    c = Color.parse(value)
    return (c.r, c.g, c.b)


def _thin(x: Sequence[float], y: Sequence[float], limit: int) -> tuple[list[float], list[float]]:
    """Every n-th point, keeping each stride's maximum (a latency spike must survive)."""
    n = len(x)
    if n <= limit or limit <= 0:
        return list(x), list(y)
    stride = -(-n // limit)
    xs, ys = [], []
    for i in range(0, n, stride):
        chunk = y[i : i + stride]
        j = max(range(len(chunk)), key=chunk.__getitem__)
        xs.append(x[i + j])
        ys.append(chunk[j])
    return xs, ys


def _span(live: LiveRun) -> float:
    """The run's length in seconds: every plot shares this x range, so they line up."""
    ends = [live.token_t_us[-1] / 1e6 if live.token_t_us else 0.0, live.mem_t[-1] if live.mem_t else 0.0]
    if live.end is not None:
        ends.append(live.end.t_us / 1e6)
    return max(max(ends), 1e-3)


def build_plots(live: LiveRun, width: int, height: int, colours: dict[str, str]) -> str:
    """The three stacked plots as ANSI text, ``width`` x ``height`` cells."""
    fg = _rgb(colours.get("foreground", "#c0c0c0"))
    for key, var in (("itl", "primary"), ("acc", "success")):
        plotext.add_theme(f"spectui-{key}", canvas=None, text=fg, sequence=[_rgb(colours.get(var, "#808080"))])
    mem = [_rgb(colours.get("accent", "#808080")), _rgb(colours.get("secondary", "#808080"))]
    plotext.add_theme("spectui-mem", canvas=None, text=fg, sequence=mem)

    # plotext clips figures to the size of the terminal it sees (80x24 when it cannot tell,
    # as under Textual): the widget, not plotext, decides the size here.
    plotext.terminal.limit(False, False)
    fig = plotext.figure
    fig.clear()
    fig.subplots(3, 1)
    fig.plot_size(max(20, width), max(12, height))
    limit = max(16, width * _POINTS_PER_COLUMN)
    span = _span(live)
    # Explicit x ticks: plotext 6 spaces its automatic tick labels apart from the tick marks.
    ticks = [span * i / 5 for i in range(6)]
    labels = [f"{t:.{0 if span >= 10 else 1 if span >= 1 else 2}f}" for t in ticks]

    def panel(row: int, theme: str, title: str) -> object:
        sub = fig.subplot(row, 1)
        sub.theme(theme)
        sub.title(title)
        sub.ruler("x").lim(0, span)
        sub.ruler("x").ticks(ticks, labels)
        return sub

    sub = panel(1, "spectui-itl", "inter-token latency (ms)")
    if live.itl_ms:
        x, y = _thin(live.itl_t, live.itl_ms, limit)
        sub.draw(sub.signal(x, y, marker="braille"))
    sub = panel(2, "spectui-acc", "acceptance per block (accepted / drafted)")
    if live.block_acceptance:
        x, y = _thin(live.block_t, live.block_acceptance, limit)
        sub.draw(sub.signal(x, y, marker="braille"))
        sub.ruler("y").lim(0, 1)  # acceptance is a share: a fixed scale reads across runs
    sub = panel(3, "spectui-mem", "memory: headroom (GiB, left) · RSS (MiB, right)")
    if live.mem_t:
        x, y = _thin(live.mem_t, [h / 2**30 for h in live.headroom], limit)
        sig = sub.signal(x, y, marker="braille")
        sig.lines()
        sig.label("headroom")
        sub.draw(sig)
        x, y = _thin(live.mem_t, [r / 2**20 for r in live.rss], limit)
        sig = sub.signal(x, y, marker="braille", yside="right")
        sig.lines()
        sig.label("RSS")
        sub.draw(sig)
    sub.label("seconds since the start of the run", axis="x")
    return fig.build().string()


class RunPlot(Static):
    DEFAULT_CSS = """
    RunPlot { width: 1fr; height: 1fr; }
    """

    def __init__(self, view: DashboardView, **kwargs) -> None:  # noqa: ANN003
        super().__init__("", markup=False, **kwargs)
        self.view = view
        self._key: tuple | None = None

    def on_resize(self) -> None:
        # Built at the widget's final size (and rebuilt when the terminal changes size).
        self.update_from(self.view.live)

    def update_from(self, live: LiveRun, *, force: bool = False) -> None:
        size = self.content_size
        if size.width < 10 or size.height < 6:
            return
        key = (id(live), live.version, size.width, size.height, self.app.theme)
        if key == self._key and not force:
            return
        self._key = key
        ansi = build_plots(live, size.width, size.height, self.app.theme_variables)
        self.update(Text.from_ansi(ansi, no_wrap=True, end=""))
