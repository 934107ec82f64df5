"""The latest ``spectui tune`` result per target, kept in the user cache directory.

The dashboard's tune screen shows it without re-measuring, read back into a ``TuneResult``.
JSON as ``tune --json`` prints it (``report.to_json``), one file per target key
(``models.cost_curves.curve_key``); safe to delete. Written through ``spectui.storage``: atomic
(a kill leaves the previous result), private (0600 in a 0700 folder: a result may quote the
model's outputs), a damaged file moved aside and a file of another kind refused.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from spectui import file_kinds, storage
from spectui.paths import cache_dir
from spectui.tune.report import to_json
from spectui.tune.result import TuneResult

KIND = file_kinds.json_kind(
    "a spectui tune result", lambda doc: isinstance(doc, dict) and "key" in doc and "measured_at" in doc, private=True
)


def result_path(key: str, *, cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / "tune" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


def save_result(result: TuneResult, *, cache: Path | None = None) -> Path | None:
    """Write ``result`` for its target (atomically); None when the cache is not writable."""
    path = result_path(result.key, cache=cache)
    doc = {"key": result.key, "measured_at": result.measured_at, **to_json(result)}
    try:
        text = json.dumps(doc, indent=1, allow_nan=False)
        storage.write_atomic(path, text, KIND)
    except (OSError, ValueError):
        return None
    return path


def load_result(key: str, *, cache: Path | None = None) -> TuneResult | None:
    """The latest result for ``key``, or None (none stored, or a file that is no tune result:
    tuning again replaces it)."""
    try:
        doc = json.loads(result_path(key, cache=cache).read_text())
        if not (isinstance(doc, dict) and doc.get("key") == key):
            return None
        return TuneResult.from_json(doc)
    except (OSError, ValueError):
        return None
