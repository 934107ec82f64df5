"""The history screen: ``spectui history`` in the dashboard, a group list beside one group's
table, changes, floors and charts (the same text ``spectui history --charts`` prints).

The index refresh reads every new recording, which can take seconds: it runs in a thread
worker and the screen fills in when it is done.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from spectui.format import counted
from spectui.history.index import IndexUpdate
from spectui.history.render import format_group
from spectui.history.trend import DEFAULT_STALE_DAYS, FloorLine, Group, load_history


def sweep_floors(folder: str) -> list[FloorLine]:
    """A sweep folder's floors as history's ``FloorLine`` (lab sits beside history, so the UI,
    above both, brings them together; ``spectui.cli.history`` does the same)."""
    from spectui.lab.sweep import load_sweep
    from spectui.lab.sweep_report import floors_from_sweep

    f = floors_from_sweep(*load_sweep(folder))
    return [FloorLine(x.tier, x.drafter, x.k, x.acceptance_floor, x.decode_tok_s_floor, folder) for x in f.floors]


def empty_history(folders: Sequence[str]) -> list[str]:
    """What the screen says before there is any run to show, and what to do about it."""
    return [
        f"No recorded runs in {', '.join(folders)} yet.",
        "",
        "Every run is recorded. Press Esc, then r to run",
        "one, and come back here with h.",
        "",
        "From a shell, these record here too:",
        "  spectui run --headless    one run",
        "  spectui sweep             a series of runs",
        "spectui history DIR looks at another folder.",
    ]


class HistoryScreen(Screen[None]):
    DEFAULT_CSS = """
    HistoryScreen > #history-title { height: 1; padding: 0 1; background: $panel; color: $text-primary; text-style: bold; }
    HistoryScreen #history-groups { width: 42; height: 1fr; }
    HistoryScreen #history-body { height: 1fr; padding: 0 1; }
    HistoryScreen #history-detail { width: auto; }
    """
    BINDINGS = [
        Binding("h,escape", "app.pop_screen", "Back"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(
        self, folders: Sequence[str | os.PathLike[str]], *, index: str | None = None, stale_days: float = DEFAULT_STALE_DAYS
    ) -> None:
        super().__init__()
        self.folders = [os.fspath(f) for f in folders]
        self.index = index
        self.stale_days = stale_days
        self.groups: list[Group] = []
        self.summary = ""

    def compose(self) -> ComposeResult:
        yield Static(f"history of {', '.join(self.folders)}: indexing…", id="history-title")
        with Horizontal():
            yield OptionList(id="history-groups")
            with VerticalScroll(id="history-body"):
                yield Static("", id="history-detail")
        yield Footer()

    def on_mount(self) -> None:
        self.run_worker(self._load, thread=True, exclusive=True, group="history")

    def _load(self) -> None:
        from spectui.errors import SpectuiError

        try:
            groups, update = load_history(self.folders, index=self.index, stale_days=self.stale_days, floors_of=sweep_floors)
        except SpectuiError as exc:
            self.app.call_from_thread(self._show_error, str(exc))
            return
        self.app.call_from_thread(self._show, groups, update)

    def _show_error(self, text: str) -> None:
        self.query_one("#history-title", Static).update(f"history: {text}")

    def _show(self, groups: list[Group], update: IndexUpdate) -> None:
        self.groups = groups
        runs = sum(len(g.runs) for g in groups)
        notes = f"; {len(update.notes)} notes" if update.notes else ""
        self.summary = (
            f"history: {counted(runs, 'run')} in {counted(len(groups), 'group')}, {sum(g.stale for g in groups)} stale "
            f"({update.read} read, {update.unchanged} unchanged{notes})"
        )
        self.query_one("#history-title", Static).update(self.summary)
        options = self.query_one("#history-groups", OptionList)
        options.clear_options()
        for i, g in enumerate(groups):
            # the group's run label is the one the run's header and compare column showed
            label = f"{'STALE ' if g.stale else ''}{g.label}\n  {g.target_label}"
            label += f"\n  {g.key['prompt']} · {counted(len(g.runs), 'run')}{' · ' + counted(len(g.changes), 'change') if g.changes else ''}"
            options.add_option(Option(label, id=str(i)))
        detail = self.query_one("#history-detail", Static)
        if not groups:
            detail.update("\n".join([*empty_history(self.folders), *(f"note: {n}" for n in update.notes)]))
            return
        options.highlighted = 0
        options.focus()  # up/down walk the groups at once
        self._detail(0, update.notes)

    def _detail(self, i: int, notes: Sequence[str] = ()) -> None:
        width = max(60, self.size.width - 48)
        text = format_group(self.groups[i], stale_days=self.stale_days, charts=True, width=width)
        self.query_one("#history-detail", Static).update("\n".join([*(f"note: {n}" for n in notes), text]))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id is not None and self.groups:
            self._detail(int(event.option.id))
