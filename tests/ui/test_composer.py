"""The composer (``e``) sends what was typed (Textual Pilot).

It opens empty, with the last prompt one key away (``up``), and every key typed at once after
``e`` reaches it, in order, however slow the UI thread is: ``typed_at_once`` hands the app a
burst of keys the way the terminal driver does, with no pause for the app between them (Pilot's
``press`` waits for the app to go idle after each key, which hides every ordering race).
"""

from __future__ import annotations

import pytest
from textual import events
from textual.keys import _character_to_key
from textual.widgets import TextArea

from spectui.config import RunConfig
from spectui.sessions.runner import SessionRequest
from spectui.ui.launch import make_app
from spectui.ui.screens.composer import Composer

from .conftest import wait_until

SIZE = (110, 34)
PREVIOUS = "Name three colours of the rainbow."
#: dashboard keys among its letters (r runs, s stops, m switches mode, q quits, p, o, h, t
#: push screens): one that reached the dashboard instead of the composer would show
TYPED = "Fix the typos: the quik brown fox jumps ovr the lazy dog, then stop."


def typed_at_once(app, keys: list[str]) -> None:  # noqa: ANN001
    """Post ``keys`` to the app as the terminal driver does, all at once: a character stands
    for its key, anything longer is a key name (``ctrl+s``)."""
    for key in keys:
        event = events.Key(_character_to_key(key), key) if len(key) == 1 else events.Key(key, None)
        event.set_sender(app)
        app._driver.send_message(event)


@pytest.mark.asyncio
async def test_keys_typed_at_once_after_e_are_sent_exactly():
    """e, the text and ctrl+s in one burst, after an earlier prompt: the session handed to the
    engine is the typed text, nothing glued to it and nothing lost (the engine service is
    replaced by a list: what is sent is the question, not the reply); the next e recalls it."""
    app = make_app(RunConfig(prompt=PREVIOUS), record=False)
    sent: list[SessionRequest] = []
    app.controller.runner.submit = sent.append  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        typed_at_once(app, ["e", *TYPED, "ctrl+s"])
        await wait_until(pilot, lambda: bool(sent), "the message to be sent", timeout=30)
        await pilot.pause()
        assert not isinstance(app.screen, Composer)
        assert [request.config.prompt for request in sent] == [TYPED]
        assert app.controller.chat.turns[0].user == TYPED
        assert app.controller.config.mode == "spec"  # no m reached the dashboard
        await pilot.press("e", "up")
        assert app.screen.query_one(TextArea).text == TYPED  # the last message sent


@pytest.mark.asyncio
async def test_the_composer_opens_empty_and_up_brings_back_the_last_prompt():
    app = make_app(RunConfig(prompt=PREVIOUS), record=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("e")
        assert isinstance(app.screen, Composer)
        area = app.screen.query_one(TextArea)
        assert area.text == "" and app.screen.focused is area
        await pilot.press("up")
        assert area.text == PREVIOUS
        await pilot.press("ctrl+z")  # the recall is an edit like any other
        assert area.text == ""
        await pilot.press(*"red", "up")  # with text there, up moves the cursor
        assert area.text == "red"
        await pilot.press("escape")
        assert not isinstance(app.screen, Composer)
