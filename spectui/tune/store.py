"""The latest ``spectui tune`` result per target, kept in the user cache directory.

The dashboard's tune screen shows it without re-measuring; JSON as ``tune --json`` prints
it, one file per target key (``models.cost_curves.curve_key``); safe to delete.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from spectui.models.artifacts import cache_dir
from spectui.tune.report import to_json
from spectui.tune.runner import TuneResult


def result_path(key: str, *, cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / "tune" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


def save_result(result: TuneResult, *, cache: Path | None = None) -> Path | None:
    """Write ``result`` for its target (atomically); None when the cache is not writable."""
    path = result_path(result.key, cache=cache)
    doc = {"key": result.key, "measured_at": result.measured_at, **to_json(result)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc, indent=1, allow_nan=False))
        os.replace(tmp, path)
    except (OSError, ValueError):
        return None
    return path


def load_result(key: str, *, cache: Path | None = None) -> dict | None:
    """The latest result for ``key`` as ``tune --json`` prints it, or None."""
    try:
        doc = json.loads(result_path(key, cache=cache).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("key") == key else None
