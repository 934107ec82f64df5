"""Several requests in one llama.cpp batch, as llama-server evaluates its slots.

llama-server started with ``-np N`` holds N sequences in one context, each in its own KV
stream (``--kv-unified`` is off once the slots are named), and decodes one batch with every
busy slot's tokens: an AR step's one token, a verification's block. A request's logits then
depend on what else is in the batch, as they depend on a block's shape (``host/noise``).
``Slots`` evaluates a request beside its neighbours on the same weights, threads and flash
attention, so that what a neighbour moves is measured rather than guessed.
"""

from __future__ import annotations

from collections.abc import Sequence

import llama_cpp as ll
import numpy as np

from spectui.engine.backends.llamacpp import LlamaCppBackend, context_params, free_context, last_error
from spectui.errors import SpectuiError


class Slots:
    """``n`` sequences in one context over ``backend``'s weights, a KV stream each, sized and
    set as llama-server sizes its slots (each the context ``backend`` has)."""

    def __init__(self, backend: LlamaCppBackend, n: int = 2) -> None:
        params = context_params(backend.config, backend.model, backend.n_threads, n_ctx=backend.n_ctx * n, n_seq_max=n)
        params.kv_unified = False  # llama-server's slots once their number is named (-np)
        self.model = backend.model
        self.ctx = ll.llama_init_from_model(self.model.ptr, params)
        if not self.ctx:
            raise SpectuiError(f"llama.cpp could not create a context of {n} slots: {last_error()}")
        self.model.refs += 1
        self.memory = ll.llama_get_memory(self.ctx)
        self.n_vocab = backend.n_vocab
        self.n_batch = ll.llama_n_batch(self.ctx)
        self._next = [0] * n  # each slot's next position
        self._batch = ll.llama_batch_init(self.n_batch, 0, 1)

    def eval(self, parts: Sequence[tuple[int, Sequence[int]]]) -> list[np.ndarray]:
        """One batch holding each part's tokens (slot, tokens) at that slot's next positions;
        per part, the logits of every one of its rows (copies: the next batch reuses llama.cpp's
        buffer)."""
        batch = self._batch
        i = 0
        for slot, tokens in parts:
            for token in tokens:
                if i >= self.n_batch:
                    raise ValueError(f"a batch of more than {self.n_batch} tokens")
                batch.token[i] = token
                batch.pos[i] = self._next[slot]
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = slot
                batch.logits[i] = True
                self._next[slot] += 1
                i += 1
        batch.n_tokens = i
        rc = ll.llama_decode(self.ctx, batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc} on a batch of {len(parts)} slots: {last_error()}")
        rows = np.ctypeslib.as_array(ll.llama_get_logits(self.ctx), shape=(i, self.n_vocab))
        out, start = [], 0
        for _, tokens in parts:
            out.append(rows[start:start + len(tokens)].copy())
            start += len(tokens)
        return out

    def clear(self) -> None:
        """Every slot empty, at position 0."""
        ll.llama_memory_clear(self.memory, True)
        self._next = [0] * len(self._next)

    def close(self) -> None:
        if self.ctx:
            free_context(self.ctx, self._batch, self.model)
            self.ctx = None

    def __enter__(self) -> Slots:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
