"""Every screen of the dashboard in turn, as a new user meets them: in a real terminal (tmux,
120x36), after a real run of the embedded model, ``t`` tune, ``h`` history, ``g`` plots, ``M``
the model picker, ``o`` open a recording, ``e`` the composer and ``v`` compare each open,
show what they are for, and go back with Escape. No screen may show a traceback or a chart
tick in scientific notation (``e-0``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import seed_calibrations

from .conftest import REPO
from .test_tmux_e2e import Tmux

pytestmark = [
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    pytest.mark.slow,
    pytest.mark.ui,
]

#: what each key opens, by a line of text only that screen shows
SCREENS = [
    ("t", "tune:"),
    ("h", "history:"),
    ("g", "plots · the whole run"),
    ("M", "Choose a target model"),
    ("o", "Open a recording"),
    ("e", "ctrl+s send"),
    ("v", "compare ·"),
]
SCIENTIFIC = re.compile(r"\de-0|\de\+0")


def clean(screen: str, key: str) -> None:
    assert "Traceback" not in screen, f"{key}: a traceback on screen:\n{screen}"
    assert not SCIENTIFIC.search(screen), f"{key}: a number in scientific notation on screen:\n{screen}"


def test_every_screen_after_a_real_run(tmp_path, calibrations):
    tmux = Tmux(f"spectui-walk-{os.getpid()}")
    recordings = tmp_path / "recordings"
    status_file = tmp_path / "exit-status"
    # a fresh data and cache folder: the history index and the tune store start empty (the
    # cache holds only the session's calibrations, tests/conftest.py)
    seed_calibrations(calibrations, tmp_path / "cache")
    env = f"XDG_DATA_HOME={tmp_path / 'data'} XDG_CACHE_HOME={tmp_path / 'cache'} SPECTUI_RECORDINGS={recordings}"
    try:
        tmux.start(f"{sys.executable} -m spectui run --threads 1 --max-tokens 40", cwd=REPO, status_file=status_file,
                   env=env, size=(120, 36))
        tmux.wait_for(lambda s: "idle" in s and "Quit" in s, "the dashboard")
        tmux("send-keys", "-t", "e2e", "r")
        main = tmux.wait_for(lambda s: "✔ done" in s, "the run to finish")
        clean(main, "r")
        assert len(list(recordings.glob("*.spectui"))) == 1

        for key, marker in SCREENS:
            tmux("send-keys", "-t", "e2e", key)
            if key == "M":  # the catalogue loads in a thread: wait for it, not for "loading…"
                screen = tmux.wait_for(lambda s: marker in s and "loading…" not in s, "the model picker")
                assert "Only the embedded model is here" in screen or "models found" in screen, screen
            elif key == "h":  # the index refresh runs in a thread too
                screen = tmux.wait_for(lambda s: "history:" in s and "1 run in 1 group" in s, "the history")
            elif key == "v":  # the pair runs live, AR then speculative; the delta bar judges the outputs once both ended
                screen = tmux.wait_for(lambda s: "· done" in (s.splitlines() or [""])[0] and "outputs " in s, "the compare pair")
            else:
                screen = tmux.wait_for(lambda s, m=marker: m in s, f"the screen of {key}")
            clean(screen, key)
            if key == "g":
                assert "acceptance per block (%" in screen and "seconds since the start of the run" in screen
            tmux("send-keys", "-t", "e2e", "Escape")
            back = tmux.wait_for(lambda s, m=marker: m not in s and "Quit" in s, f"the dashboard after {key}")
            clean(back, key)

        tmux.quit()
        assert status_file.read_text().strip() == "0", tmux.screen()
        assert "Traceback" not in tmux.screen()
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=30)
