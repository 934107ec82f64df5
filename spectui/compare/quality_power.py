"""Can a quality comparison resolve the brief's tolerance, and if not, how many runs would?

The gate judges quality as non-inferiority: the candidates' pass rate may fall at most
``tolerance`` points below the baselines', and it passes only when the lower end of the
difference's 95% interval (Newcombe's hybrid score interval, ``spectui.quality``) clears
``-tolerance``. At tens of runs a side that interval is tens of points wide, so "within
+-0.5 points" cannot be shown; ``runs_to_resolve`` says how many runs a side would show it if
the rates stayed as measured.
"""

from __future__ import annotations

from spectui.quality import PassRate, difference_interval

#: past this many runs a side the answer is "more than this" (the rates sit on the boundary)
MAX_RUNS = 10_000_000


def _lower_bound(b_rate: float, c_rate: float, n: int) -> float:
    return difference_interval(PassRate(round(b_rate * n), n), PassRate(round(c_rate * n), n))[0]


def runs_to_resolve(baseline: PassRate, candidate: PassRate, tolerance_points: float) -> int | None:
    """The fewest runs a side at which the measured rates' 95% lower bound of the difference
    clears ``-tolerance_points``; None when no number of runs can (the measured drop is already
    at or beyond the tolerance)."""
    b, c = baseline.rate, candidate.rate
    if not (b == b and c == c) or (c - b) * 100 <= -tolerance_points:
        return None
    lo = max(baseline.n, candidate.n, 1)
    if _lower_bound(b, c, lo) >= -tolerance_points:
        return lo
    hi = lo
    while _lower_bound(b, c, hi) < -tolerance_points:  # doubling, then bisection
        lo, hi = hi, hi * 2
        if hi > MAX_RUNS:
            return MAX_RUNS
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _lower_bound(b, c, mid) >= -tolerance_points:
            hi = mid
        else:
            lo = mid
    return hi
