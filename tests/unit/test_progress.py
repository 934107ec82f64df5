"""Progress of long headless work (``spectui.cli.progress``): plain lines when stderr is not a
terminal (a log reads top to bottom, throttled), a rich bar that goes away in one."""

from __future__ import annotations

import io

from spectui.cli.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_off_a_terminal():
    out = io.StringIO()
    with Progress("sweep", 1, stream=out) as bar:
        bar.update(0, "starting", total=4)
        bar.update(2, "load-typo-fix K=4 (round 1)")
        bar.note("spectui: a result along the way")
        bar.update(4, "done")
    lines = out.getvalue().splitlines()
    assert lines[0] == "spectui: sweep [0/4] 0%: starting"
    assert lines[1].startswith("spectui: sweep [2/4] 50%, ") and " left: load-typo-fix K=4 (round 1)" in lines[1]
    assert lines[2] == "spectui: a result along the way"
    assert lines[3] == "spectui: sweep [4/4] 100%: done"
    assert "\x1b" not in out.getvalue() and "\r" not in out.getvalue()  # no terminal codes in a log


def test_a_log_gets_a_line_at_most_every_so_often_and_always_the_last():
    out = io.StringIO()
    with Progress("soak", 60, unit="s", every_s=3600, stream=out) as bar:
        for t in range(0, 61, 5):
            bar.update(t, f"{t} s in")
    lines = out.getvalue().splitlines()
    assert lines == ["spectui: soak [0/60 s] 0%: 0 s in", "spectui: soak [60/60 s] 100%: 60 s in"]


def test_a_terminal_gets_a_bar_that_goes_away():
    out = Terminal()
    with Progress("tune", 3, stream=out) as bar:
        assert bar.terminal
        bar.advance("verify cost at the prompts' depth")
        bar.note("a note above the bar")
    text = out.getvalue()
    assert "a note above the bar" in text and "tune" in text
    assert "spectui: tune [" not in text  # the bar, not the plain lines
