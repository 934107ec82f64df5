"""What proposals of a model and drafter were worth in earlier runs: the calibration a
cost-aware K starts from (``engine/loop/pricing.py``), kept between runs.

How often a lookup proposal of each class is accepted, position by position, is a property
of the model and the drafter far more than of one prompt: a fresh run that starts from the
static prior pays its first blocks to learn what the last run knew. So each run's evidence is
folded into one entry per target file (its sha256: a requantized copy is another entry) and
drafter, which the next run starts from, weighted down to ``STORED_WEIGHT`` observations a
cell so that the run's own evidence soon outweighs it.

One JSON file in the user cache directory (``proposal-prices.json``), through
``spectui.storage``: the entry is merged under the file's lock from what is on disk at that
moment, so two runs finishing at once both count, and the file is replaced atomically. Safe
to delete: runs fall back to the static prior. Runs priced by their seed alone
(``--deterministic``) neither read nor write it: their blocks follow from their output and the
curve their header records, as tune's replays assume.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import msgspec

from spectui import storage
from spectui.models.json_cache import KIND, MARK, cache_path, read_entries, read_entry

CACHE_NAME = "proposal-prices.json"
#: weight the stored counts keep against a new run's: the stored calibration follows what the
#: model and drafter do lately, not on the first day
KEEP = 0.8
#: tries kept per cell at most (counts are scaled down past it): a cell never gets so heavy
#: that a change of the model's habits cannot move it within a few runs
CAP = 400.0


class ProposalPrices(msgspec.Struct, frozen=True, kw_only=True):
    """Accepted and tried per cell (``"class.group"``), over the runs so far, decayed."""

    cells: dict[str, tuple[float, float]] = msgspec.field(default_factory=dict)
    runs: int = 0
    updated_at: str = ""


def prices_key(target_sha256: str, drafter: str) -> str:
    return f"{target_sha256}|{drafter}"


def load_prices(key: str, *, cache: Path | None = None) -> dict[str, tuple[float, float]]:
    """The stored cells for ``key`` (empty: none yet, or an unreadable cache)."""
    prices = read_entry(CACHE_NAME, key, ProposalPrices, cache)
    return dict(prices.cells) if prices is not None else {}


def merge(old: dict[str, tuple[float, float]], run: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """``old`` decayed by ``KEEP`` plus a run's counts, each cell capped at ``CAP`` tries."""
    out: dict[str, tuple[float, float]] = {}
    for name in sorted({*old, *run}):
        hits, tries = old.get(name, (0.0, 0.0))
        hits, tries = KEEP * hits, KEEP * tries
        new = run.get(name)
        if new is not None:
            hits, tries = hits + new[0], tries + new[1]
        if tries > CAP:
            hits, tries = hits * CAP / tries, CAP
        if tries > 0 and math.isfinite(hits) and math.isfinite(tries) and 0 <= hits <= tries:
            out[name] = (round(hits, 3), round(tries, 3))
    return out


def save_prices(key: str, run: dict[str, tuple[float, float]], *, cache: Path | None = None) -> bool:
    """Fold a run's counts into the entry for ``key``: read, merged and written under the
    file's lock, replaced atomically. False when nothing was written (nothing observed, or
    the cache cannot be written: only a head start lost)."""
    if not any(tries > 0 for _, tries in run.values()):
        return False
    path = cache_path(CACHE_NAME, cache)
    try:
        storage.prepare_dir(path.parent)
        with storage.locked(path):
            storage.claim(path, KIND)  # a damaged file moved aside; another kind refused
            known = read_entries(CACHE_NAME, cache)
            try:
                old = msgspec.convert(known.get(key), ProposalPrices) if key in known else ProposalPrices()
            except msgspec.ValidationError:
                old = ProposalPrices()  # an older spectui's entry: start over
            prices = ProposalPrices(cells=merge(dict(old.cells), run), runs=old.runs + 1,
                                    updated_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
            known[key] = msgspec.to_builtins(prices)
            storage.write_atomic(path, json.dumps({MARK: CACHE_NAME, **known}, indent=1), KIND, claimed=True)
    except OSError:
        return False
    return True
