"""Suffix decoding: a model-free drafter that continues the history the way it went before.

SuffixDecoding (arXiv 2411.04975; Snowflake ArcticInference; vLLM's ``method: "suffix"``)
indexes every substring of the request so far (prompt + output) and of earlier outputs of the
same model, finds the longest suffix of the history seen before and drafts what most often
followed it, for as long as that stays likely. Unlike the n-gram lookup it counts: a context
followed by two different tokens drafts the more frequent one and stops where evidence splits.

The index (``suffix_index.SuffixIndex``, a suffix automaton with occurrence counts) answers
what the drafter asks; this module decides what to draft from it and from the memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from spectui.engine.drafters.suffix_index import DEFAULT_MAX_DEPTH, SuffixIndex
from spectui.engine.protocol import SUPPORT_AGREED, SUPPORT_ONCE, SUPPORT_SPLIT, SUPPORT_UNKNOWN, Draft, DrafterBase, match_bucket

_EMPTY: list[int] = []  # one empty draft's tokens, never written to


class Memory(Protocol):
    """What the drafter needs of a memory (``suffix_memory.SuffixMemory``, which imports this)."""

    # read-only to the drafter (properties): a memory may hold a subclass (``MemoryIndex``)
    @property
    def index(self) -> SuffixIndex: ...

    @property
    def version(self) -> int:
        """Changes with the index: the drafter's cursor into it is then matched again."""
        ...

    def add(self, tokens: Sequence[int]) -> None: ...

    def save(self) -> bool: ...


class SuffixDrafter(DrafterBase):
    """Draft the most frequent continuation of the longest suffix of the history seen before.

    Two sources, each with a cursor kept current as the history grows: this request's index
    (prompt + output so far) and a ``SuffixMemory`` of earlier outputs (None: no memory).
    The one with the longer match drafts; on equal lengths both do, their counts added (the
    next token is the better of each one's favourite, scored by both; ties: this request's).
    The walk follows the most frequent continuation, multiplying ``count(next) / count(
    context)``, and stops before a token whose running probability is below
    ``min_token_prob``, after ``max_spec_factor * match + max_spec_offset`` tokens, or at
    ``k``: a weak match drafts little, a strong one long. Deterministic: ties within a source
    go to the continuation seen last (``SuffixIndex.choices``).

    A proposal costs O(max_depth) per token the history grew by, plus O(1) per drafted
    token. Only committed tokens enter the index, so a partly rejected draft needs no repair;
    a history that does not extend the one seen (a new request without ``reset``) starts over.

    ``finish`` (called by ``reset`` and ``close``) folds the request's output into the
    memory, after its prompt's last ``prompt_tail`` tokens so that the same prompt matches
    from its first generated token, and saves the memory. The loop shows the drafter the
    history up to its last proposal only: a caller that has the final tokens passes them to
    ``finish(history)``.
    """

    name = "suffix"
    #: no model: proposing costs microseconds, so an adaptive K may ask for guesses it won't verify
    free = True

    def __init__(
        self,
        memory: Memory | None = None,
        *,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_spec_factor: float = 1.0,
        max_spec_offset: float = 0.0,
        min_token_prob: float = 0.1,
        prompt_tail: int | None = None,
        learn: bool = True,
    ) -> None:
        # vLLM's defaults for its suffix method: factor 1.0, offset 0, p-min 0.1, depth 24
        self.memory = memory
        self.max_depth = max_depth
        self.max_spec_factor = max_spec_factor
        self.max_spec_offset = max_spec_offset
        self.min_token_prob = min_token_prob
        self.prompt_tail = max_depth if prompt_tail is None else prompt_tail
        #: fold each request's output into the memory (False: read it only, e.g. a replay)
        self.learn = learn
        self._start(())

    # -- the request ------------------------------------------------------------------

    def _start(self, prompt: Sequence[int]) -> None:
        self._seen: list[int] = []
        self._prompt_len = len(prompt)
        self._finished = False
        self._local = SuffixIndex(self.max_depth)
        self._mem = (0, 0)  # the memory's longest context ending the history
        self._mem_version = -1  # the memory's version that cursor was matched against
        self._sync(prompt)

    def _sync(self, history: Sequence[int]) -> None:
        seen = self._seen
        n = len(seen)
        if len(history) < n or (n and history[n - 1] != seen[n - 1]):
            # not an extension of what we indexed (a request without reset): start over
            self.finish()
            self._start(history)
            return
        new = history[n:]
        seen.extend(new)
        self._local.extend(new)
        mem = self.memory
        if mem is None:
            return
        index = mem.index
        if self._mem_version != mem.version or len(new) > index.max_depth:
            # a new memory, a changed one or a long stretch (a prompt): match the last
            # max_depth tokens afresh, since the capped match depends on nothing before them
            self._mem_version = mem.version
            v, m = 0, 0
            for t in seen[-index.max_depth:]:
                v, m = index.advance(v, m, t)
        else:
            v, m = self._mem
            for t in new:
                v, m = index.advance(v, m, t)
        self._mem = (v, m)

    def reset(self, prompt: Sequence[int]) -> None:
        self.finish()
        self._start(prompt)

    def finish(self, history: Sequence[int] | None = None) -> None:
        """The request is over: fold its output into the memory and save it (once)."""
        if history is not None:
            self._sync(history)
        if self._finished:
            return
        self._finished = True
        mem = self.memory
        output = self._seen[self._prompt_len:]
        if mem is None or not output or not self.learn:
            return
        mem.add(self._seen[max(0, self._prompt_len - self.prompt_tail):self._prompt_len] + output)
        mem.save()

    def close(self) -> None:
        self.finish()

    # -- proposing --------------------------------------------------------------------

    @property
    def index(self) -> SuffixIndex:
        """This request's index (prompt + output so far)."""
        return self._local

    def contexts(self) -> tuple[tuple[int, int], tuple[int, int] | None]:
        """``(state, length)`` of the longest suffix of the history that something followed,
        in this request's index and in the memory's (None: no memory); (0, 0): none."""
        mem = self.memory.index.fallback(*self._mem) if self.memory is not None else None
        return self._local.repeat(), mem

    def _sources(self) -> list[tuple[SuffixIndex, int, int]]:
        """The sources that draft now: ``(index, state, match length)``, longest match only."""
        (v, n), mem = self.contexts()
        sources = [(self._local, v, n)] if n else []
        if self.memory is not None and mem is not None and mem[1] and mem[1] >= n:
            if mem[1] > n:
                sources = []
            sources.append((self.memory.index, *mem))
        return sources

    def propose(self, history: Sequence[int], k: int) -> Draft:
        self._sync(history)
        sources = self._sources() if k > 0 else []
        if not sources:
            return Draft(_EMPTY)
        match = sources[0][2]
        limit = min(k, int(self.max_spec_factor * match + self.max_spec_offset + 1e-9))
        tokens: list[int] = []
        prob = 1.0
        support = SUPPORT_UNKNOWN
        while sources and len(tokens) < limit:
            tok, score, total = _choose(sources)
            if total == 0:
                break
            if not tokens:  # how the context went on before: the proposal's support
                support = SUPPORT_SPLIT if score < total else SUPPORT_AGREED if total >= 2 else SUPPORT_ONCE
            prob *= score / total
            if prob < self.min_token_prob:
                break
            tokens.append(tok)
            # each source follows tok; one that never saw it stops counting
            sources = [(index, *nxt) for index, v, n in sources if (nxt := index.step(v, n, tok)) is not None]
        return Draft(tokens, match=match_bucket(match), support=support)


def _choose(sources: list[tuple[SuffixIndex, int, int]]) -> tuple[int, int, int]:
    """The next token of the walk, its count and the total, over one or two sources."""
    index, v, _ = sources[0]
    tok, score, total = index.choices(v)
    if len(sources) == 1:
        return tok, score, total
    other, w, _ = sources[1]
    tok2, score2, total2 = other.choices(w)
    if tok >= 0:
        score += other.child(w, tok)
    if tok2 >= 0:
        score2 += index.child(v, tok2)
    if tok2 >= 0 and score2 > score:
        return tok2, score2, total + total2
    return tok, score, total + total2
