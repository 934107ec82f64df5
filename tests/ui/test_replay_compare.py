"""Replay (pause, speed, step, seek, truncated files, a recording from another machine) and
the side-by-side compare screen (two recordings; AR then speculative live on the real model)."""

from __future__ import annotations

import os
import subprocess
import sys

import msgspec
import pytest

from spectui.config import RunConfig
from spectui.recording.reader import read_recording
from spectui.recording.schema import Step
from spectui.recording.writer import RecordingWriter
from spectui.ui.launch import make_app
from spectui.ui.screens.compare import CompareScreen
from spectui.ui.widgets.token_stream import TokenStream

from .conftest import FIXED_AR, FIXED_SPEC, REPO, real_config, visible, wait_until

SIZE = (100, 30)


def steps_of(path) -> list[Step]:  # noqa: ANN001
    return [e for e in read_recording(path).events if type(e) is Step]


def text_of(steps: list[Step]) -> str:
    return b"".join(p for s in steps for p in s.pieces).decode("utf-8", "replace")


def replay_app():  # noqa: ANN201
    def no_engine(_config):  # noqa: ANN001, ANN202 - a replay must never load a model
        raise AssertionError("replay loaded an engine")

    return make_app(RunConfig(prompt="(replay)"), record=False, engine_factory=no_engine)


async def replay_to_the_end(pilot, app, path) -> None:  # noqa: ANN001
    """Open ``path`` in the replay app at full speed and wait until it has played whole."""
    await pilot.pause()
    assert app.open_recording(path, play=True, speed=float("inf"))
    await wait_until(pilot, lambda: app.controller.player.finished, "the replay")
    app.refresh_now()


@pytest.mark.asyncio
async def test_replay_pause_step_speed_and_seek():
    steps = steps_of(FIXED_SPEC)
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.open_recording(FIXED_SPEC, play=True, speed=1.0, paused=True)
        await pilot.pause(0.3)
        assert app.controller.live.n_tokens == 0  # paused at the start: the header only
        assert "paused" in await visible(pilot, "#header")

        await pilot.press("n")  # one block
        await wait_until(pilot, lambda: app.controller.live.n_tokens == len(steps[0].tokens), "the first block")
        await pilot.press("n")
        await wait_until(pilot, lambda: app.controller.live.n_tokens == len(steps[0].tokens) + len(steps[1].tokens), "block 2")
        await pilot.pause(0.3)
        assert app.controller.live.n_tokens == len(steps[0].tokens) + len(steps[1].tokens)  # stepping leaves it paused

        await pilot.press("greater_than_sign")
        assert app.controller.player.speed == 2.0
        assert "paused (2x)" in await visible(pilot, "#header")
        await pilot.press("space")  # play at 2x
        assert not app.controller.player.paused or app.controller.player.finished
        await wait_until(pilot, lambda: app.controller.player.finished, "the replay to reach its end")
        await pilot.pause(0.2)
        app.refresh_now()
        assert app.screen.query_one(TokenStream).plain_text == text_of(steps)
        assert "end (length)" in await visible(pilot, "#header")

        await pilot.press("left")  # 5 s back: the fixed session is shorter, so the start
        await pilot.pause(0.2)
        assert app.controller.live.n_tokens == 0 and app.controller.player.paused
        await pilot.press("right")  # and forward again to the end
        await wait_until(pilot, lambda: app.controller.live.n_tokens == sum(len(s.tokens) for s in steps), "seek to the end")
        await pilot.press("home")
        await pilot.pause(0.2)
        assert app.controller.live.n_tokens == 0


@pytest.mark.asyncio
async def test_replay_keeps_the_original_pace():
    """At 1x a replay takes about the recording's own duration; at max it is at once."""
    timeline_s = steps_of(FIXED_SPEC)[-1].t_us[-1] / 1e6
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.open_recording(FIXED_SPEC, play=True, speed=1.0)
        await pilot.pause(timeline_s * 0.4)
        assert 0 < app.controller.live.n_tokens < sum(len(s.tokens) for s in steps_of(FIXED_SPEC))
        await wait_until(pilot, lambda: app.controller.player.finished, "the 1x replay to finish")
        app.open_recording(FIXED_SPEC, play=True, speed=float("inf"))
        await wait_until(pilot, lambda: app.controller.player.finished, "the max-speed replay", timeout=5)


@pytest.mark.asyncio
async def test_replay_of_a_truncated_recording_says_so(tmp_path):
    cut = tmp_path / "cut.spectui"
    data = FIXED_SPEC.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    rec = read_recording(cut)
    assert rec.truncated
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.open_recording(cut, play=True, speed=float("inf"))
        await wait_until(pilot, lambda: app.controller.player.finished, "the replay")
        header = await visible(pilot, "#header")
        assert "truncated" in header and "no end record" in header
        assert app.controller.live.n_tokens == sum(len(e.tokens) for e in rec.events if type(e) is Step) > 0


@pytest.mark.asyncio
async def test_replay_of_a_recording_from_another_machine(tmp_path):
    """A Mac's recording: other host, models at paths that do not exist here."""
    rec = read_recording(FIXED_SPEC)
    h = rec.header
    arts = h.artifacts
    mac = msgspec.structs.replace(
        h,
        artifacts=msgspec.structs.replace(
            arts,
            host=msgspec.structs.replace(arts.host, os="Darwin 24.1", machine="arm64", cpu="Apple M3 Pro"),
            target=msgspec.structs.replace(arts.target, path="/Users/someone/models/SmolLM2.gguf"),
            runtime={**arts.runtime, "mlx": "0.30.0", "metal": "available"},
        ),
        config=msgspec.structs.replace(h.config, target="/Users/someone/models/SmolLM2.gguf"),
    )
    path = tmp_path / "from-a-mac.spectui"
    with RecordingWriter(path) as w:
        w.write(mac)
        for ev in rec.events[1:]:
            w.write(ev)
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await replay_to_the_end(pilot, app, path)
        assert app.screen.query_one(TokenStream).plain_text == text_of(steps_of(FIXED_SPEC))


def test_replay_cli_refuses_bad_input_in_one_line(tmp_path):
    not_rec = tmp_path / "notes.txt"
    not_rec.write_text("hello")
    for args in (["replay", str(tmp_path / "missing.spectui")], ["replay", str(not_rec)],
                 ["replay", str(FIXED_SPEC), "--speed", "fast"], ["compare", str(FIXED_SPEC)],
                 ["replay", str(FIXED_SPEC)]):  # the last: no terminal under pytest
        out = subprocess.run([sys.executable, "-m", "spectui", *args], capture_output=True, text=True, cwd=REPO,
                             stdin=subprocess.DEVNULL, timeout=60)
        assert out.returncode == 2, (args, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr, out.stderr
        assert out.stderr.startswith("spectui: error:")


@pytest.mark.asyncio
async def test_compare_two_recordings():
    app = make_app(RunConfig(prompt="unused"), record=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.open_compare(os.path.relpath(FIXED_AR, REPO), os.path.relpath(FIXED_SPEC, REPO))
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        app.refresh_now()
        await pilot.pause()
        screen = await visible(pilot)
        assert "baseline: AR" in screen and "candidate: spec n-gram K=4" in screen
        assert "speedup" in screen and "outputs" in screen
        base = app.screen.query_one("#tokens-baseline", TokenStream).plain_text
        cand = app.screen.query_one("#tokens-candidate", TokenStream).plain_text
        assert base == text_of(steps_of(FIXED_AR)) and cand == text_of(steps_of(FIXED_SPEC))
        await pilot.press("d")  # the diff of the pair, as `spectui diff` prints it
        await pilot.pause()
        diff = await visible(pilot)
        assert "artifacts" in diff and "outputs" in diff and "decode tok/s" in diff
        await pilot.press("escape")
        assert isinstance(app.screen, CompareScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, CompareScreen)


@pytest.mark.asyncio
@pytest.mark.parametrize("width", [80, 86, 100, 120, 170])
async def test_compare_verdict_is_never_cut_by_a_wrap(width):
    """The delta bar breaks its rows between items: the outputs verdict stays whole on one row
    whatever the figures before it weigh (it wrapped after ``outputs`` at 86 and 170 columns)."""
    app = make_app(RunConfig(prompt="unused"), record=False)
    async with app.run_test(size=(width, 30)) as pilot:
        await pilot.pause()
        assert app.open_compare(os.path.relpath(FIXED_AR, REPO), os.path.relpath(FIXED_SPEC, REPO))
        await pilot.pause()
        app.refresh_now()
        rows = (await visible(pilot, "#delta")).splitlines()
        n = min(sum(len(s.tokens) for s in steps_of(path)) for path in (FIXED_AR, FIXED_SPEC))
        assert any(f"outputs identical ({n} tokens)" in row for row in rows), rows
        assert all(row.rstrip() == row.rstrip().rstrip("│").rstrip() for row in rows), rows  # no row ends in a separator


@pytest.mark.asyncio
async def test_compare_live_runs_ar_then_speculative(tmp_path):
    app = make_app(real_config(max_tokens=24), recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("v")
        assert isinstance(app.screen, CompareScreen)
        base, cand = app.controller.side_by_side.pair
        await wait_until(pilot, lambda: base.end is not None and cand.end is not None, "both runs")
        await wait_until(pilot, lambda: not app.controller.runner.busy, "the engine thread")
        assert base.header.config.mode == "ar" and cand.header.config.mode == "spec"
        # never at once: the speculative run starts after the AR run ended
        assert cand.header.started_at >= base.header.started_at
        n = min(len(base.tokens), len(cand.tokens))
        assert n > 0 and base.tokens[:n] == cand.tokens[:n]  # greedy: the same text
        app.refresh_now()
        assert "outputs identical" in await visible(pilot, "#delta")
        assert len(list(tmp_path.glob("*.spectui"))) == 2
        await pilot.press("d")
        await pilot.pause()
        assert "identical" in await visible(pilot)


def test_compare_screen_snapshot(snap_compare, monkeypatch):
    app = make_app(RunConfig(prompt="unused"), record=False)

    async def open_pair(pilot) -> None:  # noqa: ANN001
        await pilot.pause()
        assert app.open_compare(os.path.relpath(FIXED_AR, REPO), os.path.relpath(FIXED_SPEC, REPO))
        await pilot.pause()
        app.refresh_now()
        await pilot.pause(0.2)

    monkeypatch.chdir(REPO)  # the file paths in the title are relative to the repository
    assert snap_compare(app, terminal_size=(120, 36), run_before=open_pair)


@pytest.mark.asyncio
async def test_compare_live_interleaved(tmp_path):
    """`i` then `r` on the compare screen: AR and speculative alternate block by block on two
    contexts; each recording says its clock leaves out the other's time, and greedy outputs
    still match."""
    import time

    from spectui.recording.schema import INTERLEAVED_CLOCK

    app = make_app(real_config(max_tokens=24), recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        app.controller.side_by_side.pair = (app.controller.live, app.controller.live)  # something on screen: `v` then opens without running
        await pilot.press("v")
        await pilot.press("i")
        assert app.controller.side_by_side.interleave
        t0 = time.monotonic()
        await pilot.press("r")
        base, cand = app.controller.side_by_side.pair
        await wait_until(pilot, lambda: base.end is not None and cand.end is not None, "both runs")
        await wait_until(pilot, lambda: not app.controller.runner.busy, "the engine thread")
        wall_s = time.monotonic() - t0
        assert app.controller.state == "done", app.controller.detail
        assert app.controller.runner.loads == 2  # a second engine: the two sessions never share a KV cache
        n = min(len(base.tokens), len(cand.tokens))
        assert n > 0 and base.tokens[:n] == cand.tokens[:n]
        recs = [read_recording(p) for p in sorted(tmp_path.glob("*.spectui"))]
        assert len(recs) == 2 and all(r.header.clock == INTERLEAVED_CLOCK for r in recs)
        for r in recs:
            times = [t for e in r.events if type(e) is Step for t in e.t_us]
            assert times == sorted(times) and times[0] > 0
            # each clock is its own work: less than the wall time the pair took together
            assert times[-1] / 1e6 < wall_s
        app.refresh_now()
        assert "interleaved" in await visible(pilot, "#compare-title")


@pytest.mark.asyncio
async def test_a_recorded_escape_is_drawn_as_letters_never_sent_to_the_terminal(tmp_path):
    """A model's bytes are whatever it learned: an ESC sequence in a token (here planted in a
    real recording's first block) is drawn as ``\\x1b[2J``, and the token's text is kept."""
    rec = read_recording(FIXED_SPEC)
    path = tmp_path / "escape.spectui"
    planted = False
    with RecordingWriter(path) as w:
        for ev in rec.events:
            if type(ev) is Step and not planted:
                ev = msgspec.structs.replace(ev, pieces=[b"\x1b[2J\x07" + ev.pieces[0], *ev.pieces[1:]])
                planted = True
            w.write(ev)
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        await replay_to_the_end(pilot, app, path)
        shown = await visible(pilot, "#tokens")
        assert "\\x1b[2J\\x07" in shown and "\x1b" not in shown and "\x07" not in shown, shown
        assert app.screen.query_one(TokenStream).plain_text.startswith("\x1b[2J\x07")
