"""A conversation: turns of one chat, each a session of its own, recorded in one folder.

A turn is an ordinary run whose ``RunConfig`` carries the conversation so far (``history``,
``system``) and the conversation's id; the engine renders the whole conversation through the
model's chat template and keeps the KV cache's prefix shared with the previous turn, so the
turn's prefill evaluates only the new tokens (``Prefill.n_cached`` records how many it kept).
Its recording is a normal recording (``spectui report``/``diff`` read it as any other), named
``turn-02_spec-ngram-k1-16.spectui`` inside the conversation's folder, so the folder replays
turn by turn and a turn's AR baseline (the same messages re-run AR) sits beside it.

``spectui chat`` and the dashboard's composer both keep their conversation here. No UI.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import msgspec

from spectui import storage
from spectui.config import ChatMessage, RunConfig
from spectui.errors import SpectuiError
from spectui.recording.output import output_text
from spectui.recording.reader import read_header, read_recording
from spectui.recording.schema import End, Event, Header
from spectui.recording.writer import SUFFIX, free_path, mode_slug, new_folder_in, new_run_folder

#: How a turn's reply may end and still be part of the conversation: what the user saw of an
#: interrupted or cut-off reply is what the model sees next turn. An error ends no turn.
KEPT_ENDS = frozenset({"stop", "length", "interrupted", "context"})


@dataclass
class Turn:
    config: RunConfig  #: the run (``prompt`` is the user's message)
    reply: str
    path: Path | None = None  #: its recording
    #: a reply given rather than generated (``spectui chat --messages``): history, never run
    given: bool = False


class Conversation:
    """The turns so far; ``next_config`` makes the run of the next one."""

    def __init__(self, *, system: str = "", folder: Path | None = None, id: str = "") -> None:
        self.system = system
        #: where its turns are recorded (None: not recorded)
        self.folder = folder
        self.id = id or (folder.name if folder is not None else "chat-" + dt.datetime.now().strftime("%Y-%m-%dT%H-%M-%S"))
        self.turns: list[Turn] = []

    @classmethod
    def start(
        cls, *, system: str = "", record: bool = True, folder: Path | None = None, parent: Path | None = None
    ) -> Conversation:
        """A new conversation, recorded into ``folder``, else a new ``chat-<time>/`` folder in
        ``parent`` (default: the recordings folder)."""
        if record and folder is None:
            folder = new_folder_in(parent, "chat") if parent is not None else new_run_folder("chat")
        return cls(system=system, folder=folder if record else None)

    @property
    def history(self) -> tuple[ChatMessage, ...]:
        out: list[ChatMessage] = []
        for turn in self.turns:
            out.append(ChatMessage("user", turn.config.prompt))
            out.append(ChatMessage("assistant", turn.reply))
        return tuple(out)

    def next_config(self, base: RunConfig, text: str) -> RunConfig:
        """The run of the next turn: ``base``'s settings, the user's ``text``, the conversation so far."""
        return msgspec.structs.replace(base, prompt=text, system=self.system, history=self.history, conversation=self.id)

    def record_path(self, config: RunConfig) -> Path:
        """Where a turn's run is recorded (a baseline re-run of a turn gets the next free name)."""
        if self.folder is None:
            raise SpectuiError("this conversation is not recorded")
        try:  # a whole conversation: 0700 when spectui makes it (its turns hold every prompt and output)
            storage.prepare_dir(self.folder, private=True)
        except OSError as exc:
            raise storage.disk_error(self.folder, exc) from None
        return free_path(self.folder, f"turn-{config.turn:02d}_{mode_slug(config)}")

    def add(self, config: RunConfig, events: list[Event] | str, path: Path | None = None, *, given: bool = False) -> Turn | None:
        """Keep a finished run as the next turn (its reply: the run's text, or ``events`` when
        that is the reply's text already); None if it ended in an error (it is no turn of the
        conversation then). ``given``: a reply from elsewhere, not run here."""
        if isinstance(events, str):
            reply = events
        else:
            end = next((ev for ev in reversed(events) if type(ev) is End), None)
            if end is None or end.reason not in KEPT_ENDS:
                return None
            reply = output_text(events)
        turn = Turn(config, reply, path, given)
        self.turns.append(turn)
        return turn

    def rerun(self, upto: int | None = None, mode: str | None = None) -> list[RunConfig]:
        """The runs that re-run turns 1..``upto`` (default: all) with the same messages, in
        ``mode`` (default: the last turn's other mode): a conversation's AR baseline.

        Every turn is re-run, not only the last: a turn keeps the cache its conversation's
        earlier turns built, and llama.cpp's logits depend on how a prompt was split into
        batches, so a turn compares exactly only with a turn whose cache was built the same
        way. The re-runs form a conversation of their own (``<id>~<mode>``), so the engine
        keeps their caches turn to turn as it did the original's.
        """
        turns = [t for t in self.turns[: upto or len(self.turns)] if not t.given]  # given: history
        mode = mode or ("spec" if turns[-1].config.mode == "ar" else "ar")
        return [msgspec.structs.replace(t.config, mode=mode, conversation=f"{self.id}~{mode}") for t in turns]

    # -- from a folder ----------------------------------------------------------------------

    @classmethod
    def open(cls, folder: str | Path) -> Conversation:
        """The conversation recorded in ``folder``: its last turn's messages, each recorded turn
        with its recording (a turn's first one: later ones are re-runs such as its AR baseline).
        Turns given rather than generated (``spectui chat --messages`` with replies in the
        file) have no recording."""
        recorded = [(path, read_recording(path)) for path in turn_paths(folder)]
        last_path, last = recorded[-1]
        config = last.header.config
        conv = cls(system=config.system, folder=Path(folder), id=config.conversation)
        history = config.history
        for i in range(0, len(history), 2):  # given until a recording says it was run
            earlier = msgspec.structs.replace(config, prompt=history[i].content, history=history[:i])
            conv.turns.append(Turn(earlier, history[i + 1].content, given=True))
        conv.turns.append(Turn(config, output_text(last.events), last_path))
        for path, rec in recorded[:-1]:
            turn = conv.turns[rec.header.config.turn - 1]
            turn.config, turn.path, turn.given = rec.header.config, path, False
        return conv


def turn_paths(folder: str | Path) -> list[Path]:
    """A conversation folder's turns in order, one recording each. The folder's conversation
    is the one that started first; re-runs of its turns (an AR baseline: another conversation
    id, see ``Conversation.rerun``) and a turn's later re-runs are left out."""
    return [path for path, _ in _turns(folder, main=True)]


def rerun_paths(folder: str | Path) -> list[Path]:
    """The recordings of a folder that are re-runs of its conversation's turns."""
    main = {path for path, _ in _turns(folder, main=True)}
    return [path for path, _ in _turns(folder, main=False) if path not in main]


def _turns(folder: str | Path, *, main: bool) -> list[tuple[Path, Header]]:
    base = Path(folder)
    if not base.is_dir():
        raise SpectuiError(f"{folder}: not a folder")
    headers: list[tuple[Path, Header]] = []
    for path in sorted(base.glob("*" + SUFFIX)):
        header = read_header(path)
        if not header.config.conversation:
            raise SpectuiError(f"{path}: not a turn of a conversation")
        headers.append((path, header))
    if not headers:
        raise SpectuiError(f"{folder}: no conversation recorded there (spectui chat records one)")
    if not main:
        return headers
    first = min(headers, key=lambda ph: ph[1].started_at)[1].config.conversation
    by_turn: dict[int, tuple[Path, Header]] = {}
    for path, header in headers:
        seen = by_turn.get(header.config.turn)
        if header.config.conversation == first and (seen is None or header.started_at < seen[1].started_at):
            by_turn[header.config.turn] = (path, header)
    return [by_turn[t] for t in sorted(by_turn)]

