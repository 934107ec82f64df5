"""The plot view: the whole run (live or recorded) as three plotext plots."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, Static

from spectui.ui.messages import RunRequested, StopRequested
from spectui.ui.widgets.plots import RunPlot

if TYPE_CHECKING:
    from spectui.ui.view import DashboardView

#: A live run's plots are rebuilt at most this often: plotext takes tens of milliseconds
#: per build, and a plot is read at a glance, not followed token by token.
PLOT_REFRESH_S = 1.0


class PlotScreen(Screen[None]):
    DEFAULT_CSS = """
    PlotScreen > #plot-title {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $text-primary;
        text-style: bold;
    }
    PlotScreen > RunPlot { padding: 0 1; }
    """
    BINDINGS = [
        Binding("g,escape", "app.pop_screen", "Back"),
        Binding("r", "run", "Run"),
        Binding("s", "stop", "Stop"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, view: DashboardView) -> None:
        super().__init__()
        self.view = view

    def action_run(self) -> None:
        self.post_message(RunRequested())

    def action_stop(self) -> None:
        self.post_message(StopRequested())

    def compose(self) -> ComposeResult:
        yield Static("plots · the whole run · g / Esc back", id="plot-title")
        yield RunPlot(self.view)
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.set_interval(PLOT_REFRESH_S, self.redraw)

    def redraw(self) -> None:
        try:
            plot = self.query_one(RunPlot)
        except NoMatches:  # not mounted yet, or being torn down
            return
        plot.update_from(self.view.live)
