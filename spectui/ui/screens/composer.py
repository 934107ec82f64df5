"""The prompt composer (``e``): type or paste a prompt or the next message of a chat.

A multi-line ``TextArea`` holds the text (paste arrives whole: Textual turns on the terminal's
bracketed paste, so a pasted file over SSH is one ``Paste`` event, not thousands of keys), an
``Input`` the system prompt, a ``Checkbox`` the chat template. ``ctrl+s`` sends, ``escape``
cancels. The context check is the engine's (``Engine.check``, on the engine thread): a prompt
too long is refused there in one line with its numbers, as every run is.
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
        Binding("ctrl+s", "send", "Send", priority=True),
        Binding("escape", "dismiss(None)", "Cancel"),
    ]
    AUTO_FOCUS = "#composer-text"

    def __init__(self, text: str, *, system: str, chat: bool, turn: int, context: int) -> None:
        super().__init__()
        self._text, self._system, self._chat = text, system, chat
        self.turn, self.context = turn, context

    def compose(self) -> ComposeResult:
        with Vertical():
            what = f"message {self.turn} of this conversation" if self.turn > 1 else "prompt (a new conversation)"
            yield Label(f"Compose · {what}", classes="composer-title")
            yield TextArea(self._text, id="composer-text", soft_wrap=True)  # tab: the next field
            with Horizontal(id="composer-options"):
                yield Input(self._system, placeholder="system prompt (optional)", id="composer-system")
                yield Checkbox("chat template", self._chat, id="composer-chat")
            yield Label(
                f"ctrl+s send · esc cancel · tab next field · f7 select all · context {self.context} tokens",
                classes="composer-hint",
            )
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        # Textual applies AUTO_FOCUS only while the app holds the terminal's focus
        # (``App.app_focus``): keys typed at once after ``e`` must land in the text regardless
        self.query_one(TextArea).focus()

    def action_send(self) -> None:
        # a terminal pastes line ends as CR (tmux, xterm): the model is sent LF, as typed
        text = self.query_one(TextArea).text.replace("\r\n", "\n").replace("\r", "\n")
        if not text.strip():
            self.notify("nothing to send: type a prompt first", severity="warning", timeout=3)
            return
        system = self.query_one(Input).value
        self.dismiss(Composed(text=text, system=system, chat=self.query_one(Checkbox).value))
