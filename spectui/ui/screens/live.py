"""The main screen: header, token stream, stats, the three live signals, legend, footer.

``redraw`` is the one path from state to screen. It reads the app's ``LiveRun`` (a live run
or an opened recording: the screen cannot tell them apart) and the header facts, and is
called by the app's repaint timer, never per token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer

from spectui.ui.widgets.header import RunHeader
from spectui.ui.widgets.signals import SignalGroup
from spectui.ui.widgets.stats import StatsPanel
from spectui.ui.widgets.token_stream import Legend, TokenStream

if TYPE_CHECKING:
    from spectui.ui.app import SpectuiApp

#: Screens at least this tall get three-row sparklines; at least this wide, a wider stats panel.
TALL_ROWS = 40
WIDE_COLUMNS = 140


class LiveScreen(Screen[None]):
    AUTO_FOCUS = "TokenStream"  # arrows and page keys scroll the stream

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
        self.set_class(event.size.height >= TALL_ROWS, "-tall")
        self.set_class(event.size.width >= WIDE_COLUMNS, "-wide")

    def on_screen_resume(self) -> None:
        self.redraw()

    def set_show_blocks(self, show: bool) -> None:
        self.query_one(TokenStream).show_blocks = show
        self.query_one(Legend).show_blocks = show

    def redraw(self, *, full: bool = True) -> bool:
        """Draw the app's state; False if the widgets are not all there (nested containers
        mount their children a moment after the screen itself, and unmount them at exit).

        ``full=False`` updates the token stream only: the app asks for that on most ticks of
        a live run and for everything a few times a second (see ``app.DETAIL_HZ``).
        """
        try:
            self.query_one(TokenStream).update_from(self.app.live, restyle=full)  # type: ignore[attr-defined]
            if full:
                self._redraw_details()
        except NoMatches:
            return False
        return True

    def _redraw_details(self) -> None:
        app: SpectuiApp = self.app  # type: ignore[assignment]
        live = app.live
        self.query_one(RunHeader).show(app.header_info())
        # The numbers are the run's: its own config (and, with adaptive K, its latest K), not
        # the settings the next run will use.
        cfg = live.header.config if live.header is not None else app.shown_config()
        k = live.last_k or cfg.draft.k
        self.query_one(StatsPanel).update_from(live, mode=cfg.mode, k=k, baseline=app.baseline_for(live))

        self.query_one(SignalGroup).show_run(live, live.summary(), cfg.mode)
