"""The token stream, each token coloured by who decided it, and its legend.

Colours come from theme variables through component classes: accepted draft tokens in
``$text-success``, the target's corrections in ``$text-error``, bonus tokens in
``$text-accent``, plain AR tokens in ``$foreground``. Block boundaries (one speculative
draft+verify block, or one AR step) are drawn as a thin muted bar when turned on.

The rich ``Text`` grows by appending only the tokens that arrived since the last redraw; it is
rebuilt from the ``LiveRun`` only when the run, the theme or the boundary toggle changes.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from spectui.metrics.live import LiveRun
from spectui.recording.schema import TokenOrigin

ORIGIN_CLASSES = {
    int(TokenOrigin.AR): "token-stream--ar",
    int(TokenOrigin.DRAFT): "token-stream--draft",
    int(TokenOrigin.CORRECTION): "token-stream--correction",
    int(TokenOrigin.BONUS): "token-stream--bonus",
}
BOUNDARY = "▏"

_ORIGIN_CSS = """
    {w} > .token-stream--ar {{ color: $foreground; }}
    {w} > .token-stream--draft {{ color: $text-success; }}
    {w} > .token-stream--correction {{ color: $text-error; text-style: bold underline; }}
    {w} > .token-stream--bonus {{ color: $text-accent; text-style: bold; }}
    {w} > .token-stream--boundary {{ color: $text-muted; }}
"""
_COMPONENTS = {*ORIGIN_CLASSES.values(), "token-stream--boundary"}


class TokenStream(VerticalScroll):
    DEFAULT_CSS = (
        """
    TokenStream {
        border: round $primary 40%;
        border-title-color: $text-primary;
        padding: 0 1;
        scrollbar-size-vertical: 1;
    }
    TokenStream:focus { border: round $primary; }
    TokenStream > #token-text { width: 1fr; height: auto; }
    """
        + _ORIGIN_CSS.format(w="TokenStream")
    )
    COMPONENT_CLASSES = _COMPONENTS

    show_blocks: reactive[bool] = reactive(False)
    """Draw a bar at every block boundary."""

    def __init__(self, **kwargs) -> None:  # noqa: ANN003
        super().__init__(**kwargs)
        self.border_title = "tokens"
        self._live: LiveRun | None = None
        self._text = Text()
        self._parts: list[str] = []  # the token texts shown, without boundary bars
        self._n = 0  # tokens already in _text
        self._next_block = 0  # index into live.block_starts
        self._styles: tuple[Style, ...] | None = None
        self._stale = True
        self._eog = False

    def compose(self):  # noqa: ANN201
        yield Static("", id="token-text", markup=False)

    @property
    def plain_text(self) -> str:
        """The text of the tokens on screen (boundary bars left out)."""
        return "".join(self._parts)

    def watch_show_blocks(self) -> None:
        self._stale = True
        if self._live is not None:
            self.update_from(self._live)

    def _current_styles(self) -> tuple[Style, ...]:
        get = self.get_component_rich_style
        return tuple(get(name) for name in sorted(_COMPONENTS))

    def update_from(self, live: LiveRun) -> None:
        styles = self._current_styles()
        # A run that ended on an end-of-generation token: that token (e.g. "<|im_end|>") is
        # shown muted, as the end marker it is rather than as text the model wrote.
        eog = live.end is not None and live.end.reason == "stop"
        if (
            live is not self._live
            or self._stale
            or styles != self._styles
            or len(live.tokens) < self._n
            or eog != self._eog
        ):
            self._live, self._styles, self._stale, self._eog = live, styles, False, eog
            self._text = Text()
            self._parts = []
            self._n = self._next_block = 0
        n_new = len(live.texts)
        if n_new == self._n:
            return
        get = self.get_component_rich_style
        origin_style = {o: get(cls) for o, cls in ORIGIN_CLASSES.items()}
        ar_style = origin_style[int(TokenOrigin.AR)]
        bar_style = get("token-stream--boundary")
        text, parts, starts, show = self._text, self._parts, live.block_starts, self.show_blocks
        texts, origins = live.texts, live.origins
        b = self._next_block
        for i in range(self._n, n_new):
            while b < len(starts) and starts[b] <= i:
                if show and starts[b] == i and i > 0:
                    text.append(BOUNDARY, bar_style)
                b += 1
            piece = texts[i]
            if piece:
                style = bar_style if eog and i == n_new - 1 else origin_style.get(origins[i], ar_style)
                text.append(piece, style)
                parts.append(piece)
        self._next_block, self._n = b, n_new
        # Follow the end of the stream unless the reader scrolled back. (Not Textual's
        # anchor(): in 8.2 it scrolls to a negative offset while the text is shorter than the
        # view, which leaves the text hanging at the bottom of an empty box.)
        follow = self.scroll_y >= self.max_scroll_y - 1
        self.query_one("#token-text", Static).update(text)
        if follow:
            self.call_after_refresh(self.scroll_end, animate=False)


class Legend(Widget):
    """What the token colours mean, in the same styles."""

    DEFAULT_CSS = (
        """
    Legend { height: 1; padding: 0 1; color: $text-muted; }
    """
        + _ORIGIN_CSS.format(w="Legend")
    )
    COMPONENT_CLASSES = _COMPONENTS

    show_blocks: reactive[bool] = reactive(False)

    def render(self) -> Text:
        get = self.get_component_rich_style
        out = Text(no_wrap=True, overflow="ellipsis")
        for cls, label in (
            ("token-stream--draft", "accepted draft"),
            ("token-stream--correction", "correction"),
            ("token-stream--bonus", "bonus"),
            ("token-stream--ar", "AR"),
        ):
            out.append("■ ", get(cls))
            out.append(f"{label}  ")
        out.append(BOUNDARY, get("token-stream--boundary"))
        out.append(" blocks " + ("on" if self.show_blocks else "off") + " (b)")
        return out
