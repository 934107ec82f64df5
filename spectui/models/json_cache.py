"""Small JSON files in the user cache directory, keyed by string: read whole, replaced atomically.

Every such cache (verify-cost curves, batch-noise calibrations, file fingerprints) is safe to
delete and is only ever a shortcut: a missing file reads as empty, and a read-only home only
means the next run measures again. Writes go through ``spectui.storage``: under a lock beside
the file, the current file is read again and the new entry merged in, then the file is
replaced atomically, so two spectuis at once keep both their entries. A damaged file is moved
aside (``NAME.corrupt-<time>``); a file of another kind at the path is refused (exit 2).
The entries hold numbers and file paths, no user text: normal file modes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

import msgspec

from spectui import file_kinds, storage
from spectui.paths import cache_dir

T = TypeVar("T")

#: the key that says which cache a file is (every other key is an entry)
MARK = "spectui-cache"


def _is_cache(doc: object) -> bool:
    # files from before the mark: an object of entries (dicts, or digests for fingerprints)
    return isinstance(doc, dict) and (isinstance(doc.get(MARK), str) or all(isinstance(v, (dict, str)) for v in doc.values()))


KIND = file_kinds.json_kind("a spectui cache file", _is_cache)


def cache_path(name: str, cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / name


def read_entries(name: str, cache: Path | None = None) -> dict[str, object]:
    """Every entry of the cache file ``name`` (empty when missing or unreadable)."""
    try:
        known = json.loads(cache_path(name, cache).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(known, dict):
        return {}
    known.pop(MARK, None)
    return known


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


def write_entry(name: str, key: str, value: object, cache: Path | None = None) -> bool:
    """Store ``value`` under ``key``: read-merge-write under a lock, replaced atomically.
    False when the cache cannot be written (read-only home, full disk): only a shortcut lost."""
    path = cache_path(name, cache)
    try:
        storage.prepare_dir(path.parent)
        with storage.locked(path):
            storage.claim(path, KIND)  # a damaged file moved aside; another kind refused
            known = read_entries(name, cache)
            known[key] = value
            storage.write_atomic(path, json.dumps({MARK: name, **known}, indent=1), KIND, claimed=True)
    except OSError:
        return False
    return True
