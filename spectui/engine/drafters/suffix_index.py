"""The suffix drafter's index: which contexts occurred, how often, and what followed them.

The index is a suffix automaton with occurrence counts rather than the paper's depth-capped
suffix trie. It answers the same questions (does this context occur, how often, what followed
it how often) and is the trie with equal subtrees merged: 1.4 states per token of this
repository's text where a depth-16 trie held 11 nodes (about 2 KB) per token in Python.
Counts are kept only for strings of up to ``max_depth + 1`` tokens and contexts are capped
at ``max_depth``, which is what the trie's depth cap does, so each appended token walks at
most two chains of ``max_depth + 2`` states. (ArcticInference compresses its trie's paths
instead; in Python the automaton is the simpler way to the same bound.)
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

#: contexts longer than this are not told apart (vLLM's ``suffix_decoding_max_tree_depth``)
DEFAULT_MAX_DEPTH = 24


class SuffixIndex:
    """Every substring (up to ``max_depth + 1`` tokens) of some token sequences, counted.

    A generalised suffix automaton built online: ``append`` extends the open sequence,
    ``end_sequence`` closes it (``MemoryIndex`` adds building in bulk and forgetting). A state
    stands for substrings that occur at exactly the same places, so its count, its
    latest end position and its continuations belong to all of them. A *context* is a pair
    ``(state, length)``: one of the state's strings. State 0 is the root (the empty context);
    it is never a transition target, so 0 also means "no transition".

    An append costs the automaton's amortised O(1) construction plus two walks of at most
    ``max_depth + 2`` states (the suffixes it ends gain an occurrence, the contexts it
    continues gain a continuation). States at count 0 (a forgotten sequence's) read as absent.
    """

    def __init__(self, max_depth: int = DEFAULT_MAX_DEPTH) -> None:
        if max_depth < 1:
            raise ValueError("max_depth must be at least 1")
        #: the longest context; counts are kept one token deeper, for its continuations
        self.max_depth = max_depth
        self._depth = max_depth + 1
        # per state, in typed arrays (4 bytes a slot, no int objects): suffix link, longest
        # string's length, occurrences, latest end position
        self._link = array("i", [-1])
        self._len = array("i", [0])
        self._count = array("i", [0])
        self._recent = array("i", [0])
        # transitions: most states have exactly one (held in two arrays, no dict); a state
        # with several has a dict in ``_many`` and a 0 in ``_dst``
        self._tok = array("i", [0])
        self._dst = array("i", [0])
        self._many: dict[int, dict[int, int]] = {0: {}}
        # per state, kept current so that a proposal never scans continuations: the most
        # frequent one, its count (-1: to be found again) and the occurrences followed at all
        self._best = array("i", [-1])
        self._best_n = array("i", [0])
        self._total = array("i", [0])
        self._bulk = False  # building in bulk: best continuations are found when first asked for
        self._pos = 0  # tokens appended (``_recent`` values: only their order matters)
        self._last = 0  # the whole open sequence's state (construction)
        self._tail, self._tail_len = 0, 0  # its suffix of at most max_depth + 1 tokens
        #: steps along suffix links and construction loops (the tests bound it per token)
        self.ops = 0

    # -- transitions ------------------------------------------------------------------

    def _get(self, v: int, t: int) -> int:
        d = self._dst[v]
        if d:
            return d if self._tok[v] == t else 0
        many = self._many.get(v)
        return many.get(t, 0) if many is not None else 0

    def edges(self, v: int) -> Iterable[tuple[int, int]]:
        """``(token, state)`` for every transition out of ``v`` (dead ones included)."""
        d = self._dst[v]
        if d:
            return ((self._tok[v], d),)
        return self._many.get(v, {}).items()

    def _new(self, length: int, link: int, count: int, recent: int) -> int:
        self._link.append(link)
        self._len.append(length)
        self._count.append(count)
        self._recent.append(recent)
        self._tok.append(0)
        self._dst.append(0)
        self._best.append(-1)
        self._best_n.append(0)
        self._total.append(0)
        return len(self._len) - 1

    def _split(self, p: int, q: int, t: int) -> int:
        """Clone ``q`` for its strings up to ``len(p) + 1`` tokens; redirect ``p``'s chain to it."""
        clone = self._new(self._len[p] + 1, self._link[q], self._count[q], self._recent[q])
        if self._dst[q]:
            self._tok[clone], self._dst[clone] = self._tok[q], self._dst[q]
        elif q in self._many:
            self._many[clone] = dict(self._many[q])
        # same occurrences, same continuations
        self._best[clone], self._best_n[clone], self._total[clone] = self._best[q], self._best_n[q], self._total[q]
        self._link[q] = clone
        if self._tail == q and self._tail_len <= self._len[clone]:
            self._tail = clone  # the open sequence's suffix moved into the clone
        while p >= 0 and self._get(p, t) == q:
            if self._dst[p]:
                self._dst[p] = clone
            else:
                self._many[p][t] = clone
            p = self._link[p]
            self.ops += 1
        return clone

    # -- building ---------------------------------------------------------------------

    def append(self, t: int) -> None:
        """Extend the open sequence by ``t`` and count the suffixes that now end with it."""
        # the transition look-ups of ``_get`` are written out here: this is the hot loop of
        # loading a memory, and a call per look-up cost a third of its time
        link, ln, tok, dst, many = self._link, self._len, self._tok, self._dst, self._many
        last = self._last
        d = dst[last]
        if d:
            q = d if tok[last] == t else 0
        else:
            m = many.get(last)
            q = m.get(t, 0) if m is not None else 0
        steps = 0
        if q:  # the sequence so far + t occurred already (generalised automaton)
            new = q if ln[q] == ln[last] + 1 else self._split(last, q, t)
        else:
            new = self._new(ln[last] + 1, 0, 0, 0)
            p = last
            while p >= 0:
                d = dst[p]
                if d:
                    if tok[p] == t:
                        q = d
                    else:  # a second transition: the state gets a dict
                        many[p] = {tok[p]: d, t: new}
                        dst[p] = 0
                else:
                    m = many.get(p)
                    if m is None:
                        tok[p], dst[p] = t, new
                    else:
                        q = m.get(t, 0)
                        if not q:
                            m[t] = new
                if q:
                    link[new] = q if ln[p] + 1 == ln[q] else self._split(p, q, t)
                    break
                p = link[p]
                steps += 1
        self._last = new
        # the suffix of at most max_depth + 1 tokens, and every shorter one, gains an occurrence
        prev, prev_len = w, n = self._tail, self._tail_len
        d = dst[w]
        w = d if d else many[w][t]  # it exists: the text just got it
        n += 1
        if n > self._depth:
            n = self._depth
            while ln[link[w]] >= n:
                w = link[w]
        self._tail, self._tail_len = w, n
        self._pos += 1
        pos, count, recent = self._pos, self._count, self._recent
        while w > 0:
            count[w] += 1
            recent[w] = pos
            w = link[w]
            steps += 1
        # ... and the contexts it continues (the previous suffixes, the empty one included)
        # have one more continuation: t, whose count was just raised
        best, best_n, total = self._best, self._best_n, self._total
        v = -1 if self._bulk else self._cap(prev, prev_len)[0]
        while v >= 0:
            d = dst[v]
            c = count[d if d else many[v][t]]
            total[v] += 1
            if c >= best_n[v] >= 0:  # a tie goes to t, the latest
                best[v], best_n[v] = t, c
            v = link[v]
            steps += 1
        self.ops += steps

    def extend(self, tokens: Iterable[int]) -> None:
        for t in tokens:
            self.append(t)

    def end_sequence(self) -> None:
        """Close the open sequence: the next ``append`` starts another one."""
        self._last = self._tail = self._tail_len = 0

    # -- reading ----------------------------------------------------------------------

    @property
    def nodes(self) -> int:
        """States held, dead ones (count 0, awaiting a rebuild) included."""
        return len(self._len)

    def count(self, v: int) -> int:
        return self._count[v]

    def child(self, v: int, t: int) -> int:
        """Occurrences of context ``v`` followed by ``t``."""
        x = self._get(v, t)
        return self._count[x] if x else 0

    def continuations(self, v: int) -> dict[int, int]:
        """What followed context ``v``, and how often (live transitions only)."""
        return {t: self._count[x] for t, x in self.edges(v) if self._count[x] > 0}

    def choices(self, v: int) -> tuple[int, int, int]:
        """``(token, its count, total)``: the most frequent continuation of ``v`` (-1 if none)
        and how many occurrences of ``v`` were followed by anything. O(1), kept current by
        ``append``; scanned once after ``build`` or after a ``remove`` lowered the best.

        Ties go to the continuation that occurred last: in a request that is the nearest copy
        (what an edit follows); in the memory it depends on the stored sequences alone (FIFO
        eviction only drops the oldest occurrences), so a memory reloaded from its file
        proposes exactly what it did before.
        """
        if self._best_n[v] < 0:
            count, recent = self._count, self._recent
            best, best_n, best_r, total = -1, 0, -1, 0
            for t, x in self.edges(v):
                n = count[x]
                total += n
                if n > best_n or (n == best_n and n > 0 and recent[x] > best_r):
                    best, best_n, best_r = t, n, recent[x]
            self._best[v], self._best_n[v], self._total[v] = best, best_n, total
        return self._best[v], self._best_n[v], self._total[v]

    def step(self, v: int, n: int, t: int) -> tuple[int, int] | None:
        """Context ``(v, n)`` followed by ``t`` (capped at ``max_depth``), or None if ``t``
        never followed it."""
        x = self._get(v, t)
        if not x or self._count[x] <= 0:
            return None
        return self._cap(x, n + 1)

    def advance(self, v: int, n: int, t: int) -> tuple[int, int]:
        """Matching another text: its longest suffix found here (at most ``max_depth``) was
        ``(v, n)``; this is it once ``t`` is appended. Amortised O(1) (falls back by links)."""
        link, ln, count = self._link, self._len, self._count
        while True:
            x = self._get(v, t)
            if x and count[x] > 0:
                return self._cap(x, n + 1)
            if v == 0:
                return 0, 0
            v = link[v]
            n = ln[v]
            self.ops += 1

    def _cap(self, v: int, n: int) -> tuple[int, int]:
        if n > self.max_depth:
            n = self.max_depth
            while self._len[self._link[v]] >= n:
                v = self._link[v]
        return v, n

    def fallback(self, v: int, n: int) -> tuple[int, int]:
        """The longest suffix of context ``(v, n)`` that something followed ((0, 0) if none)."""
        while v > 0 and self.choices(v)[2] == 0:
            v = self._link[v]
            n = self._len[v]
        return v, n

    def repeat(self) -> tuple[int, int]:
        """The longest suffix (at most ``max_depth``) of the open sequence that occurred
        earlier in it, so that something followed it; (0, 0) if none. O(max_depth)."""
        v, n = self._cap(self._tail, self._tail_len)
        while v > 0 and self._count[v] < 2:
            v = self._link[v]
            n = self._len[v]
        return v, n

    def active(self) -> list[tuple[int, int]]:
        """The open sequence's suffixes of up to ``max_depth + 1`` tokens, as ``(state, length
        of its longest such suffix)``: the trie's "active nodes", at most ``max_depth + 2``."""
        out = []
        v, n = self._tail, self._tail_len
        while v > 0:
            out.append((v, n))
            v = self._link[v]
            n = self._len[v]
        return out
