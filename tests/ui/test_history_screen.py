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
from spectui.drafting import CostAware, DraftConfig, Fixed, Lookup, Model
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


def copy_with_config(src, dst, draft: DraftConfig | None = None, backend: str | None = None) -> None:  # noqa: ANN001
    """``src`` with its recorded configuration's drafting changed (``backend`` names a backend)."""
    rec = read_recording(src)
    h = rec.header
    config = msgspec.structs.replace(h.config, draft=draft or h.config.draft)
    if backend is not None:
        config = msgspec.structs.replace(config, backend=msgspec.structs.replace(config.backend, name=backend))
    with RecordingWriter(dst) as w:
        for ev in rec.events:
            w.write(msgspec.structs.replace(h, config=config) if type(ev) is Header else ev)


@pytest.mark.asyncio
async def test_a_run_has_one_label_in_the_header_the_compare_column_and_the_history(tmp_path, monkeypatch):
    """The embedded default drafts n-gram with a cost-aware K: its header says ``K=1..16
    adaptive``, and so must the compare screen's candidate column (it said ``K=4``, the K the
    run started with) and the history's group of it."""
    from spectui.history.labels import run_label
    from spectui.ui.screens.compare import CompareScreen

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    folder = tmp_path / "recordings"
    folder.mkdir()
    adaptive = folder / "adaptive.spectui"
    copy_with_config(FIXED_SPEC, adaptive, DraftConfig(length=CostAware(k_min=1, k_max=16)))
    label = "spec n-gram K=1..16 adaptive"
    assert run_label(read_recording(adaptive).header.config) == label

    app = make_app(RunConfig(prompt="(labels)"), record=False, recordings_dir=str(folder), engine_factory=no_engine)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.open_recording(adaptive)
        assert label in await visible(pilot, "#header")

        assert app.open_compare(FIXED_AR, adaptive)
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        app.refresh_now()
        assert f"candidate: {label}" in await visible(pilot, "#col-candidate")
        await pilot.press("escape")

        await pilot.press("h")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.groups, "the history to load", 60)
        (group,) = app.screen.groups
        assert f" · {label} · " in group.title
        assert str(app.screen.query_one("#history-groups", OptionList).get_option_at_index(0).prompt).startswith(label)


@pytest.mark.asyncio
async def test_history_groups_runs_by_their_label(tmp_path, monkeypatch):
    """A chain (n-gram, then the draft model) is not the draft model alone, though drafter and
    K match: two groups, each under its header's label; runs of a server, which drafts as it is
    configured, are one group whatever the local draft settings said."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    folder = tmp_path / "recordings"
    folder.mkdir()
    draft = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    copy_with_config(FIXED_SPEC, folder / "model.spectui", DraftConfig(drafter=Model(path=draft), length=Fixed()))
    copy_with_config(FIXED_SPEC, folder / "chain.spectui", DraftConfig(drafter=Model(path=draft, chain=Lookup()), length=Fixed()))
    copy_with_config(FIXED_SPEC, folder / "server-k4.spectui", backend="server")
    copy_with_config(FIXED_SPEC, folder / "server-k6.spectui", DraftConfig(length=Fixed(k=6)), backend="server")

    app = make_app(RunConfig(prompt="(history)"), record=False, recordings_dir=str(folder), engine_factory=no_engine)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("h")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.groups, "the history to load", 60)
        runs = {"spec (drafting on the server)": 2, "spec draft SmolLM2-135M-Instruct.Q4_1 K=4": 1,
                "spec n-gram, then draft SmolLM2-135M-Instruct.Q4_1 K=4": 1}  # fmt: skip
        groups = app.screen.groups
        assert len(groups) == 3
        assert {label: len(g.runs) for g in groups for label in runs if f" · {label} · " in g.title} == runs
        labels = list(runs)
        # the list as a person reads it: wrapped lines joined, the list's frame left out
        shown = (line.strip("▊▎▔▁ ") for line in (await visible(pilot, "#history-groups")).splitlines())
        text = " ".join(" ".join(shown).split())
        assert all(label in text for label in labels), text
