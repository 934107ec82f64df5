"""The header lines: what runs (backend, models, draft, sampling, prompt), its state (run
state, token count, recording indicator with the recording's path) and, on screens at least
``ENVELOPE_ROWS`` tall, the declared memory envelope (with a breach badge once one happened;
the signals say which limit)."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from spectui.format import ellipsize_left
from spectui.ui.labels import HeaderInfo

_STATE_MARK = {
    "idle": "○",
    "starting": "◌",
    "loading": "◌",
    "running": "▶",
    "stopping": "◼",
    "done": "✔",
    "interrupted": "◼",
    "error": "✖",
    "replay": "▷",
}
#: Screens at least this tall give the header a third line, the declared envelope.
ENVELOPE_ROWS = 20


class RunHeader(Widget):
    DEFAULT_CSS = """
    RunHeader {
        height: 2;
        padding: 0 1;
        background: $panel;
        color: $foreground;
    }
    RunHeader > .run-header--app { color: $text-primary; text-style: bold; }
    RunHeader > .run-header--muted { color: $text-muted; }
    RunHeader > .run-header--value { color: $foreground; text-style: bold; }
    RunHeader > .run-header--running { color: $text-success; text-style: bold; }
    RunHeader > .run-header--error { color: $text-error; text-style: bold; }
    RunHeader > .run-header--rec { color: $text-error; text-style: bold; }
    RunHeader > .run-header--replay { color: $text-accent; text-style: bold; }
    RunHeader > .run-header--warning { color: $text-warning; text-style: bold; }
    """
    COMPONENT_CLASSES = {
        "run-header--app",
        "run-header--muted",
        "run-header--value",
        "run-header--running",
        "run-header--error",
        "run-header--rec",
        "run-header--replay",
        "run-header--warning",
    }

    def __init__(self, **kwargs) -> None:  # noqa: ANN003 - Textual's widget keywords (id, classes, ...), passed on
        super().__init__(**kwargs)
        self.info = HeaderInfo()

    def show(self, info: HeaderInfo) -> None:
        rows = 3 if info.envelope and self.screen.size.height >= ENVELOPE_ROWS else 2
        if self.styles.height is None or self.styles.height.value != rows:
            self.styles.height = rows  # the stream below gives up (or gets back) the row
        if info != self.info:
            self.info = info
            self.refresh()

    def render(self) -> Text:
        info = self.info
        style = self.get_component_rich_style
        muted, value = style("run-header--muted"), style("run-header--value")
        width = max(1, self.content_size.width)
        sep = (" │ ", muted)

        line1 = Text(no_wrap=True, overflow="ellipsis", end="")
        line1.append("spectui", style("run-header--app"))
        for label, text in (
            ("", info.backend),
            ("", f"{info.target} {info.quant}".strip()),
            ("", info.draft),
            ("", info.sampling),
            ("prompt ", info.prompt),
        ):
            if not text:
                continue
            line1.append(*sep)
            if label:
                line1.append(label, muted)
            line1.append(text, value)
        line1.truncate(width, overflow="ellipsis")

        line2 = Text(no_wrap=True, end="")
        state_style = (
            style("run-header--running")
            if info.state in ("running", "loading")
            else style("run-header--error")
            if info.state == "error"
            else value
        )
        line2.append(f"{_STATE_MARK.get(info.state, '•')} {info.state}", state_style)
        if info.detail:
            line2.append(f" {info.detail}", muted)
        if info.recording:
            line2.append(*sep)
            if info.recording == "rec":
                badge, badge_style = "● REC ", style("run-header--rec")
            elif info.recording == "replay":
                badge, badge_style = "file ", style("run-header--replay")
            else:
                badge, badge_style = "○ recording off", muted
            line2.append(badge, badge_style)
            if info.path:
                line2.append(ellipsize_left(info.path, width - line2.cell_len), muted)
        line2.truncate(width, overflow="ellipsis")
        lines = [line1, line2]
        if self.size.height >= 3 and info.envelope:
            lines.append(self._envelope_line(width))
        return Text("\n").join(lines)

    def _envelope_line(self, width: int) -> Text:
        """``⚠ breach 00:42 │ envelope headroom ≥ 10.0 GiB · swap-in ≤ 200 MiB · …``: whole
        limits only, as many as fit."""
        info = self.info
        style = self.get_component_rich_style
        muted, value = style("run-header--muted"), style("run-header--value")
        line = Text(no_wrap=True, end="")
        if info.breach:
            line.append("⚠ " + " ".join(info.breach.split(" ")[:2]), style("run-header--warning"))
            line.append(" │ ", muted)
        line.append("envelope", muted)
        for i, item in enumerate(info.envelope):
            lead = " " if i == 0 else " · "
            more = 2 if i < len(info.envelope) - 1 else 0  # room for " …" after it
            if line.cell_len + len(lead) + len(item) + more > width:
                line.append(" …", muted)
                break
            line.append(lead, muted)
            line.append(item, value)
        line.truncate(width, overflow="ellipsis")
        return line
