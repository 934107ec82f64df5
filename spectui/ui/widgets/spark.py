"""A cheap sparkline: one bar per point, one or more rows tall, drawn through the line API.

Textual's own ``Sparkline`` renders each bar as a rich renderable with a blended colour on
every repaint; three of them at 12 repaints a second cost more CPU than the rest of the
dashboard, and on a two-core machine that CPU is taken from the engine (see
``benchmarks/dashboard_vs_headless.py``). Here the rows are built once per change of data,
size or theme and handed to the compositor as cached strips; colours are quantised to a few
steps between the min and max colour so a row is a handful of segments, not one per bar.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

BARS = " ▁▂▃▄▅▆▇█"
COLOUR_STEPS = 6
#: Points kept: more than any terminal is wide, so a resize never waits for new data.
KEEP = 1024


def bar_levels(data: Sequence[float], rows: int) -> list[int]:
    """Each point's height in eighths of a cell, 1 .. 8*rows (the lowest point still shows)."""
    if not data:
        return []
    lo, hi = min(data), max(data)
    top = 8 * rows
    if hi <= lo:
        return [top // 2 or 1] * len(data)
    scale = (top - 1) / (hi - lo)
    return [1 + round((v - lo) * scale) for v in data]


class SparkBars(Widget):
    DEFAULT_CSS = """
    SparkBars { height: 1; }
    SparkBars > .spark-bars--min-color { color: $primary 60%; }
    SparkBars > .spark-bars--max-color { color: $accent; }
    """
    COMPONENT_CLASSES = {"spark-bars--min-color", "spark-bars--max-color"}

    def __init__(self, **kwargs) -> None:  # noqa: ANN003 - Textual's widget keywords (id, classes, ...), passed on
        super().__init__(**kwargs)
        self._data: tuple[float, ...] = ()
        self._key: tuple | None = None
        self._strips: list[Strip] = []

    @property
    def data(self) -> tuple[float, ...]:
        return self._data

    def show(self, data: Sequence[float]) -> None:
        """Show the last points that fit (one bar each); repaints only when they changed."""
        tail = tuple(data[-KEEP:])
        if tail != self._data:
            self._data = tail
            self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._key = None  # a theme change: colours again

    def _build(self) -> list[Strip]:
        width, rows = self.size.width, max(1, self.size.height)
        base = self.rich_style
        key = (self._data, width, rows, base)
        if key == self._key:
            return self._strips
        get = self.get_component_rich_style
        lo_c = get("spark-bars--min-color").color or Color.default()
        hi_c = get("spark-bars--max-color").color or Color.default()
        lo_t, hi_t = lo_c.get_truecolor(), hi_c.get_truecolor()
        palette = [
            base + Style(color=Color.from_rgb(*(a + (b - a) * i / (COLOUR_STEPS - 1) for a, b in zip(lo_t, hi_t))))
            for i in range(COLOUR_STEPS)
        ]
        data = self._data[-width:] if width else ()
        levels = bar_levels(data, rows)
        top = 8 * rows
        colour = [min(COLOUR_STEPS - 1, (lv - 1) * COLOUR_STEPS // top) for lv in levels]
        strips = []
        for y in range(rows):
            floor = 8 * (rows - 1 - y)  # eighths below this row
            segments: list[Segment] = []
            run: list[str] = []
            run_style: Style | None = None
            for lv, ci in zip(levels, colour):
                ch = BARS[max(0, min(8, lv - floor))]
                style = palette[ci]
                if style is not run_style and run:
                    segments.append(Segment("".join(run), run_style))
                    run = []
                run_style = style
                run.append(ch)
            if run:
                segments.append(Segment("".join(run), run_style))
            pad = width - len(levels)
            if pad > 0:
                segments.append(Segment(" " * pad, base))
            strips.append(Strip(segments, max(width, len(levels))))
        self._key, self._strips = key, strips
        return strips

    def render_line(self, y: int) -> Strip:
        strips = self._build()
        return strips[y] if y < len(strips) else Strip.blank(self.size.width, self.rich_style)
