"""The token stream follows the end of a run until the reader scrolls back.

The end has to hold through layout: opening a recording shows its tokens, a scrollbar appears,
the stream narrows by a column and re-wraps. A scroll aimed at the end before that layout
landed at a stale end, so whether the screen showed the run's top or its end depended on when
the repaint timer fired (CI caught it as a flaky 80x24 snapshot).
"""

from __future__ import annotations

import asyncio

import pytest

from spectui.config import RunConfig
from spectui.ui.launch import make_app
from spectui.ui.widgets.token_stream import TokenStream

from .conftest import FIXED_AR, FIXED_SPEC, wait_until

#: the fixed session needs a few more lines than the stream has at this size
SIZE = (80, 24)
#: ... and many more at this one (the stream is 6 lines high)
SHORT = (80, 16)


def replay_app():  # noqa: ANN201
    def no_engine(_config):  # noqa: ANN001, ANN202 - a replay must never load a model
        raise AssertionError("replay loaded an engine")

    return make_app(RunConfig(prompt="(replay)"), record=False, engine_factory=no_engine)


def at_end(stream: TokenStream) -> bool:
    return stream.max_scroll_y > 0 and stream.scroll_y == stream.max_scroll_y


@pytest.mark.asyncio
@pytest.mark.parametrize("settled", [False, True], ids=["mounting", "settled"])
@pytest.mark.parametrize("between_s", [0.0, 0.3])
async def test_an_opened_recording_shows_its_end_whenever_the_layout_comes(settled, between_s):
    app = replay_app()
    async with app.run_test(size=SIZE) as pilot:
        # pause() waits for the app to settle; pause(0) and asyncio.sleep only yield, so the
        # recordings open while a layout is still in flight (what a loaded machine does)
        await (pilot.pause() if settled else pilot.pause(0))
        assert app.open_recording(FIXED_AR)
        await asyncio.sleep(between_s)
        assert app.open_recording(FIXED_SPEC)
        await pilot.pause(0.05)
        app.refresh_now()
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        stream = app.screen.query_one(TokenStream)
        assert at_end(stream), (stream.scroll_y, stream.max_scroll_y)


@pytest.mark.asyncio
async def test_the_reader_who_scrolled_back_stays_there_until_they_return_to_the_end():
    app = replay_app()
    async with app.run_test(size=SHORT) as pilot:
        await pilot.pause()
        assert app.open_recording(FIXED_SPEC, play=True)  # at its own pace (2.4 s in all)
        stream = app.screen.query_one(TokenStream)
        # the run grows past the screen and the stream follows it
        await wait_until(pilot, lambda: stream.max_scroll_y >= 2, "the run past the screen", timeout=30)
        await pilot.press("space")  # paused: from here it grows a block at a time
        await pilot.pause()
        assert app.controller.player.paused
        app.refresh_now()
        await pilot.pause()
        assert at_end(stream)

        async def step() -> None:
            n = app.controller.live.n_tokens
            await pilot.press("n")  # one block of the replay
            await wait_until(pilot, lambda: app.controller.live.n_tokens > n, "a block")
            app.refresh_now()
            await pilot.pause()


        stream.scroll_home(animate=False)  # the reader goes back to the top
        await pilot.pause()
        grown = stream.max_scroll_y
        while stream.max_scroll_y == grown:
            assert not app.controller.player.finished, "the run ended before it grew again"
            await step()
        assert stream.scroll_y == 0  # new lines came in below; the reader was left where they were

        stream.scroll_end(animate=False)  # back at the end: it follows again
        await pilot.pause()
        grown = stream.max_scroll_y
        while stream.max_scroll_y == grown and not app.controller.player.finished:
            await step()
        assert at_end(stream)
