"""Where the output is copying from, and the edits it has made to the copy so far.

A copy edit (return this text with a day changed, a word renamed, a spelling fixed) is the
text that prompt lookup drafts best, and it loses most where the output departs from the copy:
right after an edit the history's last tokens are new text, so the longest n-gram ending it
is short and found anywhere (in the instruction that named the edit, often), and the copy
itself is found again only once a few of its tokens were emitted one at a time. And an edit
made once is usually made again (every "customer" becomes "client"), so every later
occurrence is a miss for a drafter that copies the source as it stands.

``CopyTrack`` follows the history against what it is copying: the source from a position,
with the edits made so far applied.

* A token the copy expected advances it (``agreed`` counts the tokens in a row that did).
* The first token after a proposal, where it is the proposal's, moves the copy there.
* Any other token leaves the copy. It and each next one (up to ``WINDOW``) are looked for in
  the ``WINDOW`` source tokens from where the output left. Found, the copy resumes past it.
  Where the output had copied ``EDIT_CONTEXT`` tokens in a row before it left, the departure
  is kept as an edit: the source tokens skipped, and the tokens written instead (a
  substitution, or a deletion; an insertion skips none and is not kept).

What it proposes (``head``, ``proposal``): the copy's continuation while the output follows it. Every
proposal, the n-gram index's too, is rewritten with the edits made so far (``rewrite``).
"""

from __future__ import annotations

from collections.abc import Sequence

#: an edit's reach: tokens written instead of the copy, and source tokens skipped
WINDOW = 8
#: edits kept (the latest win): a copy edit names a few
MAX_EDITS = 32
#: tokens in a row the output must have copied before it left, for the departure to be kept as
#: an edit: a summary that quotes a phrase, then paraphrases, is not editing a copy (kept from
#: any departure, edits rewrote the proposals of summaries into misses: SmolLM2-135M
#: summarization, 1.60x AR with perfect knowledge of what to verify, 1.52x rewritten)
EDIT_CONTEXT = 8
#: where a proposal is priced as a split context (``departed``): while the output is away from
#: its copy, and this many tokens from where it left, resumed or not. Right after the output
#: departs from what it was copying, a short n-gram match is mostly a coincidence whatever its
#: record elsewhere (a code fence's ``\n```` found where it opened: "python"; a rewritten line
#: matched on its first word). Replayed over the category benchmark's recorded outputs with the
#: verify-cost curve jittered 24 ways (benchmarks/pricing_replay.py): 2 lifted every
#: aggregate, embedded code edits 0.96 -> 0.99x, the 1.5B's copy-heavy edits 1.28 -> 1.38x;
#: 6 and more cut summaries (their paraphrase leaves the source at every clause)
DEPARTURE_REACH = 2


class CopyTrack:
    """The copy a history is following (see the module's docstring)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        #: the next source position not yet read into ``_stream``, -1: no copy
        self.at = -1
        #: the copy's next expected tokens, each with the source position of the span it
        #: comes from (an edit's written tokens all carry the skipped span's start)
        self._stream: list[tuple[int, int]] = []
        #: tokens in a row the output followed the copy
        self.agreed = 0
        #: tokens written since the output left the copy (0: following it), the source
        #: position it left at, and the history position the departure began at
        self.away, self._left, self._left_hist, self._left_agreed = 0, -1, -1, 0
        #: the last n-gram proposal's start (-1: none) and the history length it was made at
        self._proposed, self._proposed_at = -1, -1
        #: source span -> the tokens the output wrote instead (insertion order: oldest first)
        self.edits: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._firsts: set[int] = set()

    def proposed(self, start: int, at: int) -> None:
        """An n-gram proposal copying from ``start`` was made when the history had ``at``
        tokens (-1: the copy's own, or none)."""
        self._proposed, self._proposed_at = start, at

    # -- following -------------------------------------------------------------------

    def follow(self, hist: Sequence[int], seen: int) -> None:
        """Move over ``hist[seen:]``, the tokens appended since the last call."""
        for j in range(seen, len(hist)):
            tok = hist[j]
            if self.at >= 0 and not self.away and self._expect(hist, j) == tok:
                self._stream.pop(0)
                self.agreed += 1
            elif j == self._proposed_at and 0 <= self._proposed < j and hist[self._proposed] == tok:
                self._start(self._proposed + 1, 1)
            elif self.at >= 0:
                if not self.away:  # leaving: where in the source, from which token on, after how many
                    self._left = self._stream[0][1] if self._stream else self.at
                    self._left_hist, self._left_agreed = j, self.agreed
                self.away += 1
                if not self._resumes(hist, j, tok) and self.away > WINDOW:
                    self.at, self.away, self._stream = -1, 0, []  # not an edit: no copy

    def _expect(self, hist: Sequence[int], j: int) -> int:
        """The copy's next token (-1: it reached the history's end at ``j``)."""
        if not self._stream:
            self._pull(hist, j, 1)
        return self._stream[0][0] if self._stream else -1

    def _pull(self, hist: Sequence[int], end: int, n: int) -> None:
        """Read source tokens before ``end`` into the stream until it holds ``n``."""
        while len(self._stream) < n and self.at < end:
            i = self.at
            span = self._edit_at(hist, i, end)
            if span is None:
                self._stream.append((hist[i], i))
                self.at = i + 1
            else:
                self._stream.extend((t, i) for t in self.edits[span])
                self.at = i + len(span)

    def _edit_at(self, hist: Sequence[int], i: int, end: int) -> tuple[int, ...] | None:
        if hist[i] not in self._firsts:
            return None
        for span in self.edits:
            if span[0] == hist[i] and i + len(span) <= end and tuple(hist[i:i + len(span)]) == span:
                return span
        return None

    def _start(self, at: int, agreed: int) -> None:
        self.at, self.agreed, self.away, self._stream = at, agreed, 0, []

    def _resumes(self, hist: Sequence[int], j: int, tok: int) -> bool:
        """Away: ``tok`` (at ``j``) found within the window past where the output left
        resumes the copy after it; the departure was an edit (kept where it skipped tokens)."""
        for s in range(self._left, min(self._left + WINDOW, self._left_hist)):
            if hist[s] == tok:
                skipped, written = tuple(hist[self._left:s]), tuple(hist[self._left_hist:j])
                if skipped and self._left_agreed >= EDIT_CONTEXT:
                    self._keep(skipped, written)
                self._start(s + 1, 1)
                return True
        return False

    def _keep(self, skipped: tuple[int, ...], written: tuple[int, ...]) -> None:
        self.edits.pop(skipped, None)
        self.edits[skipped] = written
        if len(self.edits) > MAX_EDITS:
            del self.edits[next(iter(self.edits))]
        self._firsts = {span[0] for span in self.edits}

    # -- proposing -------------------------------------------------------------------

    def departed(self, at: int) -> bool:
        """Whether the output, ``at`` tokens long, is away from its copy or left it at most
        ``DEPARTURE_REACH`` tokens ago."""
        return self.away > 0 or (self._left_hist >= 0 and at - self._left_hist <= DEPARTURE_REACH)

    def head(self, hist: Sequence[int]) -> int:
        """The copy's next token while the output follows it, else -1. (Right after an edit,
        guessing the source past as many tokens as the output wrote was right at 0.25 in copy
        edits, below the n-gram's occurrence: nothing is proposed then.)"""
        if self.at < 0 or self.away:
            return -1
        return self._expect(hist, len(hist))

    def proposal(self, hist: Sequence[int], k: int) -> list[int]:
        """Up to ``k`` tokens of the copy's continuation (``head`` first; [] where none)."""
        if self.head(hist) < 0:
            return []
        self._pull(hist, len(hist), k)
        return [t for t, _ in self._stream[:k]]

    def rewrite(self, hist: list[int], start: int, k: int) -> list[int]:
        """Up to ``k`` tokens copied from ``hist[start:]``, the edits made so far applied."""
        if not self.edits:
            return hist[start:start + k]
        end = len(hist)
        out: list[int] = []
        i = start
        while i < end and len(out) < k:
            span = self._edit_at(hist, i, end)
            if span is None:
                out.append(hist[i])
                i += 1
            else:
                out.extend(self.edits[span])
                i += len(span)
        return out[:k]
