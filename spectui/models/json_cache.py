"""Small JSON files in the user cache directory, keyed by string: read whole, replaced atomically.

Every such cache (verify-cost curves, batch-noise calibrations) is safe to delete and is
only ever a shortcut: an unreadable file reads as empty, and a read-only home only means
the next run measures again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TypeVar

import msgspec

from spectui.models.artifacts import cache_dir

T = TypeVar("T")


def cache_path(name: str, cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / name


def read_entries(name: str, cache: Path | None = None) -> dict[str, dict]:
    """Every entry of the cache file ``name`` (empty when missing or unreadable)."""
    try:
        known = json.loads(cache_path(name, cache).read_text())
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def read_entry(name: str, key: str, kind: type[T], cache: Path | None = None) -> T | None:
    """The entry ``key`` of the cache file ``name`` as a ``kind`` (a msgspec Struct), or None
    when there is none or it no longer has that shape (an older spectui's entry)."""
    raw = read_entries(name, cache).get(key)
    if raw is None:
        return None
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError:
        return None


def write_entry(name: str, key: str, value: object, cache: Path | None = None) -> None:
    """Store ``value`` under ``key`` (atomic: a concurrent run never reads half a file)."""
    known = read_entries(name, cache)
    known[key] = value
    path = cache_path(name, cache)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass
