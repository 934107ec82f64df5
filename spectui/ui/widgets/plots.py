"""Whole-run plots: ITL, acceptance per block and memory over time, or what to do before a run.

The chart helper every report uses (``spectui.charts``) draws them as ANSI text, which goes
into a Static through ``Text.from_ansi``. Colours are the app theme's (primary, success,
accent, secondary, foreground) turned into plotext themes, so plots follow the theme like
everything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.text import Text
from textual.color import Color
from textual.widgets import Static

from spectui.charts import Axis, Panel, Series, define_theme, render
from spectui.metrics.live import LiveRun

if TYPE_CHECKING:
    from spectui.ui.view import DashboardView

#: plotext draws braille: two points per cell across. More points than that per cell only
#: cost build time, so long runs are thinned to this many points per column.
_POINTS_PER_COLUMN = 2
#: The least scale of the memory panel's axes: changes smaller than these are noise to a
#: person watching memory (page cache, allocator slack), not a trend worth a whole panel.
HEADROOM_SPAN_GIB = 0.25
RSS_SPAN_MIB = 64.0


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


#: What the plot view says before there is a run to plot.
EMPTY = (
    "Nothing to plot yet.\n\n"
    "Press r to run the prompt (or o to open a recording): this view then plots its\n"
    "inter-token latency, acceptance per block and memory over the whole run."
)


def plot_panels(live: LiveRun, points: int = 160) -> list[Panel]:
    """The three stacked plots of a run, in the units a person reads (ms, %, GiB/MiB), each
    series thinned to ``points``."""

    def _thin_run(x: Sequence[float], y: Sequence[float]) -> tuple[list[float], list[float]]:
        return _thin(x, y, points)

    span = _span(live)
    x = Axis(lim=(0, span), label="seconds since the start of the run")
    itl = [Series(*_thin_run(live.itl_t, live.itl_ms), marker="braille", lines=False)] if live.itl_ms else []
    acc = (
        [Series(*_thin_run(live.block_t, [a * 100 for a in live.block_acceptance]), marker="braille", lines=False)]
        if live.block_acceptance
        else []
    )
    mem = []
    if live.mem_t:
        mem.append(Series(*_thin_run(live.mem_t, [h / 2**30 for h in live.headroom]), label="headroom", marker="braille"))
        mem.append(Series(*_thin_run(live.mem_t, [r / 2**20 for r in live.rss]), label="RSS", marker="braille", right=True))
    return [
        Panel("inter-token latency (ms)", itl, x=x, theme="spectui-itl"),
        # acceptance is a share: a fixed 0-100% scale reads the same across runs
        Panel("acceptance per block (% of drafted tokens accepted)", acc, x=x, y=Axis(lim=(0, 100)), theme="spectui-acc"),
        # memory moves by MiB while a run is steady: at least HEADROOM_SPAN_GIB / RSS_SPAN_MIB
        # of scale, so a flat line reads as flat, not as a zoom into its noise; a flat headroom
        # sits high (room to fall), a flat RSS low (room to grow), never one over the other
        Panel(
            "memory: headroom (GiB, left) · RSS (MiB, right)", mem, x=x, theme="spectui-mem",
            y=Axis(min_span=HEADROOM_SPAN_GIB, anchor=0.75), y_right=Axis(min_span=RSS_SPAN_MIB, anchor=0.25),
        ),
    ]


def build_plots(live: LiveRun, width: int, height: int, colours: dict[str, str]) -> str:
    """The three stacked plots as ANSI text, ``width`` x ``height`` cells, or ``EMPTY``."""
    fg = _rgb(colours.get("foreground", "#c0c0c0"))
    for key, var in (("itl", "primary"), ("acc", "success")):
        define_theme(f"spectui-{key}", text=fg, sequence=[_rgb(colours.get(var, "#808080"))])
    mem = [_rgb(colours.get("accent", "#808080")), _rgb(colours.get("secondary", "#808080"))]
    define_theme("spectui-mem", text=fg, sequence=mem)
    panels = plot_panels(live, max(16, width * _POINTS_PER_COLUMN))
    return render(panels, width=width, height=max(12, height), colour=True, empty=EMPTY)


class RunPlot(Static):
    DEFAULT_CSS = """
    RunPlot { width: 1fr; height: 1fr; }
    """

    def __init__(self, view: DashboardView, **kwargs) -> None:  # noqa: ANN003 - Textual's widget keywords (id, classes, ...), passed on
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
