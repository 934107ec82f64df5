"""The prompt composer (``e``): type or paste a prompt or the next message of a chat.

A multi-line ``TextArea`` holds the text (paste arrives whole: Textual turns on the terminal's
bracketed paste, so a pasted file over SSH is one ``Paste`` event, not thousands of keys), an
``Input`` the system prompt, a ``Checkbox`` the chat template. ``ctrl+s`` sends, ``escape``
cancels. The context check is the engine's (``Engine.check``, on the engine thread): a prompt
too long is refused there in one line with its numbers, as every run is.

It opens empty, as a chat box does, so what is typed is what is sent; the last prompt is one
key away (``up`` in the empty text brings it back, to send again or edit).

Keys typed at once after ``e`` must all land in the text, in order, even while the UI thread
is slow (a first run calibrating takes both cores of a small machine). Two things see to it:
the app opens the composer from a priority binding and waits for it to mount, and the text
takes the focus on mount itself (``set_focus``, not ``focus()``, which would wait behind the
keys already queued); and ``ctrl+s`` is an ordinary binding, so it reaches the composer
through the text after every key typed before it (a priority binding runs as the app first
sees the key, and sent the text before the keys still queued for it had arrived).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Checkbox, Footer, Input, Label, TextArea


@dataclass(frozen=True)
class Composed:
    """What the composer sends: the message, the system prompt, whether to use the template."""

    text: str
    system: str
    chat: bool


class MessageArea(TextArea):
    """The composer's text: ``up`` while it is empty brings back ``recall`` (the last prompt)."""

    def __init__(self, recall: str, **kwargs) -> None:  # noqa: ANN003 - TextArea's own
        hint = "type a prompt · ↑ brings back the last one" if recall else "type a prompt"
        super().__init__("", placeholder=hint, soft_wrap=True, **kwargs)
        self.recall = recall

    def action_cursor_up(self, select: bool = False) -> None:
        if not self.text and self.recall:
            self.insert(self.recall)  # an edit like any other: ctrl+z takes it back
            return
        super().action_cursor_up(select)


class Composer(ModalScreen[Composed | None]):
    DEFAULT_CSS = """
    Composer { align: center middle; }
    Composer > Vertical {
        width: 94%;
        height: 90%;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    Composer .composer-title { color: $text-primary; text-style: bold; }
    Composer .composer-hint { color: $text-muted; }
    Composer TextArea { height: 1fr; }
    Composer #composer-options { height: auto; }
    Composer #composer-system { width: 1fr; }
    Composer Checkbox { width: auto; }
    """
    BINDINGS = [
        # not a priority binding: it must come after the keys typed before it (module docstring)
        Binding("ctrl+s", "send", "Send"),
        Binding("escape", "dismiss(None)", "Cancel"),
    ]
    AUTO_FOCUS = "#composer-text"

    def __init__(self, *, recall: str, system: str, chat: bool, turn: int, context: int) -> None:
        super().__init__()
        self.recall, self._system, self._chat = recall, system, chat
        self.turn, self.context = turn, context

    def compose(self) -> ComposeResult:
        with Vertical():
            what = f"message {self.turn} of this conversation" if self.turn > 1 else "prompt (a new conversation)"
            yield Label(f"Compose · {what}", classes="composer-title")
            yield MessageArea(self.recall, id="composer-text")  # tab: the next field
            with Horizontal(id="composer-options"):
                yield Input(self._system, placeholder="system prompt (optional)", id="composer-system")
                yield Checkbox("chat template", self._chat, id="composer-chat")
            yield Label(
                f"ctrl+s send · esc cancel · ↑ last prompt · tab next field · context {self.context} tokens",
                classes="composer-hint",
            )
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        # At once, before the app hands on the next key (it waits for this mount). Textual's
        # AUTO_FOCUS applies only while the app holds the terminal's focus (``App.app_focus``),
        # and ``focus()`` would run after the keys already queued, which would find nothing
        # focused and be lost.
        self.set_focus(self.query_one(MessageArea))

    def action_send(self) -> None:
        # a terminal pastes line ends as CR (tmux, xterm): the model is sent LF, as typed
        text = self.query_one(MessageArea).text.replace("\r\n", "\n").replace("\r", "\n")
        if not text.strip():
            self.notify("nothing to send: type a prompt first (↑ brings back the last one)", severity="warning", timeout=3)
            return
        system = self.query_one(Input).value
        self.dismiss(Composed(text=text, system=system, chat=self.query_one(Checkbox).value))
