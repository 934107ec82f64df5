"""The token stream, each token coloured by who decided it, and its legend.

Colours come from theme variables through component classes: accepted draft tokens in
``$text-success``, the target's corrections in ``$text-error``, bonus tokens in
``$text-accent``, plain AR tokens in ``$foreground``. Block boundaries (one speculative
draft+verify block, or one AR step) are drawn as a thin muted bar when turned on. A fallback
policy transition is drawn where it happened, as a small reversed ``↓ ngram K=3`` (a step
down) or ``↑ model K=4`` (a probe back up) in ``$text-warning``.

Cost: the stream is a line-API scroll view (like Textual's ``Log``). Finished paragraphs are
wrapped once into cached strips; a redraw re-wraps only the paragraph still growing, and
Textual paints only the visible lines. (A ``Static`` holding the whole text re-rendered all of
it on every repaint: most of the UI's CPU time, taken from the engine's cores.) Everything is
rebuilt from the ``LiveRun`` when the run, the width, the theme or the boundary toggle changes.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from spectui.format import terminal_safe
from spectui.metrics.live import LiveRun
from spectui.recording.schema import TokenOrigin

ORIGIN_CLASSES = {
    int(TokenOrigin.AR): "token-stream--ar",
    int(TokenOrigin.DRAFT): "token-stream--draft",
    int(TokenOrigin.CORRECTION): "token-stream--correction",
    int(TokenOrigin.BONUS): "token-stream--bonus",
}
BOUNDARY = "▏"
#: where a run stopped on its end-of-generation token: the token (``<|im_end|>``, ``</s>``...) is
#: a stop, not text the model wrote, so the pane draws this dim mark in its place (the recording
#: keeps the token itself)
STOP = "∎"

_ORIGIN_CSS = """
    {w} > .token-stream--ar {{ color: $foreground; }}
    {w} > .token-stream--draft {{ color: $text-success; }}
    {w} > .token-stream--correction {{ color: $text-error; text-style: bold underline; }}
    {w} > .token-stream--bonus {{ color: $text-accent; text-style: bold; }}
    {w} > .token-stream--boundary {{ color: $text-muted; }}
    {w} > .token-stream--policy {{ color: $text-warning; text-style: reverse; }}
    {w} > .token-stream--user {{ color: $text-muted; text-style: italic; }}
"""
_COMPONENTS = {*ORIGIN_CLASSES.values(), "token-stream--boundary", "token-stream--policy", "token-stream--user"}


def _stopped(live: LiveRun) -> bool:
    return live.end is not None and live.end.reason == "stop"


class TokenStream(ScrollView, can_focus=True):
    DEFAULT_CSS = (
        """
    TokenStream {
        border: round $primary 40%;
        border-title-color: $text-primary;
        padding: 0 1;
        scrollbar-size-vertical: 1;
        overflow-x: hidden;
    }
    TokenStream:focus { border: round $primary; }
    """
        + _ORIGIN_CSS.format(w="TokenStream")
    )
    COMPONENT_CLASSES = _COMPONENTS

    show_blocks: reactive[bool] = reactive(False)
    """Draw a bar at every block boundary."""

    def __init__(self, **kwargs) -> None:  # noqa: ANN003 - Textual's widget keywords (id, classes, ...), passed on
        super().__init__(**kwargs)
        self.border_title = "tokens"
        self._live: LiveRun | None = None
        self._parts: list[str] = []  # the token texts shown, without boundary bars
        self._n = 0  # tokens already laid out
        self._next_block = 0  # index into live.block_starts
        self._next_mark = 0  # index into live.policy_marks
        self._done: list[Strip] = []  # wrapped lines of finished paragraphs
        self._tail = Text()  # the paragraph still growing
        self._tail_lines: list[Strip] = []
        self._width = 0
        self._styles: tuple[Style, ...] | None = None
        self._stale = True
        self._eog = False
        self._base_style: Style | None = None
        self._turns: list | None = None
        self._turn_key: tuple[int, ...] = ()

    @property
    def plain_text(self) -> str:
        """The text of the tokens on screen (boundary bars and the stop mark left out)."""
        return "".join(self._parts)

    def watch_show_blocks(self) -> None:
        self._stale = True
        if self._live is not None:
            self.update_from(self._live, turns=self._turns)

    def on_resize(self) -> None:
        if self._live is not None:
            self.update_from(self._live, turns=self._turns)  # re-wraps at the new width

    # -- layout -----------------------------------------------------------------------------

    def _wrap(self, text: Text) -> list[Strip]:
        if not text:
            return [Strip.blank(0)]  # an empty paragraph is still a line
        console = self.app.console
        lines = text.wrap(console, self._width, overflow="fold")
        return [Strip(list(line.render(console)), line.cell_len) for line in lines]

    def _current_styles(self) -> tuple[Style, ...]:
        get = self.get_component_rich_style
        return tuple(get(name) for name in sorted(_COMPONENTS))

    def update_from(self, live: LiveRun, *, restyle: bool = True, turns: list | None = None) -> None:
        """Show ``live``'s tokens. ``restyle=False`` skips looking up the styles again (the
        fast repaints of a live run; a theme change comes with a full repaint). ``turns``: a
        conversation's ``ShownTurn``s down to ``live``'s own, drawn above it (each user
        message plainly, each reply coloured as a run is)."""
        width = self.scrollable_content_region.width
        if width < 1:  # not laid out yet: on_resize brings it back
            self._live, self._turns, self._stale = live, turns, True
            return
        if restyle or self._styles is None:
            styles = self._current_styles()
            self._base_style = self.rich_style
        else:
            styles = self._styles
        # A run that ended on an end-of-generation token: that token (e.g. "<|im_end|>") is
        # drawn as a muted stop mark, the stop it is, rather than as text the model wrote.
        eog = _stopped(live)
        turn_key = tuple(id(t.run) for t in turns) if turns else ()
        rebuilt = (
            live is not self._live
            or self._stale
            or styles != self._styles
            or width != self._width
            or len(live.tokens) < self._n
            or eog != self._eog
            or turn_key != self._turn_key
        )
        old_done, old_tail = len(self._done), self._tail_lines
        new_run = live is not self._live or turn_key != self._turn_key
        if rebuilt:
            self._live, self._styles, self._stale, self._eog, self._width = live, styles, False, eog, width
            self._turns, self._turn_key = turns, turn_key
            self._parts, self._done, self._tail, self._tail_lines = [], [], Text(), []
            self._n = self._next_block = self._next_mark = 0
            if turns:
                self._lay_out_turns(turns)
        n_new = len(live.texts)
        if n_new == self._n and self._tail_lines and not rebuilt:
            return
        self._next_block, self._next_mark = self._append(live, self._n, n_new, self._next_block, self._next_mark, eog)
        self._n = n_new
        self._tail_lines = self._wrap(self._tail)

        old_total = old_done + len(old_tail)
        total = len(self._done) + len(self._tail_lines)
        self.virtual_size = Size(width, total)
        if new_run:
            # A new run (a chat's next turn under the earlier ones) shows its end and follows
            # it until the reader scrolls back. Textual's anchor keeps the end in view through
            # every layout (a scrollbar appearing narrows the stream and re-wraps it): a
            # scroll_to aimed at max_scroll_y before that layout lands at a stale end.
            self.anchor()
        if rebuilt or total != old_total:
            self.refresh()
            return
        # Most repaints add a few tokens to the last line: repaint from the first line that
        # changed, not the whole view.
        first = old_done
        while first < min(total, old_total) and self._line(first) == old_tail[first - old_done]:
            first += 1
        if first < total:
            self.refresh_lines(first, total - first)

    def _lay_out_turns(self, turns: list) -> None:
        """The earlier turns, finished, then the current turn's user message."""
        user = self.get_component_rich_style("token-stream--user")
        for turn in turns[:-1]:
            self._user_message(turn.user, user)
            run = turn.run
            self._append(run, 0, len(run.texts), 0, 0, _stopped(run))
            self._finish_paragraph()
            self._done.append(Strip.blank(0))
        self._user_message(turns[-1].user, user)

    def _user_message(self, text: str, style: Style) -> None:
        for line in ("› " + text).split("\n"):
            self._done.extend(self._wrap(Text(line, style)))
        self._done.append(Strip.blank(0))

    def _finish_paragraph(self) -> None:
        self._done.extend(self._wrap(self._tail))
        self._tail = Text()

    def _append(self, live: LiveRun, start: int, end: int, b: int, m: int, eog: bool) -> tuple[int, int]:
        """Lay out tokens ``start:end`` of ``live`` into the growing paragraph; returns the next
        block boundary and policy mark to look at."""
        get = self.get_component_rich_style
        origin_style = {o: get(cls) for o, cls in ORIGIN_CLASSES.items()}
        ar_style = origin_style[int(TokenOrigin.AR)]
        bar_style = get("token-stream--boundary")
        parts, starts, show = self._parts, live.block_starts, self.show_blocks
        texts, origins = live.texts, live.origins
        marks, changes = live.policy_marks, live.policy_changes
        for i in range(start, end):
            while b < len(starts) and starts[b] <= i:
                if show and starts[b] == i and i > 0:
                    self._tail.append(BOUNDARY, bar_style)
                b += 1
            while m < len(marks) and marks[m] <= i:
                up = changes[m].reason.startswith("probe after")
                self._tail.append(f"{'↑' if up else '↓'} {changes[m].after}", get("token-stream--policy"))
                self._tail.append(" ")
                m += 1
            piece = texts[i]
            if eog and i == len(texts) - 1:
                self._tail.append(STOP, bar_style)  # plain_text leaves it out, as it does the bars
                continue
            if not piece:
                continue
            parts.append(piece)
            style = origin_style.get(origins[i], ar_style)
            # a model's bytes reach the terminal escaped: an ESC or a BEL in a token is drawn as
            # letters, never obeyed (plain_text keeps the text as the model wrote it)
            first, *rest = terminal_safe(piece, multiline=True).split("\n")
            self._tail.append(first, style)
            for line in rest:  # each newline finishes a paragraph: wrapped once, kept
                self._finish_paragraph()  # (not Text(line, style): a base style would leak
                self._tail.append(line, style)  # into every later token of the paragraph)
        return b, m

    def _line(self, index: int) -> Strip:
        n_done = len(self._done)
        return self._done[index] if index < n_done else self._tail_lines[index - n_done]

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        base = self._base_style or self.rich_style  # cached: computing it per line is costly
        n_done = len(self._done)
        if index < n_done:
            line = self._done[index]
        elif index - n_done < len(self._tail_lines):
            line = self._tail_lines[index - n_done]
        else:
            return Strip.blank(width, base)
        return line.crop_extend(scroll_x, scroll_x + width, base).apply_style(base)


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
