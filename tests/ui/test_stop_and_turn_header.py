"""What a new user sees at the end of an answer and after a chat turn, on the real embedded model
(Textual Pilot): a run that stops on its end-of-turn token shows a stop, not ``<|im_end|>`` as
text, while its recording keeps the token; the header names the prompt of the turn on screen."""

from __future__ import annotations

import msgspec
import pytest

from spectui.recording.output import output_text
from spectui.recording.reader import read_recording
from spectui.recording.schema import Step
from spectui.ui.launch import make_app
from spectui.ui.widgets.token_stream import STOP, TokenStream

from .conftest import real_config, visible
from .test_chat import compose, idle

SIZE = (200, 34)  # wide enough for the whole first header line, the prompt last on it
#: answered in a few words, then the end-of-turn token (well inside the budget)
SHORT = "Reply with exactly one word: is the sky blue on a clear day?"
MARKER = "<|im_end|>"


def last_piece(path) -> bytes:  # noqa: ANN001
    steps = [e for e in read_recording(path).events if type(e) is Step]
    return steps[-1].pieces[-1]


@pytest.mark.asyncio
async def test_a_run_that_stops_shows_a_stop_and_its_recording_keeps_the_token(tmp_path):
    app = make_app(msgspec.structs.replace(real_config(max_tokens=64), prompt=SHORT), recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r")
        await idle(pilot, app)
        live = app.controller.live
        assert live.end is not None and live.end.reason == "stop", live.end
        shown = await visible(pilot, "#tokens")
        assert MARKER not in shown and STOP in shown, shown
        assert app.screen.query_one(TokenStream).plain_text == live.answer
        (path,) = sorted(tmp_path.glob("*.spectui"))
    # the recording keeps the end-of-turn token as the run's last; its text leaves it out
    assert last_piece(path) == MARKER.encode()
    assert output_text(read_recording(path).events) == live.answer


@pytest.mark.asyncio
async def test_the_header_names_the_chat_turns_prompt_and_the_turn_ends_in_a_stop(tmp_path):
    app = make_app(real_config(max_tokens=64), recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        opened_on = " ".join(app.controller.config.prompt.split())[:20]
        assert opened_on in await visible(pilot, "#header")
        await compose(pilot, SHORT)
        await idle(pilot, app)
        header = await visible(pilot, "#header")
        assert "chat turn 1: Reply with exactly" in header and opened_on not in header, header
        shown = await visible(pilot, "#tokens")
        assert "› Reply with exactly one word" in shown and MARKER not in shown, shown
        if app.controller.live.end is not None and app.controller.live.end.reason == "stop":
            assert STOP in shown
