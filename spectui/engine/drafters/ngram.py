"""The n-gram prompt-lookup drafter: no model, a dictionary lookup per step.

It keeps an incremental index of the history, so a step costs what it must whatever the
history's length.
"""

from __future__ import annotations

from collections.abc import Sequence

from spectui.engine.drafters.copy_track import CopyTrack
from spectui.engine.protocol import SUPPORT_AGREED, SUPPORT_ONCE, SUPPORT_RESUMED, SUPPORT_SPLIT, Draft, DrafterBase, match_bucket

_EMPTY: list[int] = []
#: how far back a match is followed to measure its length (``Draft.match``'s last bucket is 16+)
MATCH_REACH = 32


class NgramDrafter(DrafterBase):
    """Prompt lookup: find the longest recent n-gram that ends the history, copy what followed.

    For every n in ``[n_min, n_max]`` an index maps each n-gram to the end position of its
    latest occurrence. Appending a token updates ``n_max - n_min + 1`` entries, and a
    proposal is a dictionary result read before the update, so each step costs O(n_max + k)
    whatever the history length. The most recent occurrence wins: in edits and rewrites the
    nearest copy is the one being followed.

    A proposal says what it is worth (``Draft.match``, ``Draft.support``): how far back the
    history agrees with the text before the copied occurrence (up to ``MATCH_REACH`` tokens:
    a copy under way matches far past ``n_max``, a coincidental n-gram does not) and whether
    the n-gram was followed by the same token every time before. Both are read in O(1) per
    n from a second index kept beside the first, plus O(``MATCH_REACH``) per proposal.

    It also follows the copy the output is making (``copy_track.CopyTrack``): where the
    output agreed with that copy at least as far back as with the n-gram's latest occurrence
    and the two differ, the copy's continuation is proposed (``SUPPORT_RESUMED``); and every
    proposal is rewritten with the edits the output made to the copy so far. Where the output
    has just left its copy (``CopyTrack.departed``), an n-gram proposal says ``SUPPORT_SPLIT``:
    its record was made in other text.
    """

    name = "ngram"
    #: proposing costs nothing, so an adaptive K may ask for a guess it will not verify
    free = True

    def __init__(self, n_min: int = 1, n_max: int = 4) -> None:
        self.n_min = n_min
        self.n_max = n_max
        self.reset(())

    def reset(self, prompt: Sequence[int]) -> None:
        self._history: list[int] = []
        # one entry per n in [n_min, n_max], in that order (lists, not dicts by n: every
        # token updates each of them, and this is most of what a held-back step costs)
        sizes = range(self.n_min, self.n_max + 1)
        #: each n-gram -> the end position of its latest occurrence
        self._index: list[dict[tuple[int, ...], int]] = [{} for _ in sizes]
        #: where the n-gram ending the history occurred before (end position), or -1
        self._previous: list[int] = [-1 for _ in sizes]
        #: each n-gram -> the token that followed its latest occurrence, how many occurrences
        #: in a row it followed, and whether another token ever followed the n-gram
        self._follow: list[dict[tuple[int, ...], tuple[int, int, bool]]] = [{} for _ in sizes]
        #: the n-gram ending the history, or None where the history is shorter than n
        self._last_key: list[tuple[int, ...] | None] = [None for _ in sizes]
        self._grams = list(zip(sizes, self._index, self._follow))
        self._copy = CopyTrack()
        self._extend(prompt)

    def _extend(self, history: Sequence[int]) -> None:
        hist = self._history
        grams, last_key, previous = self._grams, self._last_key, self._previous
        for j in range(len(hist), len(history)):
            tok = history[j]
            hist.append(tok)
            end = j + 1
            for g, (n, index, follow) in enumerate(grams):
                before = last_key[g]
                if before is not None:  # the n-gram that ended at j was followed by tok
                    seen = follow.get(before)
                    if seen is None:
                        follow[before] = (tok, 1, False)
                    elif seen[0] == tok:
                        follow[before] = (tok, seen[1] + 1, seen[2])
                    else:
                        follow[before] = (tok, 1, True)
                if end < n:
                    previous[g] = -1
                    last_key[g] = None
                    continue
                key = tuple(hist[end - n : end])
                previous[g] = index.get(key, -1)
                index[key] = end
                last_key[g] = key

    def propose(self, history: Sequence[int], k: int) -> Draft:
        seen = len(self._history)
        self._extend(history)
        hist = self._history
        self._copy.follow(hist, seen)
        previous, n_min = self._previous, self.n_min
        found = next(((previous[g], g + n_min) for g in range(len(previous) - 1, -1, -1) if previous[g] >= 0), None)
        track = self._copy
        head = track.head(hist)
        if found is not None:
            start, n = found
            matched = self._matched(start, n)
            tokens = track.rewrite(hist, start, k)
            # the copy's own continuation where it differs, and the output agreed with the
            # copy at least as far back as with the n-gram's occurrence
            if head < 0 or tokens[:1] in ([], [head]) or not 0 < matched <= track.agreed:
                track.proposed(start, len(hist))
                # just off the copy the output was making, a match's record is not this text's
                support = SUPPORT_SPLIT if track.departed(len(hist)) else self._support(n)
                return Draft(tokens, match=match_bucket(matched), support=support)
        track.proposed(-1, -1)
        if head < 0:
            return Draft(_EMPTY)
        return Draft(track.proposal(hist, k), match=match_bucket(track.agreed), support=SUPPORT_RESUMED)

    def _matched(self, start: int, n: int) -> int:
        """How many tokens before ``start`` equal the history's last ones (at least ``n``, the
        n-gram itself; at most ``MATCH_REACH``)."""
        hist = self._history
        i, j, m = start - 1 - n, len(hist) - 1 - n, n
        while m < MATCH_REACH and i >= 0 and hist[i] == hist[j]:
            i, j, m = i - 1, j - 1, m + 1
        return m

    def _support(self, n: int) -> int:
        key = self._last_key[n - self.n_min]
        seen = self._follow[n - self.n_min].get(key) if key is not None else None
        if seen is None:  # cannot happen for a found n-gram; a drafter says "once" then
            return SUPPORT_ONCE
        _, in_a_row, split = seen
        return SUPPORT_SPLIT if split else SUPPORT_AGREED if in_a_row >= 2 else SUPPORT_ONCE

    def close(self) -> None:
        pass
