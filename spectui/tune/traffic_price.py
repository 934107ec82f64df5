"""Pricing a setting on the tuning half from what its drafter would do there, before running it.

Greedy speculation writes AR's own tokens, so a replay of the runtime's drafter over AR's output
(``spectui.runtime.spec_replay``) says exactly how many target passes a setting needs and how many
tokens each pass verifies: on mixed-12 and document-qa at one client, the replay's drafted and
accepted counts equalled llama-server's own, request for request, on every one of ten settings.
What the counts leave open is the price of a verified token, which is the host's. A request's
time is priced as

    AR's time to its first token + a * sum over passes (1 + beta * drafted tokens of the pass)

with ``a`` the request's own AR time per token (its AR run, at the load asked) and ``beta`` what
one drafted token adds to a pass, relative to a pass of one token. ``beta`` is fitted on the
settings run for real (``fit_beta``): each run's summed time says which ``beta`` would have
priced it exactly, and the median over runs is taken. Before any run, ``beta`` is 0: the setting
that needs the fewest passes runs first, and its long drafts are what measure ``beta`` best.

On document-qa's grid (83 settings, two runs each), prices from the server's own counts with one
``beta`` ranked the settings at Spearman 0.78 against their measured speedups, and the setting
priced best measured 1.36x where the grid's best measured 1.37x: a screen with no timing noise
in it, where two runs of each of 83 settings cost thirty minutes.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from spectui.runtime.spec_replay import Counts


@dataclass(frozen=True)
class ArRequest:
    """One tuning-half request as AR ran it: time to its first token, its time per later token."""

    ttft_ms: float
    ms_per_token: float
    n_tokens: int

    @property
    def total_ms(self) -> float:
        return self.ttft_ms + self.ms_per_token * max(self.n_tokens - 1, 0)


def ar_request(token_ms: Sequence[float]) -> ArRequest | None:
    """From a request's arrival times (ms from sending); None without two tokens."""
    if len(token_ms) < 2:
        return None
    return ArRequest(ttft_ms=token_ms[0], ms_per_token=(token_ms[-1] - token_ms[0]) / (len(token_ms) - 1), n_tokens=len(token_ms))


def passes_and_drafted(counts: Sequence[Counts]) -> tuple[int, int]:
    return sum(c.passes for c in counts), sum(c.drafted for c in counts)


def priced_ms(ar: Sequence[ArRequest | None], counts: Sequence[Counts], beta: float) -> tuple[float, float]:
    """(AR's summed time, the setting's priced summed time) over the requests both know."""
    ar_ms = spec_ms = 0.0
    for a, c in zip(ar, counts):
        if a is None:
            continue
        ar_ms += a.total_ms
        spec_ms += a.ttft_ms + a.ms_per_token * (c.passes + beta * c.drafted)
    return ar_ms, spec_ms


def priced_speedup(ar: Sequence[ArRequest | None], counts: Sequence[Counts], beta: float) -> float:
    ar_ms, spec_ms = priced_ms(ar, counts, beta)
    return ar_ms / spec_ms if spec_ms > 0 else math.nan


def beta_of_run(ar: Sequence[ArRequest | None], counts: Sequence[Counts], speedup: float) -> float:
    """The ``beta`` that prices one measured run exactly: its speedup over its AR pairing says
    what its summed time was in AR's time; what the passes do not explain is the drafted tokens'.
    NaN where the run drafted nothing or measured nothing."""
    if not (math.isfinite(speedup) and speedup > 0):
        return math.nan
    ar_ms, _ = priced_ms(ar, counts, 0.0)
    base = sum(a.ttft_ms + a.ms_per_token * c.passes for a, c in zip(ar, counts) if a is not None)
    drafted = sum(a.ms_per_token * c.drafted for a, c in zip(ar, counts) if a is not None)
    if drafted <= 0:
        return math.nan
    return (ar_ms / speedup - base) / drafted


def fit_beta(betas: Sequence[float]) -> float:
    """The median of the runs' own ``beta`` (never below 0: a drafted token costs something);
    0 before any run drafted."""
    known = [b for b in betas if math.isfinite(b)]
    return max(0.0, statistics.median(known)) if known else 0.0
