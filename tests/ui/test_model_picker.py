"""The dashboard's model picker on a temporary home: the embedded model and a real Q8_0
requantisation of it (llama.cpp's quantize API) in ``$SPECTUI_MODELS``, a broken ``.gguf``
beside them. The Q8_0 is the target (same parameters, more bytes), the embedded Q4_1 its draft."""

from __future__ import annotations

import os

import pytest

from spectui.drafting import DraftConfig, Fixed
from spectui.ui.app import SpectuiApp
from spectui.ui.screens.live import LiveScreen
from spectui.ui.screens.model_picker import ModelPicker
from tests.ui.conftest import real_config, visible, wait_until

_MODEL_ENV = ("HF_HOME", "HF_HUB_CACHE", "LLAMA_CACHE", "OLLAMA_MODELS", "SPECTUI_MODELS")


@pytest.fixture(scope="session")
def q8_variant(model_path) -> str:
    """The embedded model requantized to Q8_0 (kept in the user cache, made once)."""
    from spectui.engine.host.quantize import cached_copy

    return str(cached_copy(model_path, "Q8_0"))


@pytest.fixture
def home(tmp_path, monkeypatch, q8_variant):
    """HOME with only ``$SPECTUI_MODELS`` holding models: a Q8_0 and a file that is not GGUF."""
    h = tmp_path / "home"
    models = tmp_path / "models"
    models.mkdir(parents=True)
    h.mkdir()
    os.symlink(q8_variant, models / "smollm2-q8_0.gguf")
    (models / "broken.gguf").write_bytes(b"<html>404 not found</html>")
    for k in _MODEL_ENV:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("XDG_CACHE_HOME", str(h / ".cache"))
    monkeypatch.setenv("SPECTUI_MODELS", str(models))
    return models


async def _open_picker(pilot) -> ModelPicker:  # noqa: ANN001
    await pilot.press("M")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ModelPicker), "the model picker")
    picker = pilot.app.screen
    await wait_until(pilot, lambda: picker.catalogue is not None or picker.error, "the catalogue to load")
    await pilot.pause()
    return picker


@pytest.mark.asyncio
async def test_pick_target_then_draft_sets_the_next_run(home, model_path):
    q8 = str(home / "smollm2-q8_0.gguf")
    app = SpectuiApp(real_config(draft=DraftConfig(length=Fixed(k=6))), record=False)
    async with app.run_test(size=(120, 40)) as pilot:
        picker = await _open_picker(pilot)
        assert not picker.error
        paths = [m.path for m in picker.catalogue.models]
        assert set(paths) == {model_path, q8}
        text = await visible(pilot)
        assert "smollm2-q8_0" in text and "Q8_0" in text and "Q4_1" in text
        assert "note: not a GGUF file" in text  # the broken file, a note below the list
        assert picker.catalogue.notes and "broken.gguf" in picker.catalogue.notes[0]
        # the Q8_0 target: its one compatible draft is the embedded Q4_1, then n-gram
        for _ in range(paths.index(q8)):
            await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause()
        assert picker.target is not None and picker.target.path == q8
        assert [d.path for d in picker.drafts] == [model_path]
        text = await visible(pilot)
        assert "Choose a draft for" in text and "n-gram (no draft model)" in text and "suffix (no draft model)" in text
        await pilot.press("enter")  # the first: the embedded model
        await wait_until(pilot, lambda: isinstance(app.screen, LiveScreen), "the picker to close")
        cfg = app.controller.config
        assert cfg.target == q8 and cfg.draft.flag == model_path
        assert cfg.draft.fixed_k == 6 and not cfg.draft.cost_aware  # K as configured
        assert any("next run: smollm2-q8_0.gguf with" in n.message for n in app._notifications)

        # the embedded target has no smaller draft: n-gram only, with the cost-aware K
        picker = await _open_picker(pilot)
        paths = [m.path for m in picker.catalogue.models]
        for _ in range(paths.index(model_path)):
            await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause()
        assert picker.drafts == []
        assert "no compatible draft model" in await visible(pilot)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, LiveScreen), "the picker to close")
        cfg = app.controller.config
        assert cfg.target == model_path and cfg.draft.flag == "ngram" and cfg.draft.cost_aware


@pytest.mark.asyncio
async def test_escape_backs_out_and_keeps_the_config(home, model_path):
    app = SpectuiApp(real_config(), record=False)
    before = app.controller.config
    async with app.run_test(size=(120, 40)) as pilot:
        picker = await _open_picker(pilot)
        await pilot.press("enter")  # a target: the drafts step
        await pilot.pause()
        assert picker.target is not None
        await pilot.press("escape")  # back to the targets
        await pilot.pause()
        assert picker.target is None and isinstance(app.screen, ModelPicker)
        assert "Choose a target model" in await visible(pilot)
        await pilot.press("escape")  # out
        await wait_until(pilot, lambda: isinstance(app.screen, LiveScreen), "the picker to close")
        assert app.controller.config == before


@pytest.mark.asyncio
async def test_refused_while_a_session_runs(home, monkeypatch):
    app = SpectuiApp(real_config(), record=False)
    async with app.run_test(size=(120, 40)) as pilot:
        with monkeypatch.context() as mp:
            mp.setattr(type(app.controller), "running", property(lambda self: True))
            await pilot.press("M")
            await pilot.pause()
            assert not isinstance(app.screen, ModelPicker)
        assert any("stop it (s) before choosing models" in n.message for n in app._notifications)


@pytest.mark.asyncio
async def test_loading_off_the_ui_thread_then_empty(home, monkeypatch):
    """The catalogue loads in a thread: "loading…" meanwhile, the UI answers; none found, said so."""
    import threading

    import spectui.ui.screens.model_picker as mp
    from spectui.models.catalogue import Catalogue

    gate, threads = threading.Event(), []

    def slow_discover(folders=()):  # noqa: ANN001, ANN202
        threads.append(threading.current_thread())
        gate.wait(30)
        return Catalogue(models=[], notes=["cannot read folder /nowhere: Permission denied"])

    monkeypatch.setattr(mp, "discover", slow_discover)
    app = SpectuiApp(real_config(), record=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("M")
        await wait_until(pilot, lambda: bool(threads), "the catalogue worker")
        assert threads[0] is not threading.main_thread()
        assert "loading…" in await visible(pilot)  # and the UI thread is free to draw it
        gate.set()
        picker = app.screen
        await wait_until(pilot, lambda: picker.catalogue is not None, "the catalogue")
        text = await visible(pilot)
        assert "no models found" in text and "note: cannot read folder /nowhere" in text
        await pilot.press("enter")  # nothing to pick: stays
        assert isinstance(app.screen, ModelPicker)
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, LiveScreen), "the picker to close")
