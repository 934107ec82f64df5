"""The main screen: header, token stream, stats, the three live signals, legend, footer.

``redraw`` is the one path from state to screen. It reads the ``DashboardView`` it was given
(a live run or an opened recording: the screen cannot tell them apart) and is called by the
app's repaint timer, never per token.

The token stream is what people come for, so it keeps its room as the terminal narrows: below
``NARROW_COLUMNS`` the stats panel leaves its side and goes under it (``-stacked``, on screens
at least ``STACK_ROWS`` tall) or folds away (``-folded``), leaving the two numbers that matter
most on the stream's bottom border.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer

from spectui.format import missing, num, pct
from spectui.ui.widgets.header import RunHeader
from spectui.ui.widgets.signals import SignalGroup
from spectui.ui.widgets.stats import StatsPanel
from spectui.ui.widgets.token_stream import Legend, TokenStream

if TYPE_CHECKING:
    from spectui.ui.view import DashboardView

#: Screens at least this tall get three-row sparklines; at least this wide, a wider stats panel.
TALL_ROWS = 40
WIDE_COLUMNS = 140
#: Narrower than this, the stats panel (36 columns) would leave the stream under 40: it moves.
NARROW_COLUMNS = 76
#: A narrow screen this tall has room for the first stats rows under the stream; a shorter
#: one folds the panel away.
STACK_ROWS = 30


class LiveScreen(Screen[None]):
    AUTO_FOCUS = "TokenStream"  # arrows and page keys scroll the stream

    def __init__(self, view: DashboardView) -> None:
        super().__init__()
        self.view = view
        self._subtitle = ""  # on the stream's border while the stats are folded away

    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        with Horizontal(id="main"):
            yield TokenStream(id="tokens")
            yield StatsPanel(id="stats")
        yield SignalGroup(id="signals")
        yield Legend(id="legend")
        # compact, and no command-palette key docked over the last bindings at 80 columns
        yield Footer(compact=True, show_command_palette=False)

    def on_resize(self, event: Resize) -> None:
        width, height = event.size
        narrow = width < NARROW_COLUMNS
        folded = narrow and height < STACK_ROWS
        self.set_class(height >= TALL_ROWS, "-tall")
        self.set_class(width >= WIDE_COLUMNS, "-wide")
        self.set_class(narrow, "-narrow")
        self.set_class(narrow and not folded, "-stacked")
        self.set_class(folded, "-folded")
        # the panels were drawn for the old size (and a folded panel not at all): once the
        # new layout is in, draw everything again
        self.call_after_refresh(self.redraw)

    def on_screen_resume(self) -> None:
        self.redraw()

    def set_show_blocks(self, show: bool) -> None:
        self.query_one(TokenStream).show_blocks = show
        self.query_one(Legend).show_blocks = show

    def redraw(self, *, full: bool = True) -> bool:
        """Draw the view's state; False if the widgets are not all there (nested containers
        mount their children a moment after the screen itself, and unmount them at exit).

        ``full=False`` updates the token stream only: the app asks for that on most ticks of
        a live run and for everything a few times a second (see ``app.DETAIL_HZ``).
        """
        try:
            self.query_one(TokenStream).update_from(self.view.live, restyle=full, turns=self.view.turns())
            if full:
                self._redraw_details()
        except NoMatches:
            return False
        return True

    def _redraw_details(self) -> None:
        view = self.view
        live = view.live
        self.query_one(RunHeader).show(view.header_info())
        # The numbers are the run's: its own config (and, with adaptive K, its latest K), not
        # the settings the next run will use.
        cfg = live.header.config if live.header is not None else view.shown_config()
        summary = live.summary()
        subtitle = ""
        if self.has_class("-folded"):
            # no panel: the stream's border keeps the speed and, for speculation, acceptance
            rate = summary.acceptance_rate
            accepted = "" if cfg.mode == "ar" or missing(rate) else f" · accept {pct(rate)}"
            subtitle = num(summary.decode_tok_s, ".1f", " tok/s") + accepted
        else:
            # what the header says (``k_label``) until a cost-aware run has chosen a K of its own
            k = str(live.last_k) if live.last_k and cfg.draft.cost_aware else cfg.draft.k_label().removeprefix("K=")
            self.query_one(StatsPanel).update_from(live, mode=cfg.mode, k=k, baseline=view.baseline_for(live))
        if subtitle != self._subtitle:  # setting a border title repaints the whole stream
            self._subtitle = subtitle
            self.query_one(TokenStream).border_subtitle = Text(subtitle) if subtitle else None
        self.query_one(SignalGroup).show_run(live, summary, cfg.mode, view.breach_marker(live))
