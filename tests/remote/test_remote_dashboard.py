"""The dashboard on a node's engine, in a real terminal: ``spectui run --host node-a`` in a tmux
pane over the loopback SSH server (``tests/remote/conftest.py``), driven by keys as in
``tests/ui/test_tmux_e2e.py``: the run streams live, the header names the node, and the
recording made here carries the node's name."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from spectui.recording.reader import read_recording
from spectui.recording.schema import Step
from tests.conftest import REPO
from tests.ui.test_tmux_e2e import Tmux

pytestmark = [
    pytest.mark.slow,
    pytest.mark.ui,
    pytest.mark.server,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def test_the_dashboard_streams_a_node_run_and_names_the_node(node, tmp_path, calibrations):  # node-a: the session cache, calibrated
    tmux = Tmux(f"spectui-remote-{os.getpid()}")
    recordings = tmp_path / "recordings"
    status_file = tmp_path / "exit-status"
    env = {k: node.environ()[k] for k in ("SPECTUI_SSH", "SPECTUI_REMOTE_COMMAND")}
    script = tmp_path / "dashboard.sh"
    script.write_text(
        "env -u COLORTERM TERM=xterm-256color "
        + " ".join(f"{k}={shlex.quote(v)}" for k, v in {**env, "SPECTUI_RECORDINGS": str(recordings)}.items())
        + f" {shlex.quote(sys.executable)} -m spectui run --host node-a --threads 1 --max-tokens 400\n"
        f"echo $? > {shlex.quote(str(status_file))}\n"
    )
    try:
        tmux("new-session", "-d", "-s", "e2e", "-x", "110", "-y", "32", "-c", str(REPO), f"sh {shlex.quote(str(script))}")
        tmux("set-option", "-t", "e2e", "remain-on-exit", "on")
        tmux.wait_for(lambda s: "idle" in s and "Quit" in s, "the dashboard")
        tmux("send-keys", "-t", "e2e", "r")
        screen = tmux.wait_for(lambda s: re.search(r"running [1-9]\d*/400 tokens", s) or "done" in s, "the node's tokens")
        assert "@ node-a" in screen, screen  # the header names the node once its header arrived
        tmux("send-keys", "-t", "e2e", "s")
        screen = tmux.wait_for(lambda s: "interrupted" in s or "✔ done" in s, "the run to stop")
        (recording,) = sorted(recordings.glob("*.spectui"))
        rec = read_recording(recording)
        assert rec.complete and rec.header.node == "node-a"
        text = b"".join(p for e in rec.events if type(e) is Step for p in e.pieces).decode("utf-8", "replace")
        first_words = " ".join(text.split()[:2])
        assert first_words and first_words in " ".join(screen.split())  # the stream showed the node's text
        tmux.quit()
        assert status_file.read_text().strip() == "0", tmux.screen()
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=30)
