"""The dashboard driven from the keyboard (Textual Pilot) on the real embedded model.

Runs are short (tens of tokens). Where a test must act in the middle of a run (stop,
restart, quit), a ``GatedEngine`` holds the real run after a few steps until it is stopped,
so the test never races the model, whatever the machine's speed.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from spectui.metrics.stats import summarize
from spectui.recording.reader import read_recording
from spectui.recording.schema import End, Header, Step, TokenOrigin
from spectui.ui.app import make_app
from spectui.ui.screens.plot import PlotScreen
from spectui.ui.widgets.token_stream import TokenStream

from .conftest import FIXED_AR, FIXED_SPEC, GatedFactory, real_config, visible, wait_thread, wait_until

SIZE = (100, 30)


def recorded_text(path: Path) -> tuple[list[int], str]:
    steps = [e for e in read_recording(path).events if type(e) is Step]
    tokens = [t for s in steps for t in s.tokens]
    return tokens, b"".join(p for s in steps for p in s.pieces).decode("utf-8", "replace")


def screen_text(app) -> str:  # noqa: ANN001
    return app.screen.query_one(TokenStream).plain_text


async def header_text(pilot) -> str:  # noqa: ANN001
    return await visible(pilot, "#header")


async def stats_text(pilot) -> str:  # noqa: ANN001
    return await visible(pilot, "#stats")


def recordings(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.spectui"))


def engine_workers(app) -> list:  # noqa: ANN001
    return [w for w in app.workers if w.group == "engine" and not w.is_finished]


async def finished(pilot, app) -> None:  # noqa: ANN001
    """Wait for the run to end and for the engine thread to be done with it."""
    await wait_until(pilot, lambda: app.state in ("done", "interrupted", "error", "idle"), "the run to end")
    await wait_until(pilot, lambda: not app.runner.busy, "the engine thread to finish the session")
    assert len(engine_workers(app)) == 1  # one engine thread, still there for the next run
    app.refresh_now()


async def test_run_streams_tokens_and_the_recording_matches_the_screen(tmp_path):
    app = make_app(real_config(max_tokens=32), recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        assert app.state == "idle"
        assert "idle" in await header_text(pilot)
        await pilot.press("r")
        await wait_until(pilot, lambda: app.live.n_tokens > 0, "the first tokens")
        await finished(pilot, app)
        assert app.state == "done", app.detail

        (path,) = recordings(tmp_path)
        assert app.recording_path == path
        assert path.name in await header_text(pilot) and "REC" in await header_text(pilot)
        rec = read_recording(path)
        assert rec.complete and not rec.truncated
        tokens, text = recorded_text(path)
        # what the token stream shows is exactly what was recorded
        assert app.live.tokens == tokens
        assert screen_text(app) == text
        assert text.strip()
        assert type(rec.events[-1]) is End and rec.events[-1].reason in ("length", "stop")
        stats = await stats_text(pilot)
        assert "tok/s" in stats and f"{len(tokens)} · {rec.events[-1].reason}" in stats
    assert app.runner.engine is None and app.runner.closed  # quit closed the engine


async def test_stop_switch_mode_and_change_k(tmp_path):
    factory = GatedFactory(hold_after=3)
    app = make_app(real_config(max_tokens=40), recordings_dir=str(tmp_path), engine_factory=factory)
    async with app.run_test(size=SIZE) as pilot:
        # run, see tokens arrive, stop it in the middle
        await pilot.press("r")
        await wait_thread(lambda: factory.engines and factory.engine.holding.is_set(), "the run to be under way")
        await wait_until(pilot, lambda: app.live.n_tokens >= 3, "tokens on screen")
        app.refresh_now()
        assert app.state == "running"
        assert screen_text(app)
        await pilot.press("s")
        await finished(pilot, app)
        assert app.state == "interrupted"
        (first,) = recordings(tmp_path)
        end = read_recording(first).events[-1]
        assert type(end) is End and end.reason == "interrupted"
        assert screen_text(app) == recorded_text(first)[1]
        assert "interrupted" in await header_text(pilot)

        # switch to AR and run to the end
        factory.engine.hold_after = 0
        await pilot.press("m")
        assert app.config.mode == "ar"
        assert "AR" in await header_text(pilot)
        await pilot.press("r")
        await finished(pilot, app)
        assert app.state == "done", app.detail
        ar_path = app.recording_path
        assert ar_path is not None and "_ar_" in ar_path.name
        rec = read_recording(ar_path)
        assert rec.header.config.mode == "ar"
        assert set(app.live.origins) == {int(TokenOrigin.AR)}
        assert screen_text(app) == recorded_text(ar_path)[1]

        # back to speculative with K = 6
        await pilot.press("m", "plus", "plus")
        assert (app.config.mode, app.config.draft.k) == ("spec", 6)
        assert "K=6" in await header_text(pilot)
        await pilot.press("r")
        await finished(pilot, app)
        spec_path = app.recording_path
        assert spec_path is not None and "k6" in spec_path.name
        rec = read_recording(spec_path)
        assert rec.header.config.draft.k == 6
        assert all(s.k == 6 for s in rec.events if type(s) is Step and s.drafted)
        assert screen_text(app) == recorded_text(spec_path)[1]
        # greedy speculative output is the AR output: the dashboard shows the same text
        n = min(len(app.live.tokens), len(recorded_text(ar_path)[0]))
        assert app.live.tokens[:n] == recorded_text(ar_path)[0][:n]

        await pilot.press("minus")
        assert app.config.draft.k == 5
        assert len(factory.engines) == 1  # one load for all four runs: the engine was reused
    assert factory.engine.closed
    assert len(recordings(tmp_path)) == 3


async def test_a_settings_change_restarts_the_running_run(tmp_path):
    factory = GatedFactory(hold_after=2)
    app = make_app(real_config(max_tokens=40), recordings_dir=str(tmp_path), engine_factory=factory)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r")
        await wait_thread(lambda: factory.engines and factory.engine.holding.is_set(), "the first run")
        first_run = app.run_id
        await pilot.press("plus")
        assert app.config.draft.k == 5
        await wait_until(pilot, lambda: app.run_id > first_run, "the restart")
        await wait_thread(lambda: factory.engine.runs == 2 and factory.engine.holding.is_set(), "the second run")
        assert app.runner.busy and len(engine_workers(app)) == 1
        assert app.live.header is not None and app.live.header.config.draft.k == 5
        # a restart by hand, too
        await pilot.press("r")
        await wait_thread(lambda: factory.engine.runs == 3 and factory.engine.holding.is_set(), "the third run")
        await pilot.press("s")
        await finished(pilot, app)
    assert len(set(factory.engine.threads)) == 1  # every run on the one engine thread
    assert factory.engine.threads[0] is not threading.main_thread()
    files = recordings(tmp_path)
    assert len(files) == 3
    for f in files:  # every run was stopped in its middle and says so
        assert read_recording(f).events[-1].reason == "interrupted"
    assert [read_recording(f).header.config.draft.k for f in files] == [4, 5, 5]


async def test_quit_during_a_run_stops_it_and_closes_the_engine(tmp_path):
    factory = GatedFactory(hold_after=2)
    app = make_app(real_config(max_tokens=40), recordings_dir=str(tmp_path), engine_factory=factory)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r")
        await wait_thread(lambda: factory.engines and factory.engine.holding.is_set(), "the run")
        await pilot.press("q")
    assert app.return_code == 0
    assert factory.engine.closed and not app.runner.busy and app.runner.closed
    assert not app.runner.serving  # the engine thread returned after closing the engine
    (path,) = recordings(tmp_path)
    assert read_recording(path).events[-1].reason == "interrupted"


async def test_bad_input_is_one_line_on_screen_and_no_recording(tmp_path):
    app = make_app(real_config(target=str(tmp_path / "missing.gguf")), recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r")
        await finished(pilot, app)
        assert app.state == "error"
        assert "model file not found" in app.detail
        assert "model file not found" in await header_text(pilot)
        await pilot.press("m")  # still responsive
        assert app.config.mode == "ar"
    assert recordings(tmp_path) == []


async def test_recording_off(tmp_path):
    app = make_app(real_config(max_tokens=8), record=False, recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        assert "recording off" in await header_text(pilot)
        await pilot.press("r")
        await finished(pilot, app)
        assert app.state == "done" and app.live.n_tokens > 0
        assert screen_text(app)
    assert recordings(tmp_path) == []


async def test_open_a_recording_from_the_keyboard(tmp_path):
    app = make_app(real_config(), recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await pilot.pause()
        await pilot.press(*str(FIXED_SPEC))
        await pilot.press("enter")
        await pilot.pause()
        app.refresh_now()
        assert app.state == "replay"
        assert screen_text(app) == recorded_text(FIXED_SPEC)[1]
        header = await header_text(pilot)
        # the path is shortened from the left to fit: its file name stays
        assert "replay" in header and "file " in header and f"{FIXED_SPEC.parent.name}/{FIXED_SPEC.name}" in header
        # the same numbers as the recording's own summary
        assert app.live.summary().acceptance_rate == summarize(read_recording(FIXED_SPEC).events).acceptance_rate


async def test_replay_shows_the_same_state_as_the_live_run(tmp_path):
    """A run's final screen and its recording opened afterwards draw the same state."""
    app = make_app(real_config(max_tokens=24), recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r")
        await finished(pilot, app)
        live_text, live_summary = screen_text(app), app.live.summary()
        stats_live = await stats_text(pilot)
        assert app.open_recording(app.recording_path)
        assert screen_text(app) == live_text
        assert await stats_text(pilot) == stats_live
        assert app.live.summary().n_tokens == live_summary.n_tokens


async def test_measured_speedup_against_an_ar_baseline():
    app = make_app(real_config())
    async with app.run_test(size=SIZE) as pilot:
        assert app.open_recording(FIXED_SPEC)
        assert "needs an AR run" in await stats_text(pilot)
        assert app.open_recording(FIXED_AR)
        assert app.open_recording(FIXED_SPEC)
        stats = await stats_text(pilot)
        assert "vs AR" in stats


async def test_plot_view_prompt_picker_blocks_and_theme(tmp_path):
    app = make_app(real_config(), recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        assert app.open_recording(FIXED_SPEC)
        await pilot.press("g")
        await pilot.pause()
        assert isinstance(app.screen, PlotScreen)
        await wait_until(pilot, lambda: app.screen.query_one("RunPlot")._key is not None, "plots")
        plot = await visible(pilot)
        assert "inter-token latency" in plot
        assert "acceptance per block" in plot and "headroom" in plot
        await pilot.press("escape")
        assert not isinstance(app.screen, PlotScreen)

        before = app.screen.query_one(TokenStream).plain_text
        await pilot.press("b")
        app.refresh_now()
        stream = app.screen.query_one(TokenStream)
        assert stream.show_blocks and stream.plain_text == before
        assert "▏" in await visible(pilot, "#tokens")

        theme = app.theme
        await pilot.press("c")
        assert app.theme != theme

        await pilot.press("p")
        await pilot.pause()
        picker = app.screen
        assert picker.specs, "prompts/ has prompt files"
        await pilot.press("down", "enter")
        await pilot.pause()
        chosen = picker.specs[1]
        assert app.config.prompt == chosen.text
        assert (app.config.prompt_tier, app.config.max_tokens) == (chosen.tier, chosen.max_tokens)


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
async def test_layout_fits_small_and_large_terminals(size):
    app = make_app(real_config())
    async with app.run_test(size=size) as pilot:
        assert app.open_recording(FIXED_SPEC)
        await pilot.pause()
        screen = app.screen
        assert screen.has_class("-tall") == (size[1] >= 40)
        for widget_id in ("#header", "#tokens", "#stats", "#signal-itl", "#signal-acceptance", "#signal-headroom"):
            region = screen.query_one(widget_id).region
            assert region.height > 0 and region.width > 0, widget_id
            assert region.right <= size[0] and region.bottom <= size[1], widget_id
        assert isinstance(app.live.header, Header)


async def test_events_are_coalesced_into_timed_repaints(monkeypatch):
    """Hundreds of events posted from a thread cost a few repaints, not one each; events of
    a superseded run are dropped."""
    import time

    from spectui.ui.app import REPAINT_HZ
    from spectui.ui.messages import SessionEvent
    from spectui.ui.screens.live import LiveScreen

    redraws = []
    original = LiveScreen.redraw
    monkeypatch.setattr(LiveScreen, "redraw", lambda self, **kw: (redraws.append(1), original(self, **kw))[1])
    events = read_recording(FIXED_SPEC).events
    app = make_app(real_config())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.run_id = 7
        redraws.clear()
        t0 = time.monotonic()

        def worker() -> None:
            for ev in events:
                app.post_message(SessionEvent(6, ev))  # a stale run: ignored
                app.post_message(SessionEvent(7, ev))

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        await wait_until(pilot, lambda: app.live.n_events == len(events), "every event to be folded")
        await pilot.pause(2 / REPAINT_HZ)
        elapsed = time.monotonic() - t0
        assert app.live.n_events == len(events)  # the stale copies were not folded
        assert screen_text(app) == recorded_text(FIXED_SPEC)[1]
        # bounded by the repaint timer, whatever the number of events
        assert len(redraws) <= elapsed * REPAINT_HZ + 3, (len(redraws), elapsed)
        assert len(redraws) < len(events) / 4, (len(redraws), len(events))


async def test_switch_backend_to_mlx_and_run(tmp_path):
    """`x` switches the next run to MLX; the engine thread loads it and the run is recorded
    as an MLX session of the same model."""
    app = make_app(real_config(max_tokens=6), recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("x")
        assert app.config.backend.name == "mlx"
        assert "MLX" in await header_text(pilot)
        await pilot.press("r")
        await finished(pilot, app)
        assert app.state == "done", app.detail
        rec = read_recording(app.recording_path)
        assert rec.header.config.backend.name == "mlx"
        assert rec.header.artifacts.runtime.get("mlx")
        assert screen_text(app) == recorded_text(app.recording_path)[1]
