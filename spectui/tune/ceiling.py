"""What the weights allow: the speedup no drafting policy can beat, from the verify-cost curve.

Under greedy decoding the output is fixed, so two ceilings follow from it and the curve:

* **perfect**: a drafter that always proposes the target's own next ``k_max`` tokens. Every
  block is ``k_max + 1`` rows, all kept; what remains is the price of a block. On a CPU whose
  kernels evaluate n tokens for about n times one (Q4_1 here) it is well under 2x whatever
  drafts; on batched weights it is several times that.
* **copying**: a drafter that copies (prompt lookup, the suffix drafter) and always knew which
  earlier run of tokens to follow and exactly where it stops: the cheapest plan of blocks
  over the output, each drafting at most the longest stretch found earlier in the history.
  An edit or a new word is a token nobody could copy; real drafters, which must guess where
  a copy ends, sit below this.
* **lookup** (``lookup_bound``): prompt lookup as it finds its source (the run after the
  latest occurrence of the longest match of the text just written), knowing only where each
  copy ends. What separates a lookup drafter from it is the length it drafts, nothing else: a
  draft length that learns where copies end is measured against this bound, not the copying
  ceiling, whose sources no lookup finds.

``spectui tune`` shows both per tier beside its best setting: a setting close to the copying
ceiling has nothing left to gain from drafting better; only cheaper verification (other
weights, other hardware) or a different kind of drafter moves it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

#: how far back prompt lookup measures its match (the n-gram drafter's reach)
MATCH_REACH = 32


def longest_copies(history: Sequence[int], output: Sequence[int], limit: int) -> list[int]:
    """For each position i of ``output``: the longest run ``output[i:i+n]`` (n <= ``limit``)
    found whole in ``history + output[:i]``. Each seen n-gram is kept once in a set per
    length, so the whole pass costs O((len(history) + len(output)) * limit)."""
    seen: list[set[tuple[int, ...]]] = [set() for _ in range(limit + 1)]
    text: list[int] = []

    def add(token: int) -> None:
        text.append(token)
        end = len(text)
        for n in range(1, min(limit, end) + 1):
            seen[n].add(tuple(text[end - n:end]))

    for t in history:
        add(t)
    out = []
    for i in range(len(output)):
        n = 0
        while n < limit and i + n < len(output) and tuple(output[i:i + n + 1]) in seen[n + 1]:
            n += 1
        out.append(n)
        add(output[i])
    return out


def lookup_sources(text: Sequence[int], start: int, reach: int = MATCH_REACH) -> list[tuple[int, int]]:
    """For each length n of ``text[:n]`` from ``start`` to ``len(text) - 1``: where prompt lookup
    copies from, (the match's length, the index after the latest occurrence of the longest
    suffix of ``text[:n]``, up to ``reach`` tokens, that also occurs earlier in it); (0, -1)
    where the last token never occurred before. Occurrences are narrowed one token of match at a time from those of the
    last token, so a position costs its last token's occurrences, not a scan of the text."""
    where: defaultdict[int, list[int]] = defaultdict(list)  # token -> where it occurs, ascending
    indexed = 0
    out = []
    for n in range(start, len(text)):
        while indexed <= n - 2:  # the occurrences a match may end at: before the last token
            where[text[indexed]].append(indexed)
            indexed += 1
        ends = list(where[text[n - 1]]) if n >= 1 else []
        found = (1, max(ends) + 1) if ends and n >= 2 else (0, -1)
        for length in range(2, min(reach, n - 1) + 1):
            ends = [e for e in ends if e - length + 1 >= 0 and text[e - length + 1] == text[n - length]]
            if not ends:
                break
            found = (length, max(ends) + 1)
        out.append(found)
    return out


def lookup_keepable(history: Sequence[int], output: Sequence[int], k_max: int) -> list[int]:
    """For each position i of ``output``: how many of prompt lookup's next ``k_max`` tokens
    (from its source, among what was written by then) the target keeps. Position 0 is the
    prefill's."""
    text = [*history, *output]
    sources = lookup_sources(text, len(history) + 1)
    keep = [0]
    for i, (_, s) in enumerate(sources, start=1):
        if i >= len(output):
            break
        copied = text[s:min(s + k_max, len(history) + i)] if s >= 0 else []
        kept = 0
        while kept < len(copied) and i + kept < len(output) and copied[kept] == output[i + kept]:
            kept += 1
        keep.append(kept)
    return keep


def lookup_bound(history: Sequence[int], output: Sequence[int], cost: Callable[[int], float], k_max: int = 16) -> float:
    """The speedup over AR of prompt lookup that knew where each copy ends (see the module's
    docstring): the bound a draft length can reach with a lookup drafter's sources."""
    return planned_speedup(lookup_keepable(history, output, k_max), cost, k_max)


def cheapest(cost: Callable[[int], float], k_max: int) -> list[float]:
    """``[_, c(1), ..., c(k_max + 1)]`` where ``c(n)`` is the cheapest block that keeps n rows:
    a measured curve need not rise everywhere, and a plan may draft more than it keeps."""
    sizes = [cost(n) for n in range(1, k_max + 2)]
    for i in range(len(sizes) - 2, -1, -1):
        sizes[i] = min(sizes[i], sizes[i + 1])
    return [0.0, *sizes]


def copy_ceiling(history: Sequence[int], output: Sequence[int], cost: Callable[[int], float], k_max: int = 16) -> float:
    """The speedup over AR of the best copying plan (see the module docstring): a step at
    position i keeps d <= the longest copy there plus the target's own next token, for
    ``cost(d + 1)``; AR pays one per token. The first token comes from the prefill either way."""
    return planned_speedup(longest_copies(history, output, k_max), cost, k_max)


def planned_speedup(keepable: Sequence[int], cost: Callable[[int], float], k_max: int = 16) -> float:
    """The speedup over AR of the cheapest plan of blocks over an output where a block drafted
    at position i can keep at most ``keepable[i]`` drafted tokens (and the target's own next
    one), known in advance: ``copy_ceiling`` with the longest copies, or any drafter's
    proposals replayed with what each would have had accepted. Position 0 is the prefill's."""
    n = len(keepable)
    if n < 2:
        return 1.0
    block = cheapest(cost, k_max)
    best = [float("inf")] * (n + 1)
    best[1] = 0.0
    for i in range(1, n):
        for drafted in range(min(keepable[i], k_max) + 1):
            j = min(n, i + drafted + 1)
            best[j] = min(best[j], best[i] + block[drafted + 1])
    return (n - 1) / best[n]


def perfect_ceiling(n_tokens: int, cost: Callable[[int], float], k_max: int = 16) -> float:
    """The speedup over AR of a drafter that is never wrong, at the block size that pays best
    (a block of ``b`` rows, all kept, costs ``cost(b)``)."""
    n = n_tokens - 1
    if n < 1:
        return 1.0
    block = cheapest(cost, k_max)
    best = [0.0] + [float("inf")] * n
    for j in range(1, n + 1):
        best[j] = min(best[j - b] + block[b] for b in range(1, min(k_max + 1, j) + 1))
    return n / best[n]
