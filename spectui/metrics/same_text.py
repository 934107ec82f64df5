"""Rates over the same text: two greedy outputs that part are compared up to where they part.

What either run wrote after the parting is other work (a near-tie sent it elsewhere), so a rate
over it compares two texts. ``Output`` is what a comparison needs of a run: its token ids and
each token's emission time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from spectui.recording.schema import Event, Step


@dataclass(frozen=True)
class Output:
    tokens: list[int]
    t_us: list[int]  # each token's emission time

    @classmethod
    def of(cls, events: Iterable[Event]) -> Output:
        tokens: list[int] = []
        times: list[int] = []
        for ev in events:
            if type(ev) is Step:
                tokens += ev.tokens
                times += ev.t_us
        return cls(tokens, times)


def common_tokens(a: Sequence[object], b: Sequence[object]) -> int:
    """How many tokens (or characters) two sequences share from the start: where they part."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def decode_rate(t_us: Sequence[int], n: int) -> float:
    """Tokens a second over a run's first ``n`` tokens, the first one (prefill's) excluded."""
    n = min(n, len(t_us))
    if n < 2 or t_us[n - 1] <= t_us[0]:
        return float("nan")
    return (n - 1) / ((t_us[n - 1] - t_us[0]) / 1e6)


def same_text_ratio(run: Output, baseline: Output) -> tuple[float, int]:
    """``run``'s decode rate over ``baseline``'s on the tokens they share, and how many that is
    (every token when they do not part)."""
    n = common_tokens(run.tokens, baseline.tokens)
    if n == len(run.tokens) == len(baseline.tokens):
        n = len(run.tokens)
    b = decode_rate(baseline.t_us, n)
    return (decode_rate(run.t_us, n) / b if b == b and b > 0 else float("nan")), n


def speedup(run: Output, baseline: Output, *, greedy: bool) -> float:
    """``run``'s decode speedup over ``baseline``: over the same text where both are greedy,
    over the whole runs where sampled (sampled outputs differ by design)."""
    if greedy:
        return same_text_ratio(run, baseline)[0]
    b = decode_rate(baseline.t_us, len(baseline.t_us))
    return decode_rate(run.t_us, len(run.t_us)) / b if b == b and b > 0 else float("nan")
