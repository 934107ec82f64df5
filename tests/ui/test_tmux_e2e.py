"""End to end in a real terminal: ``python -m spectui.ui`` in a tmux pane, driven by keys.

A 100x30 pane with TERM=xterm-256color and no COLORTERM (no truecolor), on a private tmux
socket. The test reads the screen as a person would (``capture-pane``): the dashboard comes
up idle, ``r`` streams tokens, ``s`` stops, ``q`` quits with exit status 0 and the terminal
back on its normal screen. Every wait is bounded; the tmux server is killed in ``finally``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from spectui.recording.reader import read_recording
from spectui.recording.schema import Step

from .conftest import REPO, WAIT_S

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    def __init__(self, socket: str) -> None:
        self.socket = socket

    def __call__(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True, timeout=30
        )
        if out.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)} failed: {out.stderr.strip()}")
        return out.stdout

    def screen(self, *, escapes: bool = False) -> str:
        return self("capture-pane", "-p", *(["-e"] if escapes else []), "-t", "e2e")

    def pane(self, fmt: str) -> str:
        return self("display-message", "-p", "-t", "e2e", fmt).strip()

    def wait_for(self, predicate, what: str, timeout: float = WAIT_S) -> str:  # noqa: ANN001
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if predicate(screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}; the screen was:\n{screen}")


def test_dashboard_in_tmux(tmp_path):
    tmux = Tmux(f"spectui-test-{os.getpid()}")
    recordings = tmp_path / "recordings"
    # Textual draws on stderr: it must stay the pane's terminal, so nothing is redirected.
    # The exit status goes through a file: a tmux server whose SIGCHLD is blocked by whatever
    # started it (seen on this build machine) never reaps the pane's process, and then
    # #{pane_dead_status} stays empty. The shell waits for the app itself.
    status_file = tmp_path / "exit-status"
    command = (
        f"sh -c 'env -u COLORTERM TERM=xterm-256color SPECTUI_RECORDINGS={recordings} "
        f"{sys.executable} -m spectui.ui; echo $? > {status_file}'"
    )
    try:
        tmux("new-session", "-d", "-s", "e2e", "-x", "100", "-y", "30", "-c", str(REPO), command)
        tmux("set-option", "-t", "e2e", "remain-on-exit", "on")

        # up and idle, on the embedded model, with the keys in the footer
        screen = tmux.wait_for(lambda s: "idle" in s and "Quit" in s, "the dashboard")
        assert "spectui" in screen and "llama.cpp" in screen and "SmolLM2" in screen
        assert "REC" in screen and "tokens" in screen and "stats" in screen
        assert tmux.pane("#{alternate_on}") == "1"  # a full-screen app, on the alternate screen

        tmux("send-keys", "-t", "e2e", "r")
        screen = tmux.wait_for(
            lambda s: re.search(r"running \d+/\d+ tokens", s) and not re.search(r"running 0/", s)
            or "done" in s,
            "tokens to arrive",
        )
        tmux("send-keys", "-t", "e2e", "s")
        screen = tmux.wait_for(lambda s: "interrupted" in s or "✔ done" in s, "the run to stop")
        # the header names the recording; the stream shows the text the model wrote
        files = sorted(recordings.glob("*.spectui"))
        assert len(files) == 1, files
        assert files[0].name[-30:] in screen, screen
        rec = read_recording(files[0])
        assert rec.complete and rec.events[-1].reason in ("interrupted", "length", "stop")
        text = b"".join(p for e in rec.events if type(e) is Step for p in e.pieces).decode("utf-8", "replace")
        first_words = " ".join(text.split()[:2])
        assert first_words and first_words in " ".join(screen.split())
        # 256 colours and no truecolor: tmux stores what the app sent
        colours = tmux.screen(escapes=True)
        assert "38;5;" in colours or "48;5;" in colours
        assert "38;2;" not in colours and "48;2;" not in colours

        tmux("send-keys", "-t", "e2e", "q")
        deadline = time.monotonic() + WAIT_S
        while tmux.pane("#{pane_dead}") != "1":
            if time.monotonic() > deadline:
                raise AssertionError(f"the app did not quit; the screen was:\n{tmux.screen()}")
            time.sleep(0.2)
        after = tmux.screen()
        assert status_file.read_text().strip() == "0", after
        assert tmux.pane("#{alternate_on}") == "0"  # the terminal is back on its normal screen
        assert "Traceback" not in after and "Quit" not in after  # no error, no dashboard left
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=30)
