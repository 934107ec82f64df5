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

``spectui tune`` shows both per tier beside its best setting: a setting close to the copying
ceiling has nothing left to gain from drafting better; only cheaper verification (other
weights, other hardware) or a different kind of drafter moves it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


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
