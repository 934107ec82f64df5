"""The dashboard driven from the keyboard (Textual Pilot) on the real embedded model.

Runs are short (tens of tokens). Where a test must act in the middle of a run (stop,
restart, quit), a ``GatedEngine`` holds the real run after a few steps until it is stopped,
so the test never races the model, whatever the machine's speed.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from spectui.drafting import CostAware, DraftConfig, Fixed
from spectui.metrics.stats import summarize
from spectui.recording.output import output_text
from spectui.recording.reader import read_recording
from spectui.recording.schema import End, Header, Step, TokenOrigin
from spectui.ui.launch import make_app
from spectui.ui.runs.base import RunKind
from spectui.ui.screens.plot import PlotScreen
from spectui.ui.widgets.token_stream import TokenStream

from .conftest import FIXED_AR, FIXED_SPEC, GatedFactory, real_config, visible, wait_thread, wait_until

SIZE = (100, 30)


def recorded_text(path: Path) -> tuple[list[int], str]:
    """The recorded tokens, and the text a reader sees (the end-of-turn token, kept among the
    tokens, is drawn as a stop mark, not as text)."""
    events = read_recording(path).events
    tokens = [t for e in events if type(e) is Step for t in e.tokens]
    return tokens, output_text(events)


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
    await wait_until(pilot, lambda: app.controller.state in ("done", "interrupted", "error", "idle"), "the run to end")
    await wait_until(pilot, lambda: not app.controller.runner.busy, "the engine thread to finish the session")
    assert len(engine_workers(app)) == 1  # one engine thread, still there for the next run
    app.refresh_now()


@pytest.mark.asyncio
async def test_run_streams_tokens_and_the_recording_matches_the_screen(tmp_path):
    app = make_app(real_config(max_tokens=32), recordings_dir=str(tmp_path))
    # wide enough for the whole recording name (time, mode, drafter and the model's display name)
    async with app.run_test(size=(160, 30)) as pilot:
        assert app.controller.state == "idle"
        assert "idle" in await header_text(pilot)
        await pilot.press("r")
        await wait_until(pilot, lambda: app.controller.live.n_tokens > 0, "the first tokens")
        await finished(pilot, app)
        assert app.controller.state == "done", app.controller.detail

        (path,) = recordings(tmp_path)
        assert app.controller.recording_path == path
        assert path.name in await header_text(pilot) and "REC" in await header_text(pilot)
        rec = read_recording(path)
        assert rec.complete and not rec.truncated
        tokens, text = recorded_text(path)
        # what the token stream shows is exactly what was recorded
        assert app.controller.live.tokens == tokens
        assert screen_text(app) == text
        assert text.strip()
        assert type(rec.events[-1]) is End and rec.events[-1].reason in ("length", "stop")
        stats = await stats_text(pilot)
        assert "tok/s" in stats and f"{len(tokens)} · {rec.events[-1].reason}" in stats
    assert app.controller.runner.engine is None and app.controller.runner.closed  # quit closed the engine


@pytest.mark.asyncio
async def test_stop_switch_mode_and_change_k(tmp_path):
    factory = GatedFactory(hold_after=3)
    fixed = DraftConfig(length=Fixed(k=4))
    app = make_app(real_config(max_tokens=40, draft=fixed), recordings_dir=str(tmp_path), engine_factory=factory)
    async with app.run_test(size=SIZE) as pilot:
        # run, see tokens arrive, stop it in the middle
        await pilot.press("r")
        await wait_thread(lambda: factory.engines and factory.engine.holding.is_set(), "the run to be under way")
        await wait_until(pilot, lambda: app.controller.live.n_tokens >= 3, "tokens on screen")
        app.refresh_now()
        assert app.controller.state == "running"
        assert screen_text(app)
        await pilot.press("s")
        await finished(pilot, app)
        assert app.controller.state == "interrupted"
        (first,) = recordings(tmp_path)
        end = read_recording(first).events[-1]
        assert type(end) is End and end.reason == "interrupted"
        assert screen_text(app) == recorded_text(first)[1]
        assert "interrupted" in await header_text(pilot)

        # switch to AR and run to the end
        factory.engine.hold_after = 0
        await pilot.press("m")
        assert app.controller.config.mode == "ar"
        assert "AR" in await header_text(pilot)
        await pilot.press("r")
        await finished(pilot, app)
        assert app.controller.state == "done", app.controller.detail
        ar_path = app.controller.recording_path
        assert ar_path is not None and "_ar_" in ar_path.name
        rec = read_recording(ar_path)
        assert rec.header.config.mode == "ar"
        assert set(app.controller.live.origins) == {int(TokenOrigin.AR)}
        assert screen_text(app) == recorded_text(ar_path)[1]

        # back to speculative with K = 6
        await pilot.press("m", "plus", "plus")
        assert (app.controller.config.mode, app.controller.config.draft.fixed_k) == ("spec", 6)
        assert "K=6" in await header_text(pilot)
        await pilot.press("r")
        await finished(pilot, app)
        spec_path = app.controller.recording_path
        assert spec_path is not None and "k6" in spec_path.name
        rec = read_recording(spec_path)
        assert rec.header.config.draft.fixed_k == 6
        assert all(s.k == 6 for s in rec.events if type(s) is Step and s.drafted)
        assert screen_text(app) == recorded_text(spec_path)[1]
        # greedy speculative output is the AR output: the dashboard shows the same text
        n = min(len(app.controller.live.tokens), len(recorded_text(ar_path)[0]))
        assert app.controller.live.tokens[:n] == recorded_text(ar_path)[0][:n]

        await pilot.press("minus")
        assert app.controller.config.draft.fixed_k == 5
        assert len(factory.engines) == 1  # one load for all four runs: the engine was reused
    assert factory.engine.closed
    assert len(recordings(tmp_path)) == 3


@pytest.mark.asyncio
async def test_a_settings_change_restarts_the_running_run(tmp_path):
    factory = GatedFactory(hold_after=2)
    app = make_app(real_config(max_tokens=40, draft=DraftConfig(length=Fixed(k=4))), recordings_dir=str(tmp_path), engine_factory=factory)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r")
        await wait_thread(lambda: factory.engines and factory.engine.holding.is_set(), "the first run")
        first_run = app.controller.run_id
        await pilot.press("plus")
        assert app.controller.config.draft.fixed_k == 5
        await wait_until(pilot, lambda: app.controller.run_id > first_run, "the restart")
        await wait_thread(lambda: factory.engine.runs == 2 and factory.engine.holding.is_set(), "the second run")
        assert app.controller.runner.busy and len(engine_workers(app)) == 1
        assert app.controller.live.header is not None and app.controller.live.header.config.draft.fixed_k == 5
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
    assert [read_recording(f).header.config.draft.fixed_k for f in files] == [4, 5, 5]


@pytest.mark.asyncio
async def test_quit_during_a_run_stops_it_and_closes_the_engine(tmp_path):
    factory = GatedFactory(hold_after=2)
    app = make_app(real_config(max_tokens=40, draft=DraftConfig(length=Fixed(k=4))), recordings_dir=str(tmp_path), engine_factory=factory)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r")
        await wait_thread(lambda: factory.engines and factory.engine.holding.is_set(), "the run")
        await pilot.press("q")
    assert app.return_code == 0
    assert factory.engine.closed and not app.controller.runner.busy and app.controller.runner.closed
    assert not app.controller.runner.serving  # the engine thread returned after closing the engine
    (path,) = recordings(tmp_path)
    assert read_recording(path).events[-1].reason == "interrupted"


@pytest.mark.asyncio
async def test_bad_input_is_one_line_on_screen_and_no_recording(tmp_path):
    app = make_app(real_config(target=str(tmp_path / "missing.gguf")), recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r")
        await finished(pilot, app)
        assert app.controller.state == "error"
        assert "model file not found" in app.controller.detail
        assert "model file not found" in await header_text(pilot)
        await pilot.press("m")  # still responsive
        assert app.controller.config.mode == "ar"
    assert recordings(tmp_path) == []


@pytest.mark.asyncio
async def test_recording_off(tmp_path):
    app = make_app(real_config(max_tokens=8), record=False, recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        assert "recording off" in await header_text(pilot)
        await pilot.press("r")
        await finished(pilot, app)
        assert app.controller.state == "done" and app.controller.live.n_tokens > 0
        assert screen_text(app)
    assert recordings(tmp_path) == []


@pytest.mark.asyncio
async def test_open_a_recording_from_the_keyboard(tmp_path):
    app = make_app(real_config(), recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await pilot.pause()
        await pilot.press(*str(FIXED_SPEC))
        await pilot.press("enter")
        await pilot.pause()
        app.refresh_now()
        assert app.controller.state == "replay"
        assert screen_text(app) == recorded_text(FIXED_SPEC)[1]
        header = await header_text(pilot)
        # the path is shortened from the left to fit: its file name stays
        assert "replay" in header and "file " in header and f"{FIXED_SPEC.parent.name}/{FIXED_SPEC.name}" in header
        # the same numbers as the recording's own summary
        assert app.controller.live.summary().acceptance_rate == summarize(read_recording(FIXED_SPEC).events).acceptance_rate


@pytest.mark.asyncio
async def test_replay_shows_the_same_state_as_the_live_run(tmp_path):
    """A run's final screen and its recording opened afterwards draw the same state."""
    app = make_app(real_config(max_tokens=24), recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r")
        await finished(pilot, app)
        live_text, live_summary = screen_text(app), app.controller.live.summary()
        stats_live = await stats_text(pilot)
        assert app.open_recording(app.controller.recording_path)
        assert screen_text(app) == live_text
        assert await stats_text(pilot) == stats_live
        assert app.controller.live.summary().n_tokens == live_summary.n_tokens


@pytest.mark.asyncio
async def test_measured_speedup_against_an_ar_baseline():
    app = make_app(real_config())
    async with app.run_test(size=SIZE) as pilot:
        assert app.open_recording(FIXED_SPEC)
        assert "needs an AR run" in await stats_text(pilot)
        assert app.open_recording(FIXED_AR)
        assert app.open_recording(FIXED_SPEC)
        stats = await stats_text(pilot)
        assert "vs AR" in stats


@pytest.mark.asyncio
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
        assert app.controller.config.prompt == chosen.text
        assert (app.controller.config.prompt_tier, app.controller.config.max_tokens) == (chosen.tier, chosen.max_tokens)


@pytest.mark.asyncio
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
        assert isinstance(app.controller.live.header, Header)


@pytest.mark.parametrize(("size", "stats"), [((40, 12), "folded"), ((60, 20), "folded"), ((60, 32), "below")])
@pytest.mark.asyncio
async def test_narrow_terminals_keep_the_stream_wide(size, stats):
    app = make_app(real_config())
    async with app.run_test(size=size) as pilot:
        assert app.open_recording(FIXED_SPEC)
        await pilot.pause()
        screen = app.screen
        stream = screen.query_one("#tokens").region
        assert stream.width == size[0] and stream.height >= 5  # the whole width, text rows left
        panel = screen.query_one("#stats")
        if stats == "folded":
            assert not panel.display
            assert "tok/s · accept" in await visible(pilot, "#tokens")  # on the stream's border
        else:
            assert panel.region.y >= stream.bottom and panel.region.width == size[0]
            assert stream.height >= panel.region.height
            assert "decode" in await visible(pilot, "#stats")
        for widget_id in ("#header", "#signal-itl", "#signal-acceptance", "#signal-headroom"):
            region = screen.query_one(widget_id).region
            assert region.right <= size[0] and region.bottom <= size[1], widget_id
        itl = await visible(pilot, "#signal-itl")
        assert "ms" in itl and any(bar in itl for bar in "▁▂▃▄▅▆▇█")  # value and sparkline

        await pilot.resize_terminal(*SIZE)  # wide again: the panel is back at the side, redrawn
        await pilot.pause()
        assert panel.display and panel.region.x >= screen.query_one("#tokens").region.right
        decode = next(line for line in (await visible(pilot, "#stats")).splitlines() if "decode" in line)
        assert decode.endswith("tok/s │")  # aligned to the panel's new width
        assert "tok/s · accept" not in await visible(pilot, "#tokens")


class FedRun(RunKind):
    """A run kind whose run a test thread feeds (no session: nothing finishes)."""

    def on_finished(self, note, live) -> None:  # noqa: ANN001
        pass


@pytest.mark.asyncio
async def test_events_are_coalesced_into_timed_repaints(monkeypatch):
    """A thread feeding a run's outbox as the engine thread does (an event at a time, a
    wake-up only when none is pending) costs a wake-up and a repaint per tick at most, not one
    per event; a superseded run's outbox is never read."""
    import time

    from spectui.sessions.notes import Outbox, SessionEvents
    from spectui.ui.app import REPAINT_HZ
    from spectui.ui.screens.live import LiveScreen

    redraws = []
    original = LiveScreen.redraw
    monkeypatch.setattr(LiveScreen, "redraw", lambda self, **kw: (redraws.append(1), original(self, **kw))[1])
    events = read_recording(FIXED_SPEC).events
    app = make_app(real_config())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        # run 7 is this app's, fed by the thread below as the engine thread feeds a session's
        # run (routed to the run kind that took its id); run 6 is no run of this app
        app.controller.run_id = 6
        assert FedRun(app.controller).new_run(app.controller.live) == 7
        redraws.clear()
        stale, current = Outbox(), Outbox()
        wakeups: list[int] = []
        t0 = time.monotonic()

        def engine_thread() -> None:
            for ev in events:
                for run_id, outbox in ((6, stale), (7, current)):
                    if outbox.put(ev):
                        wakeups.append(run_id)
                        app.post_note(SessionEvents(run_id, outbox))
                time.sleep(0.002)  # a fast model's pace: ~500 events a second

        thread = threading.Thread(target=engine_thread)
        thread.start()
        while thread.is_alive():
            await pilot.pause(0.01)
        await wait_until(pilot, lambda: app.controller.live.n_events == len(events), "every event to be folded")
        await pilot.pause(2 / REPAINT_HZ)
        elapsed = time.monotonic() - t0
        assert len(stale) == len(events) and wakeups.count(6) == 1  # run 6 is not this app's
        assert screen_text(app) == recorded_text(FIXED_SPEC)[1]
        # bounded by the repaint timer, whatever the number of events
        assert wakeups.count(7) <= elapsed * REPAINT_HZ + 3, (wakeups.count(7), elapsed)
        assert len(redraws) <= elapsed * REPAINT_HZ + 3, (len(redraws), elapsed)
        assert len(redraws) < len(events) / 4, (len(redraws), len(events))


@pytest.mark.asyncio
async def test_switch_backend_to_mlx_and_run(tmp_path):
    """`x` switches the next run to MLX; the engine thread loads it and the run is recorded
    as an MLX session of the same model."""
    # a fixed K: the warm-up evaluates 2 block sizes, not the 17 of a cost-aware K (MLX on this
    # CPU costs ~0.1 s a token, and which K is drafted is not what this test is about)
    app = make_app(real_config(max_tokens=6, draft=DraftConfig(length=Fixed(k=2))), recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("x")
        assert app.controller.config.backend.name == "mlx"
        assert "MLX" in await header_text(pilot)
        await pilot.press("r")
        await finished(pilot, app)
        assert app.controller.state == "done", app.controller.detail
        rec = read_recording(app.controller.recording_path)
        assert rec.header.config.backend.name == "mlx"
        assert rec.header.artifacts.runtime.get("mlx")
        assert screen_text(app) == recorded_text(app.controller.recording_path)[1]


@pytest.mark.asyncio
async def test_plus_and_minus_move_what_k_means_and_the_panel_says_what_the_header_does(tmp_path):
    """A cost-aware K chooses every K itself: +/- move its limit (the header and the stats panel
    both say it), never a K the run would ignore; a fixed K is moved as it is."""
    cost_aware = real_config(draft=DraftConfig(length=CostAware(k_min=1, k_max=8)))
    app = make_app(cost_aware, recordings_dir=str(tmp_path), remember=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("minus")
        assert app.controller.config.draft.length == CostAware(k_min=1, k_max=7)
        assert "K=1..7 adaptive" in await header_text(pilot)
        assert "1..7 adaptive" in await stats_text(pilot)
        await pilot.press("m")  # AR, then speculative again: the settings stay
        await pilot.press("m")
        await pilot.press("plus", "plus")
        assert "K=1..9 adaptive" in await header_text(pilot)
    fixed = real_config(draft=DraftConfig(length=Fixed(k=4)))
    app = make_app(fixed, recordings_dir=str(tmp_path), remember=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("plus")
        assert "K=5" in await header_text(pilot) and app.controller.config.draft.fixed_k == 5
