"""Modal pickers: a prompt from prompts/, a recording to open.

Keyboard only: arrows move, Enter picks, Escape cancels; the recording picker also takes a
typed path (Tab moves between the path field and the list).
"""

from __future__ import annotations

import os
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList
from textual.widgets.option_list import Option

from spectui.errors import SpectuiError
from spectui.prompts import PromptSpec, list_prompts

_MODAL_CSS = """
{screen} {{
    align: center middle;
}}
{screen} > Vertical {{
    width: 90%;
    max-width: 110;
    height: auto;
    max-height: 90%;
    border: round $primary;
    background: $surface;
    padding: 0 1;
}}
{screen} .picker-title {{ color: $text-primary; text-style: bold; }}
{screen} .picker-hint {{ color: $text-muted; }}
{screen} OptionList {{ height: auto; max-height: 20; border: none; background: $surface; }}
{screen} Input {{ margin: 1 0 0 0; }}
"""


class PromptPicker(ModalScreen[PromptSpec | None]):
    """Lists the prompt files (tier, name, first words); Enter returns the chosen spec."""

    DEFAULT_CSS = _MODAL_CSS.format(screen="PromptPicker")
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        super().__init__()
        self.directory = directory
        self.specs: list[PromptSpec] = []
        self.error = ""
        try:
            self.specs = list_prompts(directory)
        except SpectuiError as exc:  # one unreadable file: say which
            self.error = str(exc)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Choose a prompt", classes="picker-title")
            if self.error:
                yield Label(self.error, classes="picker-hint")
            options = [
                Option(f"{s.tier:<7} {s.name:<26} {' '.join(s.text.split())[:60]}", id=s.name) for s in self.specs
            ]
            if not options:
                yield Label("no prompt files found (prompts/*.txt)", classes="picker-hint")
            yield OptionList(*options, id="prompt-list")
            yield Label("↑↓ choose · Enter use it (its token ceiling comes along) · Esc cancel", classes="picker-hint")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self.specs[event.option_index])


def list_recordings(directory: str | os.PathLike[str] | None) -> list[Path]:
    """Recordings in ``directory``, newest first."""
    if directory is None:
        return []
    folder = Path(directory)
    try:
        files = [p for p in folder.glob("*.spectui") if p.is_file()]
    except OSError:
        return []
    return sorted(files, key=lambda p: (p.stat().st_mtime, p.name), reverse=True)


class OpenRecording(ModalScreen[str | None]):
    """A path field and the recordings folder's files; returns the chosen path."""

    DEFAULT_CSS = _MODAL_CSS.format(screen="OpenRecording")
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, directory: str | os.PathLike[str] | None) -> None:
        super().__init__()
        self.directory = directory
        self.files = list_recordings(directory)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Open a recording", classes="picker-title")
            yield Input(placeholder="path to a .spectui file, Enter to open", id="recording-path")
            if self.files:
                yield Label(f"recent in {self.directory}:", classes="picker-hint")
                yield OptionList(*(Option(p.name, id=str(i)) for i, p in enumerate(self.files)), id="recording-list")
            else:
                yield Label(f"no recordings in {self.directory}", classes="picker-hint")
            yield Label("Tab switch · Enter open · Esc cancel", classes="picker-hint")

    def on_mount(self) -> None:
        if self.files:
            self.query_one(OptionList).focus()
        else:
            self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        value = event.value.strip()
        if value:
            self.dismiss(os.path.expanduser(value))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(str(self.files[event.option_index]))
