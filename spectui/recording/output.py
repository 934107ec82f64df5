"""What a session generated: its tokens, their pieces and its text, from the event stream.

One definition for every reader (the CLI as it streams, ``spectui diff``, the gate, the
quality grader, the server comparison): the text is the emitted pieces decoded as UTF-8,
without the end-of-generation token's piece (an embedded run that ends with reason ``stop``
emitted it as its last token; ``<|im_end|>`` is not part of the answer; a server never streams
it). Tokens keep it: two runs that both stopped agree on that token too.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable

from spectui.quality import QualityResult, check_output
from spectui.recording.reader import Recording
from spectui.recording.schema import End, Event, Header, Step


def decode_pieces(pieces: Iterable[bytes]) -> str:
    """Pieces joined and decoded. A piece may hold half a UTF-8 character, so decode runs of
    pieces, never one at a time: only a character cut by the run's own ends shows as U+FFFD."""
    return b"".join(pieces).decode("utf-8", errors="replace")


def output_tokens(events: Iterable[Event]) -> tuple[list[int], list[bytes]]:
    """Every emitted token and its piece, in order (the end-of-generation token included)."""
    tokens: list[int] = []
    pieces: list[bytes] = []
    for ev in events:
        if type(ev) is Step:
            tokens.extend(ev.tokens)
            pieces.extend(ev.pieces)
    return tokens, pieces


def output_top_two(events: Iterable[Event]) -> list[tuple[int, int] | None]:
    """Each emitted token's (margin in thousandths of a logit, runner-up id), aligned with
    ``output_tokens``; None where a step recorded none (sampled, or before schema 1.4)."""
    out: list[tuple[int, int] | None] = []
    for ev in events:
        if type(ev) is Step:
            margins, runners = ev.margins_milli, ev.runner_up
            if margins is None or runners is None or len(margins) != len(ev.tokens):
                out.extend([None] * len(ev.tokens))
            else:
                out.extend(zip(margins, runners))
    return out


class OutputText:
    """The generated text, incrementally, as the steps arrive.

    The last piece seen is held back until the next step or the end shows it was not the
    end-of-generation token, so a streamed text and one read from a recording are the same
    string. Multi-byte characters split across pieces are joined before they are shown.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._held: bytes | None = None
        self._emits_eog = True  # the embedded engine emits the end-of-generation token

    def feed(self, event: Event) -> str:
        """The text ``event`` makes certain ("" for most events)."""
        if type(event) is Header:
            self._emits_eog = event.artifacts.server is None
        elif type(event) is Step and event.pieces:
            out = b"" if self._held is None else self._held
            self._held = event.pieces[-1]
            return self._decoder.decode(out + b"".join(event.pieces[:-1]))
        elif type(event) is End:
            return self.finish(stopped=event.reason == "stop" and self._emits_eog)
        return ""

    def finish(self, *, stopped: bool) -> str:
        """The rest of the text: the held piece unless the run stopped at end-of-generation."""
        held, self._held = self._held, None
        tail = b"" if held is None or stopped else held
        return self._decoder.decode(tail, final=True)


def output_text(events: Iterable[Event]) -> str:
    """The generated text of a session (a recording's ``events``), as ``OutputText`` streams it."""
    text = OutputText()
    parts = [text.feed(ev) for ev in events]
    parts.append(text.finish(stopped=False))  # no end record: the held piece is output
    return "".join(parts)


def grade_recording(rec: Recording) -> QualityResult | None:
    """Grade a recording by the quality check in its header (``RunConfig.prompt_check``, so
    no prompt file is needed); None when its prompt carries none. A redacted copy's text is
    placeholders: its verdict is the one graded on the original before redaction."""
    redaction = rec.header.redaction
    if redaction is not None:
        passed = redaction.quality_passed
        return None if passed is None else QualityResult(passed, "graded on the original output, before redaction")
    check = rec.header.config.prompt_check
    return check_output(check, output_text(rec.events)) if check else None
