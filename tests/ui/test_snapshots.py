"""Snapshots of the dashboard on fixed sessions (pytest-textual-snapshot).

The sessions are real recordings checked in under tests/data; the app opens them without
loading the engine, so nothing on screen depends on this machine's clock or memory. Update
with ``python -m pytest tests/ui/test_snapshots.py --snapshot-update`` after a deliberate
change, and look at the SVGs (the failure report shows both) before committing them.
"""

from __future__ import annotations

import os

import pytest

from spectui.config import RunConfig
from spectui.ui.launch import make_app

from .conftest import FIXED_AR, FIXED_SPEC, REPO


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    # Paths in the header and the themes/ folder are read relative to the repository.
    monkeypatch.chdir(REPO)


def fixed_app(theme: str | None = None):
    app = make_app(RunConfig(prompt="unused: the recording brings its own"), record=False)

    async def open_fixed(pilot) -> None:  # noqa: ANN001
        await pilot.pause()  # let the nested widgets mount
        if theme is not None:
            app.theme = theme
        # The AR run first: it becomes the baseline of the measured speedup.
        assert app.open_recording(os.path.relpath(FIXED_AR, REPO))
        assert app.open_recording(os.path.relpath(FIXED_SPEC, REPO))
        await pilot.pause()
        app.refresh_now()
        await pilot.pause()

    return app, open_fixed


class TestMainScreen:
    def test_80x24(self, snap_compare):
        app, before = fixed_app()
        assert snap_compare(app, terminal_size=(80, 24), run_before=before)

    def test_160x48(self, snap_compare):
        app, before = fixed_app()
        assert snap_compare(app, terminal_size=(160, 48), run_before=before)

    def test_block_boundaries(self, snap_compare):
        app, before = fixed_app()
        assert snap_compare(app, press=["b"], terminal_size=(100, 30), run_before=before)


class TestNarrowTerminal:
    """The token stream keeps the width: the stats panel folds away (its speed and acceptance
    move to the stream's border) or, on a tall enough screen, goes under the stream."""

    def test_40x12(self, snap_compare):
        app, before = fixed_app()
        assert snap_compare(app, terminal_size=(40, 12), run_before=before)

    def test_60x20(self, snap_compare):
        app, before = fixed_app()
        assert snap_compare(app, terminal_size=(60, 20), run_before=before)

    def test_60x32_stats_below(self, snap_compare):
        app, before = fixed_app()
        assert snap_compare(app, terminal_size=(60, 32), run_before=before)


class TestThemes:
    def test_light(self, snap_compare):
        app, before = fixed_app("spectui-light")
        assert snap_compare(app, terminal_size=(100, 30), run_before=before)

    def test_256_colours(self, snap_compare):
        app, before = fixed_app("spectui-256")
        assert snap_compare(app, terminal_size=(100, 30), run_before=before)


class TestPlotView:
    def test_whole_run(self, snap_compare):
        app, before = fixed_app()
        assert snap_compare(app, press=["g"], terminal_size=(120, 40), run_before=before)


class TestChat:
    """A conversation: each user message plainly above its reply (the fixed runs stand in for
    two turns), and the composer."""

    def test_two_turns(self, snap_compare):
        from spectui.metrics.live import LiveRun
        from spectui.recording.reader import read_recording
        from spectui.ui.chat import ShownTurn

        app, open_fixed = fixed_app()

        async def two_turns(pilot) -> None:  # noqa: ANN001
            await open_fixed(pilot)
            first = LiveRun.from_events(read_recording(FIXED_AR).events)
            app.controller.chat.turns = [
                ShownTurn("Fix the typos in this text.", first),
                ShownTurn("Now once more, exactly as before.", app.controller.live),
            ]
            app.refresh_now()
            await pilot.pause()

        assert snap_compare(app, terminal_size=(100, 36), run_before=two_turns)

    def test_composer(self, snap_compare):
        app = make_app(RunConfig(prompt="Explain speculative decoding\nin two sentences."), record=False)
        assert snap_compare(app, press=["e"], terminal_size=(90, 24))


@pytest.mark.asyncio
async def test_a_repaint_tick_after_the_last_screen_left_draws_nothing():
    """The repaint timer may tick once more while the app closes, after its last screen has
    left the stack: that tick does nothing (it raised ScreenStackError, in a run of
    benchmarks/dashboard_vs_headless.py, as a traceback on the way out)."""
    app = make_app(RunConfig(prompt="Say hi."), record=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
    assert not app.screen_stack
    app._repaint()
    app._repaint(force=True)
