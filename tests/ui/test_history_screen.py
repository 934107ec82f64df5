"""The history screen: ``h`` in the dashboard opens the history of the recordings folder; the
group list and a group's table, changes and charts come from the same index as the CLI.

The recordings are the checked-in real runs, copied with a header edited the way an upgrade
leaves it (a newer runtime version), so the screen has a change to show and no model loads.
"""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest
from textual.widgets import OptionList

from spectui.config import RunConfig
from spectui.recording.reader import read_recording
from spectui.recording.schema import Header
from spectui.recording.writer import RecordingWriter
from spectui.ui.launch import make_app
from spectui.ui.screens.history import HistoryScreen

from .conftest import FIXED_AR, FIXED_SPEC, visible, wait_until

SIZE = (160, 50)


def copy_with(src, dst, *, days_ago: float, runtime: dict | None = None) -> None:  # noqa: ANN001
    rec = read_recording(src)
    h = rec.header
    artifacts = h.artifacts if runtime is None else msgspec.structs.replace(h.artifacts, runtime={**h.artifacts.runtime, **runtime})
    started = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=days_ago)).isoformat()
    header = msgspec.structs.replace(h, started_at=started, artifacts=artifacts)
    with RecordingWriter(dst) as w:
        for ev in rec.events:
            w.write(header if type(ev) is Header else ev)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # the default index lands here, not in ~
    rec = tmp_path / "recordings"
    rec.mkdir()
    copy_with(FIXED_SPEC, rec / "spec-1.spectui", days_ago=3)
    copy_with(FIXED_SPEC, rec / "spec-2.spectui", days_ago=2, runtime={"llama-cpp-python": "9.9.9"})
    copy_with(FIXED_AR, rec / "ar-1.spectui", days_ago=20)
    return rec


def no_engine(_config):  # noqa: ANN001, ANN202 - the history never loads a model
    raise AssertionError("the history screen loaded an engine")


@pytest.mark.asyncio
async def test_h_opens_the_history_of_the_recordings_folder(folder):
    app = make_app(RunConfig(prompt="(history)"), record=False, recordings_dir=str(folder), engine_factory=no_engine)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("h")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.groups, "the history to load", 60)
        screen = app.screen
        assert len(screen.groups) == 2
        options = screen.query_one("#history-groups", OptionList)
        assert options.option_count == 2
        text = await visible(pilot)
        assert "3 runs in 2 groups, 1 stale" in text
        assert "runtime" in text and "9.9.9" in text  # the newest group (spec) first, its change marked
        await pilot.press("down")
        await pilot.pause()
        text = await visible(pilot)
        assert "STALE: the newest run is 20 days old" in text and "9.9.9" not in text  # the AR group now
        await pilot.press("escape")
        assert not isinstance(app.screen, HistoryScreen)


@pytest.mark.asyncio
async def test_bad_index_path_is_one_line(folder, tmp_path):
    from textual.app import App

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(HistoryScreen([folder], index=str(tmp_path)))  # a folder: refused

    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "is a folder" in str(app.screen.query_one("#history-title").render()), "the error", 60)
