"""The dashboard's conversation: the turns on screen and the ``Conversation`` behind them.

The composer (``e``) sends a message; it becomes the next turn of the conversation (a new one
if none is going), run as an ordinary session whose recording goes into the conversation's
folder. Each finished turn stays on screen, the user's text plainly above the reply, so the
token stream reads as the chat; ``n`` starts a new conversation. A replayed conversation
folder fills the same turns, one recording after another. No Textual here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from spectui.config import RunConfig
from spectui.metrics.live import LiveRun
from spectui.sessions.conversation import KEPT_ENDS, Conversation


@dataclass
class ShownTurn:
    user: str
    run: LiveRun


@dataclass
class ChatState:
    conversation: Conversation | None = None
    #: the turns on screen, in order; the last may still be running
    turns: list[ShownTurn] = field(default_factory=list)
    #: the turn in flight (its run), until it finishes
    pending: ShownTurn | None = None

    @property
    def active(self) -> bool:
        return self.conversation is not None or bool(self.turns)

    def next_turn(self) -> int:
        return len(self.conversation.turns) + 1 if self.conversation is not None else 1

    def begin(self, base: RunConfig, text: str, *, recordings: Path | None) -> tuple[RunConfig, LiveRun]:
        """The run of the next turn (a new conversation, recorded under ``recordings``, if none
        is going) and the ``LiveRun`` it is shown in."""
        if self.conversation is None:
            self.conversation = Conversation.start(system=base.system, record=recordings is not None, parent=recordings)
            self.turns = []
        config = self.conversation.next_config(base, text)
        self.pending = ShownTurn(text, LiveRun())
        self.turns.append(self.pending)
        return config, self.pending.run

    def finished(self, live: LiveRun, path: Path | None) -> None:
        """A run ended: if it was the turn in flight, it joins the conversation (an error ends
        no turn: it leaves the screen, and the notification says why)."""
        pending = self.pending
        if pending is None or pending.run is not live:
            return
        self.pending = None
        end, header = live.end, live.header
        if end is None or header is None or end.reason not in KEPT_ENDS or self.conversation is None:
            self.turns.remove(pending)
            return
        self.conversation.add(header.config, live.answer, path)

    def abandon(self) -> None:
        """The turn in flight was superseded (another run started): it is no turn."""
        if self.pending is not None:
            self.turns.remove(self.pending)
            self.pending = None

    def new(self) -> None:
        self.conversation, self.turns, self.pending = None, [], None

    def shown_before(self, live: LiveRun) -> list[ShownTurn] | None:
        """The turns above ``live`` in the stream, with ``live``'s own last; None when
        ``live`` is no turn of the conversation (a plain run shows alone)."""
        for i, turn in enumerate(self.turns):
            if turn.run is live:
                return self.turns[: i + 1]
        return None

    def turn_of(self, live: LiveRun) -> int:
        """``live``'s turn number in the conversation (0: not a finished turn of it)."""
        conv = self.conversation
        if conv is None:
            return 0
        done = [t for t in self.turns if t is not self.pending]
        for i, turn in enumerate(done):
            if turn.run is live and i < len(conv.turns):
                return i + 1
        return 0
