"""Every screen of the dashboard in turn, as a new user meets them: in a real terminal (tmux,
120x36), after a real run of the embedded model, ``t`` tune, ``h`` history, ``g`` plots, ``M``
the model picker, ``o`` open a recording, ``e`` the composer and ``v`` compare each open,
show what they are for, and go back with Escape. No screen may show a traceback or a chart
tick in scientific notation (``e-0``).

Each wait is for what a screen means (a title, the run state, a verdict with wrapped lines
joined), never for text that figures measured on this host may push across a line's end.
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
from .test_tmux_e2e import Tmux, header_state, words

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
#: the compare screen's verdict on the outputs, as the delta bar words it
OUTPUTS_VERDICT = re.compile(r"\boutputs (identical|diverge|not compared)\b")


def compare_state(screen: str) -> str:
    """The state at the end of the compare screen's title (``compare · live, one after the
    other · done``), "" on another screen."""
    title = (screen.splitlines() or [""])[0].strip()
    return title.rpartition(" · ")[2] if title.startswith("compare · ") else ""


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
        tmux.wait_for(lambda s: header_state(s) == "idle" and "Quit" in s, "the dashboard")
        tmux("send-keys", "-t", "e2e", "r")
        main = tmux.wait_for(lambda s: header_state(s) == "done", "the run to finish")
        clean(main, "r")
        assert len(list(recordings.glob("*.spectui"))) == 1
        # the run's label, as the header shows it (``spectui │ backend │ target │ label │ ...``):
        # the compare screen's candidate column must give the speculative run the same one
        label = main.splitlines()[0].split(" │ ")[3].strip()
        assert label.startswith("spec "), main

        for key, marker in SCREENS:
            tmux("send-keys", "-t", "e2e", key)
            if key == "M":  # the catalogue loads in a thread: wait for its status line, not for "loading…"
                screen = tmux.wait_for(
                    lambda s, m=marker: m in s and re.search(r"\d+ models? found|no models found", s) is not None, "the model picker"
                )
                assert "Only the embedded model is here" in words(screen) or "models found" in screen, screen
            elif key == "h":  # the index refresh runs in a thread too: its title then counts the runs
                screen = tmux.wait_for(lambda s: "history:" in s and "1 run in 1 group" in words(s), "the history")
            elif key == "g":  # the title, and the plots drawn at the pane's size
                screen = tmux.wait_for(lambda s, m=marker: m in s and "seconds since the start of the run" in s, "the plots")
                assert "acceptance per block (%" in screen
            elif key == "v":  # the pair runs live, AR then speculative; the title says done once both ended,
                # and the delta bar then judges the outputs (its rows break where the figures before put them)
                screen = tmux.wait_for(lambda s: compare_state(s) == "done" and OUTPUTS_VERDICT.search(words(s)), "the compare pair")
                assert f"candidate: {label}" in screen, screen
            else:
                screen = tmux.wait_for(lambda s, m=marker: m in s, f"the screen of {key}")
            clean(screen, key)
            tmux("send-keys", "-t", "e2e", "Escape")
            back = tmux.wait_for(lambda s, m=marker: m not in s and "Quit" in s, f"the dashboard after {key}")
            clean(back, key)

        tmux.quit()
        assert status_file.read_text().strip() == "0", tmux.screen()
        assert "Traceback" not in tmux.screen()
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=30)
