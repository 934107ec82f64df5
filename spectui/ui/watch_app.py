"""The watch dashboard's app: one screen (``screens/watch.py``) fed by a live watch or a replay.

The feed (``spectui.watch.feed``) runs on a thread of its own and posts each sample as a
``WatchSampled`` message of ``ui/messages.py`` (``post_message`` is thread-safe and never blocks
the sampler); the board (``spectui.watch.board``) changes only here, on the UI thread, and the
screen redraws from it. ``q`` asks the feed to stop without waiting for it and exits: the caller
then waits for the feed's thread and ends the recording (``launch.run_watch``), with the
terminal already back.
"""

from __future__ import annotations

from typing import Protocol

from textual.app import App
from textual.binding import Binding

from spectui.ui.messages import WatchEnded, WatchSampled
from spectui.ui.screens.watch import WatchScreen
from spectui.ui.themes import register_themes
from spectui.watch.board import WatchBoard
from spectui.watch.feed import OnEnd, OnSample
from spectui.watch.sampler import WatchSample


class Feed(Protocol):
    def start(self, on_sample: OnSample, on_end: OnEnd | None = None) -> None: ...

    def request_stop(self) -> None: ...


class WatchApp(App[int]):
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("c", "cycle_theme", "Theme", show=False),
    ]

    def __init__(self, board: WatchBoard, feed: Feed) -> None:
        super().__init__()
        self.board = board
        self.feed = feed
        self._themes = register_themes(self)

    def get_default_screen(self) -> WatchScreen:
        return WatchScreen(self.board)

    def on_mount(self) -> None:
        self.feed.start(self._post_sample, self._post_end)

    def _post_sample(self, sample: WatchSample) -> None:  # the feed's thread
        self.post_message(WatchSampled(sample))

    def _post_end(self, why: str) -> None:  # the feed's thread
        self.post_message(WatchEnded(why))

    def on_watch_sampled(self, msg: WatchSampled) -> None:
        self.board.add(msg.sample)

    def on_watch_ended(self, msg: WatchEnded) -> None:
        self.board.ended = f"{msg.why}; q quits"
        self.board.version += 1

    def refresh_now(self) -> None:
        """Draw the board now rather than at the screen's next tick (the tests' ``visible``)."""
        if isinstance(self.screen, WatchScreen):
            self.screen.redraw()

    def action_cycle_theme(self) -> None:
        names = [t.name for t in self._themes] or ["textual-dark", "textual-light", "textual-ansi"]
        i = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(i + 1) % len(names)]
        if isinstance(self.screen, WatchScreen):
            self.screen.invalidate()  # the captions' colours are baked in

    async def action_quit(self) -> None:
        self.feed.request_stop()
        self.exit(0)
