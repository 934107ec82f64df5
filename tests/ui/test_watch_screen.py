"""The watch dashboard (``spectui watch URL`` in a terminal) against a real HTTP server on
127.0.0.1 serving the metric texts of tests/data/metrics (``tests/watch/standin.py``): no model,
so this is the fast tier.

What a person sees: the server and its figures, acceptance per draft position as bars, the
note that llama-server counts a request when it finishes, the server process's numbers (the
stand-in runs in this process, which listens on the port), one line saying how to turn
drafting on where a server does not draft; ``q`` quits at once even while a reading is slow
(the sampler's thread posts messages, the UI never waits on the server); the recording the
watch wrote replays on the same screen with the same figures.
"""

from __future__ import annotations

import math
import re
import threading
import time

import pytest

from spectui.format import pct
from spectui.recording.reader import read_recording
from spectui.server.client import ServerClient, parse_server_url
from spectui.ui.launch import make_watch_app
from spectui.ui.screens.watch import WatchScreen
from spectui.watch.board import WatchBoard
from spectui.watch.feed import LiveFeed, ReplayFeed
from spectui.watch.process import open_probe
from spectui.watch.record import WatchRecorder, read_watch, watch_header, watch_info
from spectui.watch.source import open_watch
from tests.watch.standin import StandIn, assert_only_reads, serve

from .conftest import visible, wait_until

SIZE = (110, 34)


@pytest.fixture
def llama_standin():
    yield from serve("llama-server", "llama-server")


def live_feed(url: str, tmp_path, *, samples: int | None = 4, interval: float = 0.1):  # noqa: ANN001, ANN201
    parsed = parse_server_url(url)
    client = ServerClient(parsed)
    probe = open_probe(parsed.host, parsed.port)
    target = open_watch(client)
    assert probe is not None
    info = watch_info(target, interval, process=probe.label if probe.found else "", process_note=probe.note)
    recorder = WatchRecorder(tmp_path / "watch.spectui", watch_header(info))
    feed = LiveFeed(client, target, interval_s=interval, max_samples=samples, probe=probe, recorder=recorder)
    return WatchBoard(info), feed, recorder


@pytest.mark.asyncio
async def test_the_dashboard_follows_a_llama_server_and_its_recording_replays(llama_standin, tmp_path):
    board, feed, recorder = live_feed(llama_standin.url, tmp_path)
    app = make_watch_app(board, feed)
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, WatchScreen)
        await wait_until(pilot, lambda: board.samples == 4 and board.ended != "", "four readings and the end", 30)
        await pilot.pause(0.4)  # the screen's redraw tick
        text = await visible(pilot)
        assert f"watching llama-server at {llama_standin.url}" in text and "build b9999-standin" in text
        assert "acceptance per draft position" in text
        totals = board.totals
        for pos, share in enumerate(totals.per_position, 1):
            assert re.search(rf"pos  {pos} █+[▏▎▍▌▋▊▉]? +{re.escape(pct(share))}", text), text
        assert "counts a request's tokens and drafts when it finishes" in text
        assert re.search(r"server process: \S+ pid \d+", text) and "server proc" in text and " thr" in text
        assert "the server restarted 1 time(s)" in text
        assert "the watch ended after 4 readings" in text
        # sparklines: acceptance has a bar per interval that counted drafts (three here)
        assert len(board.series.acceptance) == 3 and len(board.series.rss) == 4
        await pilot.press("q")
    feed.finish()
    assert app.return_code == 0
    assert_only_reads(llama_standin)

    # the recording: the same figures, shown again on the same screen
    watch = read_watch(read_recording(recorder.path))
    assert watch.end is not None and len(watch.samples) == 4
    assert watch.totals.generated_tokens == totals.generated_tokens and watch.totals.per_position == totals.per_position
    replay_board = WatchBoard(watch.info, replay=True)
    replay = make_watch_app(replay_board, ReplayFeed(watch.samples, speed=math.inf))
    async with replay.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: replay_board.ended != "", "the replay to end", 30)
        await pilot.pause(0.4)
        text = await visible(pilot)
        assert f"replay of a watch of llama-server at {llama_standin.url}" in text
        assert "end of the recording: 4 readings" in text
        for pos, share in enumerate(totals.per_position, 1):
            assert re.search(rf"pos  {pos} █+[▏▎▍▌▋▊▉]? +{re.escape(pct(share))}", text), text
        # the same rows (the whole watch's tok/s but for its seconds, kept to the microsecond)
        assert [r for r in replay_board.stat_rows() if r[0] != "whole watch"] == [r for r in board.stat_rows() if r[0] != "whole watch"]
        await pilot.press("q")


@pytest.mark.asyncio
async def test_q_quits_at_once_while_the_server_is_slow(llama_standin, tmp_path):
    board, feed, recorder = live_feed(llama_standin.url, tmp_path, samples=None, interval=0.1)
    app = make_watch_app(board, feed)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: board.samples >= 2, "two readings", 30)
        llama_standin.delay_s = 3.0  # every /metrics answer now takes 3 s
        await pilot.pause(0.3)  # a reading is now waiting on the server, on the sampler's thread
        t0 = time.monotonic()
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, "the app to exit", 10)
        assert time.monotonic() - t0 < 1.5  # never waited for the slow answer
    feed.finish()  # now the reading in flight is waited for, and the recording ends
    rec = read_recording(recorder.path)
    assert rec.complete and rec.events[-1].reason == "interrupted"  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_a_server_that_does_not_draft_is_told_how_to_turn_it_on(tmp_path):
    text = (
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 1.0\n"
        "# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} 10.0\n"
    )
    srv = StandIn("vllm", [text])
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        board, feed, _ = live_feed(srv.url, tmp_path, samples=2)
        app = make_watch_app(board, feed)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: board.ended != "", "the watch to end", 30)
            await pilot.pause(0.4)
            shown = await visible(pilot)
            assert shown.count("no speculative counters") == 1 and "--speculative-config" in shown
            assert "no drafting on this server" in shown
            await pilot.press("q")
        feed.finish()
    finally:
        srv.shutdown()
        srv.server_close()
