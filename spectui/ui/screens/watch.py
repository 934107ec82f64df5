"""The watch screen: a server that is already serving, from its ``/metrics`` alone.

It draws a ``WatchBoard`` (``spectui.watch.board``: live samples or a recording's, the screen
cannot tell them apart but for the title): the numbers now and over the whole watch, the
acceptance per draft position as bars, sparklines like a run's (generated tokens/s, requests
running and waiting, acceptance, mean accepted length, the server process's RSS and CPU), and
the notes: what the server does not report, that llama-server counts a request when it
finishes (so acceptance has a bar only where requests finished, never a flat line), what is
missing and how to turn it on.

Samples arrive as messages on the app; the board changes there and this screen redraws on a
timer of its own when the board moved, so a replay at max speed costs one repaint, not one
per reading.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, Static

from spectui.format import DASH, num, pct, size
from spectui.metrics.live import percentiles
from spectui.ui.widgets.signals import SignalPanel
from spectui.watch.board import WatchBoard

#: seconds between redraws (when the board changed)
REDRAW_S = 0.25
#: cells of a per-position bar
BAR_CELLS = 20
_EIGHTHS = " ▏▎▍▌▋▊▉█"


def bar(share: float, cells: int = BAR_CELLS) -> str:
    """``share`` (0..1) as a bar of ``cells`` cells, in eighths."""
    eighths = round(max(0.0, min(1.0, share)) * cells * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (_EIGHTHS[part] if part else "")).ljust(cells)


def position_text(rows: Sequence[tuple[int, float, float | None]], width: int) -> str:
    """One line per draft position in ``width`` cells: the watch's acceptance as a bar and a
    percentage, then (where there is room) the last interval's."""
    with_last = width - 27 >= 8
    cells = max(4, min(BAR_CELLS * 2, width - (27 if with_last else 14)))
    lines = []
    for pos, whole, last in rows:
        line = f"pos {pos:>2} {bar(whole, cells)} {pct(whole):>6}"
        if with_last:
            line += f"  last {pct(last) if last is not None else DASH:>6}"
        lines.append(line)
    return "\n".join(lines)


class WatchScreen(Screen[None]):
    DEFAULT_CSS = """
    WatchScreen { layout: vertical; }
    WatchScreen > #watch-title {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $text-primary;
        text-style: bold;
    }
    WatchScreen > #watch-main { height: 1fr; min-height: 6; }
    WatchScreen #watch-stats, WatchScreen #watch-positions {
        text-wrap: nowrap;
        text-overflow: ellipsis;
        height: 1fr;
        border: round $primary 40%;
        border-title-color: $text-primary;
        padding: 0 1;
    }
    WatchScreen #watch-stats { width: 48; }
    WatchScreen #watch-positions { width: 1fr; }
    WatchScreen > #watch-signals { height: auto; background: $surface; }
    WatchScreen > #watch-notes {
        height: auto;
        max-height: 6;
        padding: 0 1;
        color: $text-warning;
    }
    """
    BINDINGS = [Binding("q", "app.quit", "Quit")]

    def __init__(self, board: WatchBoard) -> None:
        super().__init__()
        self.board = board
        self._drawn = -1

    def compose(self) -> ComposeResult:
        yield Static("", id="watch-title", markup=False)
        with Horizontal(id="watch-main"):
            yield Static("", id="watch-stats", markup=False)
            yield Static("", id="watch-positions", markup=False)
        with Vertical(id="watch-signals"):
            yield SignalPanel("tok/s", id="signal-tok-s")
            yield SignalPanel("running", id="signal-running")
            yield SignalPanel("waiting", id="signal-waiting")
            yield SignalPanel("accept", id="signal-accept")
            yield SignalPanel("mean len", id="signal-length")
            yield SignalPanel("RSS", id="signal-rss")
            yield SignalPanel("CPU", id="signal-cpu")
        yield Static("", id="watch-notes", markup=False)
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one("#watch-stats", Static).border_title = "now · whole watch"
        self.query_one("#watch-positions", Static).border_title = "acceptance per draft position"
        self.set_interval(REDRAW_S, self.redraw)
        self.call_after_refresh(self.redraw)

    def invalidate(self) -> None:
        """Draw again at the next tick even if the board did not move (a new size, a theme)."""
        self._drawn = -1

    def on_resize(self) -> None:
        self.invalidate()  # the bars and captions were laid out for the old width

    def redraw(self) -> None:
        board = self.board
        if board.version == self._drawn:
            return
        try:
            self._draw(board)
        except NoMatches:  # not mounted yet, or being torn down
            return
        self._drawn = board.version

    def _draw(self, board: WatchBoard) -> None:
        self.query_one("#watch-title", Static).update(board.title())
        rows = board.stat_rows()
        width = max(len(k) for k, _ in rows)
        self.query_one("#watch-stats", Static).update(Text("\n".join(f"{k:<{width}}  {v}" for k, v in rows), no_wrap=True, overflow="ellipsis"))
        self.query_one("#watch-positions", Static).update(self._positions(board))
        s = board.series
        self._signal("#signal-tok-s", s.tok_s, ".1f")
        self._signal("#signal-running", s.running, ".0f")
        self._signal("#signal-waiting", s.waiting, ".0f")
        acc = s.acceptance
        a50, a95 = percentiles(acc)
        self.query_one("#signal-accept", SignalPanel).show(pct(acc[-1]) if acc else DASH, pct(a50), pct(a95), acc)
        self._signal("#signal-length", s.accepted_length, ".2f")
        rss = s.rss
        r50, r95 = percentiles(rss)
        panel = self.query_one("#signal-rss", SignalPanel)
        panel.display = bool(rss)
        if rss:
            panel.show(size(int(rss[-1])), size(int(r50)), size(int(r95)), rss)
        cpu_panel = self.query_one("#signal-cpu", SignalPanel)
        cpu_panel.display = bool(s.cpu)
        if s.cpu:
            c50, c95 = percentiles(s.cpu)
            cpu_panel.show(f"{s.cpu[-1]:.0f}%", f"{c50:.0f}%", f"{c95:.0f}%", s.cpu)
        notes = board.notes()
        self.query_one("#watch-notes", Static).update(Text("\n".join(notes), overflow="fold"))

    def _signal(self, selector: str, data: list[float], spec: str) -> None:
        p50, p95 = percentiles(data)
        self.query_one(selector, SignalPanel).show(num(data[-1] if data else None, spec), num(p50, spec), num(p95, spec), data)

    def _positions(self, board: WatchBoard) -> str:
        rows = board.position_rows()
        if rows:
            width = self.query_one("#watch-positions", Static).content_size.width
            return position_text(rows, width) + "\n\nshare of drafts accepted at each position (last: the last interval with drafts)"
        why = board.info.not_reported.get("acceptance per draft position")
        if why:
            return f"not reported: {why}"
        if board.missing:
            return "no drafting on this server (see below)"
        return "no draft counted yet" + (f": {board.info.server} counts them when a request finishes" if board.info.counts_at_request_end else "")
