"""Charts for every report and screen, drawn with plotext: one place decides ticks, units and
layout, so every chart reads the same way.

Callers describe what to draw in the units a person reads (percent, MiB, wall-clock time) as
``Panel``s of ``Series``; ``render`` lays them out and returns text. Every tick is placed and
labelled here (``nice_ticks``, ``time_axis``) because plotext's own labels turn to scientific
notation for small or large numbers (``7.42e-3``) and, in plotext 6, sit apart from their marks.

plotext 6 rewrote its internals and textual-plotext still imports the old ones, so the figure
is built with plotext's public API and returned as text (ANSI when ``colour``); the dashboard
puts that text into a widget. plotext loads on the first chart, never with the module.
Imports nothing of spectui: every layer may draw a chart.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

#: How many ticks an axis aims for: enough to read a value off, few enough to stay legible.
TICKS = 5
#: An axis drawn from the data spans at least this share of its values' magnitude: a series
#: that barely moves reads as flat, never as a zoom into its noise (a run's headroom once
#: filled a panel from 23.02518 to 23.02520 GiB, ticks six decimals deep).
MIN_RELATIVE_SPAN = 0.01


@dataclass(frozen=True)
class Series:
    """One line of a panel, in the units its axis is labelled in."""

    x: Sequence[float]
    y: Sequence[float]
    label: str = ""
    marker: str = "dot"  # "braille" for dense lines (two points per cell across)
    lines: bool = True
    right: bool = False  # drawn against the right-hand y axis

    def points(self) -> list[tuple[float, float]]:
        """The finite points (a number a run did not have is NaN: left out, not drawn at 0)."""
        return [(float(a), float(b)) for a, b in zip(self.x, self.y) if math.isfinite(a) and math.isfinite(b)]


@dataclass(frozen=True)
class Axis:
    """Fixed limits and/or ticks of an axis; what is left out is computed from the data."""

    lim: tuple[float, float] | None = None
    ticks: Sequence[float] | None = None
    labels: Sequence[str] | None = None
    label: str = ""
    #: drawn from the data, the axis spans at least this much, in its own units (memory in
    #: MiB: a change smaller than a few MiB is not worth a panel), besides ``MIN_RELATIVE_SPAN``
    min_span: float = 0.0
    #: where values closer together than that sit in the widened span: 0.5 in its middle, lower
    #: to leave room above them (RSS that may grow), higher for room below (headroom that may
    #: fall); two flat series of one panel then do not draw over each other
    anchor: float = 0.5


@dataclass(frozen=True)
class Panel:
    title: str
    series: Sequence[Series] = ()
    x: Axis = field(default_factory=Axis)
    y: Axis = field(default_factory=Axis)
    y_right: Axis = field(default_factory=Axis)
    theme: str = ""  # a plotext theme (``define_theme``); "" keeps plotext's default

    def has_points(self) -> bool:
        return any(s.points() for s in self.series)


def _decimals(step: float) -> int:
    """The fewest decimals that write ``step`` exactly (0.25 -> 2, 200 -> 0)."""
    if not step > 0:
        return 0
    return next((d for d in range(12) if abs(round(step, d) - step) <= step * 1e-6), 12)


def plain_number(value: float, decimals: int) -> str:
    """A tick label: fixed-point, never scientific notation, ``-0`` read as ``0``."""
    text = f"{value:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def nice_ticks(
    lo: float, hi: float, n: int = TICKS, *, min_span: float = 0.0, anchor: float = 0.5
) -> tuple[tuple[float, float], list[float], list[str]]:
    """(limits, tick values, labels) covering ``lo``..``hi`` at a round step (1, 2, 2.5 or 5 x 10^k):
    ``nice_ticks(74.2, 75.8)`` ticks 74.0, 74.5 ... 76.0. One value gets a small span around it,
    and values closer together than ``min_span`` or ``MIN_RELATIVE_SPAN`` of their magnitude
    get that span, with them at ``anchor`` of its height (never below 0 for values that are not)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = 0.0, 1.0
    if hi < lo:
        lo, hi = hi, lo
    if hi - lo < 1e-12:
        pad = max(abs(lo) * 0.05, 1e-3) if lo else 1.0
        lo, hi = lo - pad, hi + pad
    floor = max(min_span, MIN_RELATIVE_SPAN * max(abs(lo), abs(hi)))
    if hi - lo < floor:
        below = (floor - (hi - lo)) * min(1.0, max(0.0, anchor))
        widened = (lo - below, lo - below + floor)
        if lo >= 0 > widened[0]:  # memory, a count: an axis of positive values starts at 0 at the lowest
            widened = (0.0, floor)
        lo, hi = widened
    raw = (hi - lo) / max(1, n - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first, last = math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
    count = int(round((last - first) / step)) + 1
    values = [first + i * step for i in range(count)]
    return (first, last), values, [plain_number(v, _decimals(step)) for v in values]


def time_axis(times: Sequence[dt.datetime], n: int = TICKS) -> tuple[list[float], Axis]:
    """Positions (seconds since the first time) and an axis labelled in wall-clock time, in the
    times' own zone: ``HH:MM`` within a day (with seconds under ten minutes), ``MM-DD HH:MM``
    within a week, ``YYYY-MM-DD`` beyond."""
    if not times:
        return [], Axis()
    t0 = times[0]
    xs = [(t - t0).total_seconds() for t in times]
    lo, hi = min(xs), max(xs)
    span = hi - lo
    if span < 1:
        lo, hi = lo - 60, hi + 60  # one run, or runs in the same second: a two-minute window
        span = hi - lo
    fmt = "%H:%M:%S" if span < 600 else "%H:%M" if span < 86400 else "%m-%d %H:%M" if span < 7 * 86400 else "%Y-%m-%d"
    ticks = [lo + span * i / (n - 1) for i in range(n)]
    labels = [(t0 + dt.timedelta(seconds=v)).strftime(fmt) for v in ticks]
    zone = t0.tzname() or "local time"
    return xs, Axis(lim=(lo, hi), ticks=ticks, labels=labels, label=f"time ({zone})")


def define_theme(name: str, *, text: tuple[int, int, int], sequence: Sequence[tuple[int, int, int]]) -> None:
    """A plotext theme of text colour and line colours (the dashboard's theme variables)."""
    import plotext

    plotext.add_theme(name, canvas=None, text=text, sequence=list(sequence))


def _axis_ticks(axis: Axis, values: list[float], n: int = TICKS) -> tuple[tuple[float, float], list[float], list[str]]:
    """The axis's own limits and ticks where given, round ones from the data otherwise."""
    if axis.ticks is not None:
        ticks = list(axis.ticks)
        labels = list(axis.labels) if axis.labels is not None else nice_labels(ticks)
        lim = axis.lim or (min(ticks), max(ticks))
        return lim, ticks, labels
    if axis.lim is not None:
        lo, hi = axis.lim
        _, ticks, labels = nice_ticks(lo, hi, n)
        kept = [(t, s) for t, s in zip(ticks, labels) if lo - 1e-9 <= t <= hi + 1e-9]
        return axis.lim, [t for t, _ in kept], [s for _, s in kept]
    if not values:
        return (0.0, 1.0), [], []
    return nice_ticks(min(values), max(values), n, min_span=axis.min_span, anchor=axis.anchor)


def nice_labels(ticks: Sequence[float]) -> list[str]:
    """Labels for given tick values, with as many decimals as their spacing needs."""
    steps = [abs(b - a) for a, b in zip(ticks, ticks[1:]) if b != a]
    decimals = _decimals(min(steps)) if steps else 0
    return [plain_number(t, decimals) for t in ticks]


def render(panels: Sequence[Panel], *, width: int, height: int, cols: int = 1, colour: bool = False, empty: str = "") -> str:
    """The panels in a grid of ``cols`` columns, ``width`` x ``height`` cells in all.

    With ``empty`` given and no panel holding a point, that text comes back instead of frames
    with nothing in them. A panel without points keeps its frame, titled ``(no data)``."""
    if empty and not any(p.has_points() for p in panels):
        return empty
    import plotext

    # plotext clips figures to the terminal it sees (80x24 when it cannot tell): the caller,
    # not plotext's terminal probe, decides the size.
    plotext.terminal.limit(False, False)
    fig = plotext.figure
    fig.clear()
    rows = max(1, math.ceil(len(panels) / cols))
    fig.subplots(rows, cols)
    fig.plot_size(max(20, width), max(6, height))
    # rows inside a panel's frame (less its title, frame, tick labels and axis label): a tick
    # every other row at most, or plotext drops labels that collide
    inner_rows = max(6, height) // rows - 5
    y_ticks = max(2, min(TICKS, (inner_rows + 1) // 2))
    for i, panel in enumerate(panels):
        sub = fig.subplot(i // cols + 1, i % cols + 1)
        _draw_panel(sub, panel, y_ticks)
    text = fig.build().string()
    return text if colour else plotext.uncolorize(text)


def _draw_panel(sub, panel: Panel, y_ticks: int) -> None:  # noqa: ANN001 - a plotext subplot
    if panel.theme:
        sub.theme(panel.theme)
    drawn = [(s, s.points()) for s in panel.series]
    drawn = [(s, pts) for s, pts in drawn if pts]
    sub.title(panel.title if drawn else f"{panel.title} (no data)")
    xs = [x for _, pts in drawn for x, _ in pts]
    lim, ticks, labels = _axis_ticks(panel.x, xs)
    sub.ruler("x").lim(*lim)
    sub.ruler("x").ticks(ticks, labels)
    if panel.x.label:
        sub.label(panel.x.label, axis="x")
    for side, axis, right in (("left", panel.y, False), ("right", panel.y_right, True)):
        ys = [y for s, pts in drawn if s.right == right for _, y in pts]
        if right and not ys:
            continue
        lim, ticks, labels = _axis_ticks(axis, ys, y_ticks)
        sub.ruler("y", side).lim(*lim)
        sub.ruler("y", side).ticks(ticks, labels)
    for s, pts in drawn:
        sig = sub.signal([p[0] for p in pts], [p[1] for p in pts], marker=s.marker, yside="right" if s.right else None)
        if s.lines:
            sig.lines()
        if s.label:
            sig.label(s.label)
        sub.draw(sig)
