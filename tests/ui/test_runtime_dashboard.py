"""The dashboard and the sweep view on a real llama-server: ``x`` switches the next run from the
embedded llama.cpp to the runtime (past MLX, or skipping it with a line where it is missing),
the header names the runtime, the run is a llama-server session, and ``x`` comes back to
llama.cpp with the embedded drafting; the sweep view runs a runtime sweep and shows the
table ``spectui sweep`` prints. Short runs on one thread (tests/ui/conftest.py)."""

from __future__ import annotations

import msgspec
import pytest

from spectui.drafting import DraftConfig, Runtime, RuntimeDefault
from spectui.lab.sweep import SweepPlan, make_points
from spectui.lab.sweep_report import format_table
from spectui.prompts import list_prompts
from spectui.recording.reader import read_recording
from spectui.ui.launch import make_app, make_sweep_app
from spectui.ui.screens.sweep import SweepScreen

from .conftest import real_config, visible, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.server]

SIZE = (120, 30)


def runtime_config(binary: str, **changes):  # noqa: ANN003, ANN201
    config = real_config(**changes)
    # flash attention on, as the runtime tests run it: one thread is then exact
    return msgspec.structs.replace(config, backend=msgspec.structs.replace(config.backend, runtime_binary=binary, flash_attn="on"))


@pytest.mark.asyncio
async def test_x_switches_to_llama_server_runs_there_and_comes_back(llama_server_binary, tmp_path):  # noqa: F811
    config = runtime_config(llama_server_binary.path, max_tokens=16)
    embedded_draft = config.draft
    app = make_app(config, recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(3):  # llama.cpp -> MLX (or skipped with a line) -> llama-server
            await pilot.press("x")
            if app.controller.config.backend.name == "llama-server":
                break
        cfg = app.controller.config
        assert cfg.backend.name == "llama-server" and cfg.draft.flag == "runtime:ngram-mod"
        header = await visible(pilot, "#header")
        assert "llama-server" in header and "ngram-mod" in header
        await pilot.press("r")
        await wait_until(pilot, lambda: app.controller.state in ("done", "error", "interrupted"), "the runtime run to end")
        assert app.controller.state == "done", app.controller.detail
        rec = read_recording(app.controller.recording_path)
        assert rec.header.config.backend.name == "llama-server"
        assert "--spec-type ngram-mod" in rec.header.artifacts.server.props["runtime.command_line"]

        for _ in range(3):  # on to mlx-lm (skipped: it drafts only with a draft model), then llama.cpp
            await pilot.press("x")
            if app.controller.config.backend.name == "llamacpp":
                break
        assert app.controller.config.backend.name == "llamacpp" and app.controller.config.draft == embedded_draft
        assert "llama.cpp" in await visible(pilot, "#header")


@pytest.mark.asyncio
async def test_the_sweep_view_runs_a_runtime_sweep_and_shows_the_printed_table(llama_server_binary, tmp_path):  # noqa: F811
    name = "copy-quote-paragraph"
    (spec,) = [p for p in list_prompts() if p.name == name]
    base = runtime_config(llama_server_binary.path)
    base = msgspec.structs.replace(base, backend=msgspec.structs.replace(base.backend, name="llama-server"),
                                   draft=DraftConfig(drafter=Runtime(method="ngram-simple", lookup=2), length=RuntimeDefault()))
    plan = SweepPlan(base=base, prompts=[name], tiers={name: spec.tier},
                     points=make_points(k_values="4", drafters="runtime:ngram-simple", grid=True), repeats=1)
    app = make_sweep_app(plan, [spec], str(tmp_path), max_tokens=24)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.state in ("done", "stopped", "error"), "the sweep to end")
        assert app.state == "done", app.error
        screen = app.screen
        assert isinstance(screen, SweepScreen)
        result = app.result
        assert result is not None and [r.label for r in result.rows] == ["AR", "ngram-simple K=4"]
        shown = screen.table_cells(spec.tier)
        assert sorted(cells[0] for cells in shown.values()) == ["AR", "ngram-simple K=4"]
        printed = format_table(result)
        for cells in shown.values():  # the view's cells are the printed table's, row by row
            words = " ".join(cells).split()
            assert any(line.split() == words for line in printed.splitlines()), (cells, printed)
        text = await visible(pilot)
        assert "llama-server" in text and "knee: ngram-simple:" in text
