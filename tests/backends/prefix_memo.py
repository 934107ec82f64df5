"""A test helper: a Backend wrapper that serves repeated blocks from memory."""

from __future__ import annotations

import numpy as np


class PrefixMemo:
    """A Backend wrapper that remembers logits by (cached prefix, tokens): the same block
    after the same prefix is served from memory.

    The chi-square test repeats one speculative block hundreds of times from one context;
    with a top-k of 4 there are only a few dozen distinct blocks, and MLX on this CPU costs
    ~0.2 s a token. Every distinct block is evaluated by the real backend (its cache brought
    to the prefix by truncate + eval), and every ``check_every``-th repeat is evaluated again
    and must match the remembered rows (within ``atol``: llama.cpp's multi-threaded kernels
    may differ in the last bits when the prefix was evaluated in another batch shape), so the
    backend stays in the loop.

    ``memo`` may be shared by several wrappers of one backend (the tests of one module): a
    block one test evaluated is served to the next from memory, and each wrapper brings the
    backend's cache to its prefix itself (it starts from an empty one).
    """

    def __init__(self, backend, check_every: int = 150, atol: float = 1e-3, memo: dict | None = None) -> None:
        self.atol = atol
        self.backend = backend
        self.seq: list[int] = []
        self._real: list[int] = []
        self._memo: dict[tuple, np.ndarray] = {} if memo is None else memo
        self._hits = 0
        self.check_every = check_every
        self.evaluated = 0

    def __getattr__(self, name):
        return getattr(self.backend, name)

    @property
    def n_past(self) -> int:
        return len(self.seq)

    def truncate(self, n: int) -> None:
        del self.seq[n:]

    def _compute(self, tokens: list[int], all_logits: bool) -> np.ndarray:
        b, real, seq = self.backend, self._real, self.seq
        common = 0
        while common < min(len(real), len(seq)) and real[common] == seq[common]:
            common += 1
        b.truncate(common)
        if common < len(seq):
            b.eval(seq[common:], all_logits=False)
            self.evaluated += len(seq) - common
        rows = np.array(b.eval(tokens, all_logits=all_logits))
        self.evaluated += len(tokens)
        self._real = [*seq, *tokens]
        return rows

    def eval(self, tokens, *, all_logits: bool) -> np.ndarray:
        tokens = list(tokens)
        key = (tuple(self.seq), tuple(tokens), all_logits)
        rows = self._memo.get(key)
        if rows is None:
            rows = self._memo[key] = self._compute(tokens, all_logits)
        else:
            self._hits += 1
            if self._hits % self.check_every == 0:
                again = self._compute(tokens, all_logits)
                diff = float(np.abs(again - rows).max())
                assert diff <= self.atol, f"the same block after the same prefix gave logits {diff} apart"
        self.seq.extend(tokens)
        return rows
