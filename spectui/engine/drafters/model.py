"""The draft-model drafter: a second model proposes tokens from its own KV cache.

It keeps that cache between proposals and only evaluates the committed tokens it has not
seen (after a rejection it truncates back to the common prefix first).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spectui.config import SamplingConfig
from spectui.drafting import Model
from spectui.engine.loop.decode import shared_prefix
from spectui.engine.loop.sampling import Sampler
from spectui.engine.protocol import Backend, CacheRebuilt, Draft, DrafterBase

_EMPTY: list[int] = []


class ModelDrafter(DrafterBase):
    """A second model proposes ``k`` tokens autoregressively from its own KV cache.

    Greedy drafting is a deterministic proposal (``Draft.probs`` is None); a sampling drafter
    returns the warped distribution of every drafted token, which verification needs.

    Draft confidence (``p_min``, llama.cpp's draft p-min): the draft stops at the first
    position where the draft model's most likely token has a probability below ``p_min``
    (its own softmax when drafting greedily, its warped distribution when sampling; greedy
    drafts that token, so it is the probability of its own token). The decision is taken
    before a token is drawn and reads only the draft's state: the drafted token is still a
    draw from q, so verification stays exact. (Stopping on the probability of the token
    drawn would not be: the tokens proposed would no longer follow q; a chi-square test in
    tests/backends caught that.) ``collect_confidence`` reports the
    probabilities even with p-min off (``spectui tune`` simulates thresholds from them).
    """

    free = False

    def __init__(self, backend: Backend, sampling: SamplingConfig, *, p_min: float = 0.0, reuse: bool = False) -> None:
        self.backend = backend
        #: a conversation's turn: keep the draft cache's prefix shared with the new prompt,
        #: as the target does (``decode(reuse=True)``)
        self.reuse = reuse
        self.sampler = Sampler(sampling)
        self.p_min = p_min
        self.collect_confidence = False
        self.name = f"model:{backend.artifacts().name}"
        self._cached: list[int] = []

    def reset(self, prompt: Sequence[int]) -> None:
        kept = shared_prefix(self.backend.cached, prompt, len(prompt)) if self.reuse else 0
        self.backend.truncate(kept)
        self._cached = list(prompt[:kept])
        # history is append-only, so everything up to the last proposal's history length
        # still matches the cache: the next sync starts comparing there, not at token 0
        self._known = kept
        if len(prompt) > kept:
            # prefill now, so that the first proposal only evaluates the first new token
            self.backend.eval(prompt[kept:], all_logits=False)
            self._cached = list(prompt)
            self._known = len(prompt)

    def _sync(self, history: Sequence[int]) -> list[int]:
        """Roll the cache back to the longest prefix shared with ``history``; return the rest."""
        cached = self._cached
        n = min(len(cached), len(history))
        common = min(self._known, n)
        while common < n and cached[common] == history[common]:
            common += 1
        if common == len(history):  # nothing new to evaluate, but we need fresh logits
            common -= 1
        # (a cache longer than what we know of: an eval that raised half way, under the policy)
        if common < len(cached) or self.backend.n_past != len(cached):
            try:
                self.backend.truncate(common)
            except CacheRebuilt:
                pass  # the cache was rebuilt from the kept tokens: exact, only slower
            del cached[common:]
        self._known = len(history)
        return list(history[common:])

    def propose(self, history: Sequence[int], k: int) -> Draft:
        pending = self._sync(history)
        self.backend.checkpoint()  # the next sync rolls back to a position in this proposal
        room = self.backend.n_ctx - self.backend.n_past - len(pending)
        k = min(k, room + 1)
        if k <= 0:
            return Draft(_EMPTY)
        logits = self.backend.eval(pending, all_logits=False)
        self._cached.extend(pending)
        forwards = 1
        tokens: list[int] = []
        probs: list[np.ndarray] | None = None if self.sampler.greedy else []
        confidence: list[float] | None = [] if self.p_min > 0.0 or self.collect_confidence else None
        eog = self.backend.eog_tokens
        while True:
            row = logits[-1]
            if probs is None:
                tok = int(row.argmax())
                if confidence is not None:  # the softmax at the argmax
                    confidence.append(1.0 / float(np.exp(row - row[tok], dtype=np.float64).sum()))
                    if confidence[-1] < self.p_min:
                        break  # not confident enough: this token is not drafted
            else:
                q = self.sampler.probs(row)
                if confidence is not None:  # decided before the draw: see the class docstring
                    confidence.append(float(q.max()))
                    if confidence[-1] < self.p_min:
                        break
                tok = self.sampler.draw(q)
                probs.append(q)
            tokens.append(tok)
            if len(tokens) == k or tok in eog:
                break
            logits = self.backend.eval((tok,), all_logits=False)
            self._cached.append(tok)
            forwards += 1
        return Draft(tokens, probs, forwards, confidence)

    def close(self) -> None:
        self.backend.close()


def draft_sampling(target: SamplingConfig, draft: Model) -> SamplingConfig:
    """The draft model's sampling settings: the target's warpers unless overridden.

    The seed always differs from the target's: the draft's draws and the acceptance draws
    must be independent, and two generators with one seed would replay the same stream.
    """
    temperature = target.temperature if draft.temperature is None else draft.temperature
    return SamplingConfig(temperature=temperature, top_k=target.top_k, top_p=target.top_p, seed=target.seed + 0x9E3779B9)
