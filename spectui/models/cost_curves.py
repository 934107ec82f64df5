"""Measured verify-cost curves, cached per model, backend and thread count on this host.

What a block of n tokens costs against one token decides which draft length pays (the
weight format alone moves it 2x on a CPU: docs/guide/tune.md), and it is a property of this model on
this machine, not of a prompt. ``spectui tune`` measures the curve and stores it here; a
speculative run whose K is cost-aware starts from it (``Pricing.seed``) and, when
tune has not run, leaves what it measured itself for the next run.

One JSON file in the user cache directory, keyed by the model's sha256 and the settings
that change the curve; safe to delete (runs fall back to the built-in cost model).
"""

from __future__ import annotations

import math
from pathlib import Path

import msgspec

from spectui.models.json_cache import read_entry, write_entry

CACHE_NAME = "verify-cost.json"
#: weight a run's own measurement gets against the curve earlier runs left (tune's is kept)
RUN_WEIGHT = 0.3


class CostCurve(msgspec.Struct, frozen=True, kw_only=True):
    """``relative[n - 1]``: time to evaluate n tokens at once / time of one token."""

    relative: tuple[float, ...]
    unit_us: float = math.nan  # one token's evaluation, at ``depth``
    depth: int = 0
    #: "tune" (measured on purpose, every size) or "runs" (left by speculative runs)
    source: str = "tune"
    measured_at: str = ""


def curve_key(sha256: str, backend: str, n_threads: int, n_gpu_layers: int) -> str:
    return f"{sha256}|{backend}|t{n_threads}|g{n_gpu_layers}"


def load_curve(key: str, *, cache: Path | None = None) -> CostCurve | None:
    """The cached curve for ``key``, or None (none yet, or an unreadable cache)."""
    curve = read_entry(CACHE_NAME, key, CostCurve, cache)
    if curve is None:
        return None
    ok = curve.relative and curve.relative[0] == 1.0 and all(c > 0 and math.isfinite(c) for c in curve.relative)
    return curve if ok else None


def save_curve(key: str, curve: CostCurve, *, cache: Path | None = None) -> None:
    """Store ``curve`` under ``key`` (atomic: concurrent runs never see half a file)."""
    # a read-only home only means the next run starts from the cost model
    write_entry(CACHE_NAME, key, msgspec.to_builtins(curve), cache)


def merge_run_curve(key: str, measured: dict[int, float], *, cache: Path | None = None) -> None:
    """Fold a run's own relative costs (block size -> cost) into the cache, unless tune's
    curve is there (measured on purpose, it stays). Sizes the run did not measure keep what
    earlier runs left, or are interpolated from the sizes around them."""
    # a block of n costs at least one token and, batched or not, not much more than n of them
    measured = {n: min(max(c, 1.0), 1.25 * n) for n, c in measured.items() if n >= 1 and c > 0 and math.isfinite(c)}
    if len(measured) < 2:
        return
    old = load_curve(key, cache=cache)
    if old is not None and old.source == "tune":
        return
    top = max(max(measured), len(old.relative) if old else 0)
    prior = dict(enumerate(old.relative, start=1)) if old else {}
    merged: dict[int, float] = {1: 1.0}
    for n in range(2, top + 1):
        if n in measured and n in prior:
            merged[n] = prior[n] + RUN_WEIGHT * (measured[n] - prior[n])
        elif n in measured:
            merged[n] = measured[n]
        elif n in prior:
            merged[n] = prior[n]
    sizes = sorted(merged)
    relative = tuple(_interpolate(merged, sizes, n) for n in range(1, top + 1))
    save_curve(key, CostCurve(relative=relative, source="runs"), cache=cache)


def _interpolate(points: dict[int, float], sizes: list[int], n: int) -> float:
    if n in points:
        return points[n]
    below = max(s for s in sizes if s < n)
    above = min((s for s in sizes if s > n), default=None)
    if above is None:
        return points[below] * n / below
    w = (n - below) / (above - below)
    return points[below] + w * (points[above] - points[below])
