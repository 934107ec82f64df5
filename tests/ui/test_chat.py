"""A conversation typed in the dashboard (Textual Pilot) on the real embedded model.

``e`` opens the composer, the text arrives as a paste (what a terminal's bracketed paste
delivers), ``ctrl+s`` sends. The follow-up asks to repeat part of the first reply: its turn
keeps the first turn in the KV cache (the recording says how many tokens it evaluated), its
drafts copy the earlier reply, and both turns equal the conversation re-run AR (``v``).
"""

from __future__ import annotations

import pytest
from textual.events import Paste
from textual.widgets import TextArea

from spectui.drafting import DraftConfig, Fixed
from spectui.metrics.stats import summarize
from spectui.recording.reader import read_recording
from spectui.recording.schema import Prefill, Step
from spectui.sessions.conversation import rerun_paths, turn_paths
from spectui.ui.launch import make_app
from spectui.ui.screens.composer import Composer
from spectui.ui.widgets.token_stream import TokenStream

from .conftest import real_config, visible, wait_until

SIZE = (110, 34)
FIRST = "Write a Python function that returns the squares of a list of numbers."
REPEAT = "Repeat the function you just wrote exactly, word for word."


async def compose(pilot, text: str) -> None:  # noqa: ANN001
    await pilot.press("e")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, Composer), "the composer")
    area = pilot.app.screen.query_one(TextArea)
    area.select_all()
    pilot.app.post_message(Paste(text))  # as the terminal driver delivers a bracketed paste
    await wait_until(pilot, lambda: area.text == text, "the pasted text")
    await pilot.press("ctrl+s")
    await wait_until(pilot, lambda: not isinstance(pilot.app.screen, Composer), "the composer to close")


async def idle(pilot, app) -> None:  # noqa: ANN001
    await wait_until(pilot, lambda: app.controller.state in ("done", "interrupted", "error") and not app.controller.runner.busy, "the turn to end")
    assert app.controller.state == "done", app.controller.detail


def tokens(path) -> list[int]:  # noqa: ANN001
    return [t for ev in read_recording(path).events if type(ev) is Step for t in ev.tokens]


def prefill(path) -> Prefill:  # noqa: ANN001
    return next(ev for ev in read_recording(path).events if type(ev) is Prefill)


@pytest.mark.asyncio
async def test_a_two_turn_chat_reuses_the_cache_copies_and_equals_ar(tmp_path):
    # a fixed K: what is tested is the conversation feeding the drafter. On one thread with the
    # shipped Q4_1 a block of n costs about 0.65 n tokens here, and the cost-aware K rightly
    # drafts little within 56 tokens while it learns that a repeat is a copy
    config = real_config(max_tokens=56, draft=DraftConfig(length=Fixed(k=4)))
    app = make_app(config, recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await compose(pilot, FIRST)
        await idle(pilot, app)
        await compose(pilot, REPEAT)
        await idle(pilot, app)
        conv = app.controller.chat.conversation
        assert conv is not None and len(conv.turns) == 2
        # the stream reads as the chat: both messages, each above its reply
        stream = app.screen.query_one(TokenStream)
        shown = await visible(pilot, "#tokens")
        assert "› Write a Python function" in shown and "› Repeat the function" in shown
        assert stream.plain_text == conv.turns[0].reply + app.controller.live.answer

        (chat,) = [p for p in tmp_path.iterdir() if p.is_dir()]
        first, second = turn_paths(chat)
        p1, p2 = prefill(first), prefill(second)
        assert p1.n_cached == 0 and p2.n_cached > p1.n_tokens  # turn 1's prompt and reply kept
        assert p2.n_evaluated < 40, p2  # only the template's markers and the new message
        s1, s2 = (summarize(read_recording(p).events) for p in (first, second))
        # the share of the reply that came from accepted drafts: a rate over a handful of drafts
        # (a cost-aware K drafts little where nothing is copyable) would say little
        assert s2.accepted / s2.n_tokens > s1.accepted / s1.n_tokens, (s1.accepted, s2.accepted)

        # v on the last turn: the conversation re-run AR up to it, compared side by side
        await pilot.press("v")
        # the engine thread is free a tick before the screen has folded the re-run's last events
        await wait_until(pilot, lambda: len(rerun_paths(chat)) == 2 and not app.controller.runner.busy
                         and all(run.end is not None for run in app.controller.side_by_side.pair or ()), "the AR re-run", timeout=300)
        ar_first, ar_second = sorted(rerun_paths(chat))
        assert read_recording(ar_second).header.config.mode == "ar"
        assert tokens(ar_first) == tokens(first) and tokens(ar_second) == tokens(second)
        assert prefill(ar_second).n_cached == p2.n_cached
        base, cand = app.controller.side_by_side.pair
        assert cand.tokens == tokens(second) and base.tokens == tokens(ar_second)

        await pilot.press("v")  # back to the chat
        await pilot.press("n")  # a new conversation: the next message starts one
        assert app.controller.chat.conversation is None


@pytest.mark.asyncio
async def test_a_conversation_folder_replays_turn_by_turn(tmp_path):
    config = real_config(max_tokens=24, mode="ar")
    app = make_app(config, recordings_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await compose(pilot, "Name a colour.")
        await idle(pilot, app)
        await compose(pilot, "Name another one.")
        await idle(pilot, app)
        (chat,) = [p for p in tmp_path.iterdir() if p.is_dir()]
        replies = [t.reply for t in app.controller.chat.conversation.turns]

    viewer = make_app(config, record=False)
    async with viewer.run_test(size=SIZE) as pilot:
        assert viewer.open_recording(chat, play=True, speed=float("inf"))
        await wait_until(pilot, lambda: len(viewer.controller.chat.turns) == 2 and viewer.controller.player.finished, "both turns replayed")
        stream = viewer.screen.query_one(TokenStream)
        viewer.refresh_now()
        await pilot.pause()
        assert stream.plain_text.startswith(replies[0])
        shown = await visible(pilot, "#tokens")
        assert "› Name a colour." in shown and "› Name another one." in shown


@pytest.mark.asyncio
async def test_a_message_past_the_context_is_refused_in_one_line(tmp_path):
    from spectui.config import BackendConfig

    config = real_config(max_tokens=16)
    config = config.__class__(**{**{f: getattr(config, f) for f in config.__struct_fields__}, "backend": BackendConfig(n_threads=1, n_ctx=512)})
    app = make_app(config, recordings_dir=str(tmp_path))
    notes: list[str] = []
    app.notify = lambda message, **kw: notes.append(message)  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await compose(pilot, "word " * 700)
        await wait_until(pilot, lambda: app.controller.state == "error" and not app.controller.runner.busy, "the refusal")
        assert any("tokens but the context holds 512" in n for n in notes), notes
        assert "\n" not in app.controller.detail
        assert app.controller.chat.turns == []  # a refused message is no turn
    assert not any(tmp_path.rglob("*.spectui"))
