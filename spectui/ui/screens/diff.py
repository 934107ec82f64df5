"""The diff of the compared pair in the TUI: the same report as ``spectui diff`` (artifacts
that differ first, then outputs, speed with its interval, acceptance, memory), scrollable."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static


def diff_text(baseline: str, candidate: str) -> str:
    """``spectui diff BASELINE CANDIDATE`` as text, or the one-line reason it cannot be made."""
    from spectui.compare.diff import diff_recordings
    from spectui.compare.diff_format import format_diff_text
    from spectui.errors import SpectuiError
    from spectui.recording.reader import read_recording

    try:
        return format_diff_text(diff_recordings(read_recording(baseline), read_recording(candidate)))
    except SpectuiError as exc:
        return f"cannot diff these two runs: {exc}"
    except OSError as exc:
        return f"cannot diff these two runs: {exc.strerror or exc}"


class DiffScreen(Screen[None]):
    BINDINGS = [Binding("escape,d", "app.pop_screen", "Back")]
    DEFAULT_CSS = """
    DiffScreen > VerticalScroll { padding: 0 1; }
    DiffScreen #diff-text { width: auto; }
    """

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self.text, id="diff-text", markup=False)
        yield Footer(compact=True, show_command_palette=False)
