"""A first greedy run at new settings waits for its batch-noise calibration (seconds): it says
so first, on stderr headless (what, why, how long) and in the dashboard (the loading detail and a
notification); a run that finds the calibration cached says nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from spectui.config import RunConfig
from spectui.engine.host.noise import BUDGET_S, CALIBRATION_NOTICE
from spectui.sessions.notes import SessionStatus
from spectui.sessions.runner import CALIBRATING, SessionRunner
from spectui.ui.controller import DashboardController
from tests.conftest import REPO


@pytest.mark.slow
def test_headless_first_greedy_run_says_it_calibrates_then_finds_it_cached(model_path, tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}  # nothing calibrated yet
    argv = [sys.executable, "-m", "spectui", "run", "--headless", "--mode", "ar", "--prompt", "Say hi.",
            "--max-tokens", "4", "--no-record"]  # fmt: skip
    first = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert first.returncode == 0, first.stderr
    lines = first.stderr.splitlines()
    assert lines.count(CALIBRATION_NOTICE) == 1, first.stderr  # one line, as spectui's notes are
    assert lines[0] == CALIBRATION_NOTICE  # before anything else: the wait that follows is explained
    assert "batch-shape noise" in lines[0] and f"{BUDGET_S:.0f} s" in lines[0] and "AR" in lines[0]
    again = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert again.returncode == 0, again.stderr
    assert CALIBRATION_NOTICE not in again.stderr  # cached: nothing to wait for


class Host:
    def __init__(self) -> None:
        self.notices: list[tuple[str, str]] = []

    def post_note(self, note) -> None:  # noqa: ANN001
        pass

    def notify(self, message: str, *, title: str = "", severity="information", timeout=None) -> None:  # noqa: ANN001
        self.notices.append((title, message))


def test_dashboard_shows_what_how_long_and_why(tmp_path):
    host = Host()
    # an engine thread that never starts: the controller's own handling of the note, no model
    ctl = DashboardController(RunConfig(prompt="x"), host, record=False, recordings_dir=tmp_path, runner=SessionRunner())
    ctl.start_run()
    ctl.on_note(SessionStatus(ctl.run_id, "loading", "models"))
    assert host.notices == []  # loading models is not a calibration
    ctl.on_note(SessionStatus(ctl.run_id, "loading", CALIBRATING))
    assert ctl.detail == CALIBRATING and "batch noise" in CALIBRATING and f"{BUDGET_S:.0f} s" in CALIBRATING
    assert host.notices == [("calibrating", CALIBRATION_NOTICE.removeprefix("spectui: "))]
