"""Snapshots of the history, plot, tune and model-picker screens, each with data and empty
(pytest-textual-snapshot), as a person first meets them.

The data are real and checked in: the fixed recordings (tests/data/make_fixed_sessions.py),
copied with fixed start times so the history's wall-clock axis reads the same on any day, and
a real tune result (tests/data/make_tune_result.py). No model is loaded: the recordings open
without an engine, and the picker reads GGUF metadata only. Update with
``python -m pytest tests/ui/test_screen_snapshots.py --snapshot-update`` after a deliberate
change, and look at the SVGs before committing them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import pytest

from spectui.config import RunConfig
from spectui.recording.reader import read_recording
from spectui.recording.schema import Header
from spectui.recording.writer import RecordingWriter
from spectui.ui.launch import make_app

from .conftest import DATA, FIXED_AR, FIXED_SPEC, real_config, wait_until

pytestmark = pytest.mark.ui

TUNE_RESULT = DATA / "tune-result.json"
#: a home that does not exist: the picker's "where it looked" lists the same folders everywhere
FIXED_HOME = "/home/spectui-snapshot"
_MODEL_ENV = ("HF_HOME", "HF_HUB_CACHE", "LLAMA_CACHE", "OLLAMA_MODELS", "SPECTUI_MODELS")


def no_engine(_config):  # noqa: ANN001, ANN202 - none of these screens may load a model
    raise AssertionError("a screen loaded an engine")


def copy_at(src: Path, dst: Path, started_at: str, runtime: dict | None = None) -> None:
    """A checked-in recording with a fixed start time (and, to mark a change, another runtime)."""
    rec = read_recording(src)
    h = rec.header
    artifacts = h.artifacts if runtime is None else msgspec.structs.replace(h.artifacts, runtime={**h.artifacts.runtime, **runtime})
    header = msgspec.structs.replace(h, started_at=started_at, artifacts=artifacts)
    with RecordingWriter(dst) as w:
        for ev in rec.events:
            w.write(header if type(ev) is Header else ev)


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A temporary working folder with an empty ``recordings/`` (named relative to it, so no
    temporary path shows on screen), its own data and cache folders, and a fixed home."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", FIXED_HOME)
    for k in _MODEL_ENV:
        monkeypatch.delenv(k, raising=False)
    (tmp_path / "recordings").mkdir()
    return tmp_path


def recorded_runs(folder: Path) -> None:
    """Four runs minutes apart: an AR baseline and three n-gram runs, the last on a newer runtime."""
    copy_at(FIXED_AR, folder / "ar-1.spectui", "2026-11-20T09:58:00+00:00")
    copy_at(FIXED_SPEC, folder / "spec-1.spectui", "2026-11-20T10:00:00+00:00")
    copy_at(FIXED_SPEC, folder / "spec-2.spectui", "2026-11-20T10:04:00+00:00")
    copy_at(FIXED_SPEC, folder / "spec-3.spectui", "2026-11-20T10:11:00+00:00", runtime={"llama-cpp-python": "9.9.9"})


def history_app():  # noqa: ANN201
    from spectui.ui.screens.history import HistoryScreen

    app = make_app(RunConfig(prompt="(history)"), record=False, engine_factory=no_engine)

    async def open_history(pilot) -> None:  # noqa: ANN001
        await pilot.pause()
        # stale after a million days: the snapshot does not turn STALE as the fixed runs age
        app.push_screen(HistoryScreen(["recordings"], index=os.path.abspath("index.sqlite"), stale_days=1e6))
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen) and bool(app.screen.summary), "the history", 60)
        await pilot.pause()

    return app, open_history


class TestHistory:
    def test_with_runs(self, here, snap_compare):
        recorded_runs(here / "recordings")
        app, before = history_app()
        assert snap_compare(app, terminal_size=(140, 50), run_before=before)

    def test_empty(self, here, snap_compare):
        app, before = history_app()
        assert snap_compare(app, terminal_size=(100, 24), run_before=before)


class TestPlots:
    def test_with_a_run(self, here, snap_compare):
        app = make_app(RunConfig(prompt="unused: the recording brings its own"), record=False, engine_factory=no_engine)

        async def open_run(pilot) -> None:  # noqa: ANN001
            await pilot.pause()
            assert app.open_recording(str(FIXED_SPEC))
            await pilot.pause()

        assert snap_compare(app, press=["g"], terminal_size=(120, 40), run_before=open_run)

    def test_before_any_run(self, here, snap_compare):
        app = make_app(RunConfig(prompt="Fix the typos."), record=False, engine_factory=no_engine)
        assert snap_compare(app, press=["g"], terminal_size=(100, 24))


def tune_app():  # noqa: ANN201
    from spectui.ui.screens.tune import TuneScreen

    app = make_app(real_config(), record=False, engine_factory=no_engine)

    async def open_tune(pilot) -> None:  # noqa: ANN001
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TuneScreen) and app.screen.loaded, "the tune screen", 60)
        await pilot.pause()

    return app, open_tune


class TestTune:
    def test_with_a_result(self, here, snap_compare):
        from spectui.tune.store import result_path
        from spectui.ui.screens.tune import target_key

        # the checked-in result, stored where the screen looks for this target
        doc = json.loads(TUNE_RESULT.read_text())
        doc["key"] = key = target_key(real_config())
        path = result_path(key)
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(doc))
        app, before = tune_app()
        assert snap_compare(app, terminal_size=(140, 60), run_before=before)

    def test_no_result_yet(self, here, snap_compare):
        app, before = tune_app()
        assert snap_compare(app, terminal_size=(100, 24), run_before=before)


def picker_app():  # noqa: ANN201
    from spectui.ui.screens.model_picker import ModelPicker

    app = make_app(real_config(), record=False, engine_factory=no_engine)

    async def open_picker(pilot) -> None:  # noqa: ANN001
        await pilot.press("M")
        await wait_until(pilot, lambda: isinstance(app.screen, ModelPicker) and app.screen.catalogue is not None, "the catalogue", 60)
        await pilot.pause()

    return app, open_picker


class TestModelPicker:
    def test_with_models(self, here, monkeypatch, model_path, snap_compare):
        models = here / "models"
        models.mkdir()
        os.symlink(model_path, models / "SmolLM2-135M-Instruct-copy.gguf")  # same weights, another file
        monkeypatch.setenv("SPECTUI_MODELS", str(models))
        app, before = picker_app()
        assert snap_compare(app, terminal_size=(110, 30), run_before=before)

    def test_only_the_embedded_model(self, here, snap_compare):
        app, before = picker_app()
        assert snap_compare(app, terminal_size=(110, 30), run_before=before)
