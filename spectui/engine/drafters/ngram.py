"""The n-gram prompt-lookup drafter: no model, a dictionary lookup per step.

It keeps an incremental index of the history, so a step costs what it must whatever the
history's length.
"""

from __future__ import annotations

from collections.abc import Sequence

from spectui.engine.protocol import Draft

_EMPTY: list[int] = []


class NgramDrafter:
    """Prompt lookup: find the longest recent n-gram that ends the history, copy what followed.

    For every n in ``[n_min, n_max]`` an index maps each n-gram to the end position of its
    latest occurrence. Appending a token updates ``n_max - n_min + 1`` entries, and a
    proposal is a dictionary result read before the update, so each step costs O(n_max + k)
    whatever the history length. The most recent occurrence wins: in edits and rewrites the
    nearest copy is the one being followed.
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
        self._index: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in range(self.n_min, self.n_max + 1)}
        # for each n: where the n-gram ending the history occurred before (end position), or -1
        self._previous: dict[int, int] = {n: -1 for n in self._index}
        self._extend(prompt)

    def _extend(self, history: Sequence[int]) -> None:
        hist = self._history
        for j in range(len(hist), len(history)):
            hist.append(history[j])
            end = j + 1
            for n, index in self._index.items():
                if end < n:
                    self._previous[n] = -1
                    continue
                key = tuple(hist[end - n:end])
                self._previous[n] = index.get(key, -1)
                index[key] = end

    def propose(self, history: Sequence[int], k: int) -> Draft:
        self._extend(history)
        hist = self._history
        for n in range(self.n_max, self.n_min - 1, -1):
            start = self._previous[n]
            if start >= 0:
                return Draft(hist[start:start + k], match=n)
        return Draft(_EMPTY)

    def close(self) -> None:
        pass
