"""What a file at a path is, before spectui writes there: a ``Kind`` says whether an existing
file is spectui's own of the kind expected (MINE), something else (FOREIGN: a user's database,
a model, a recording where an index was asked for), or its own but unreadable (CORRUPT), from
its first bytes and, where they are not enough, a read of the whole. ``spectui.storage`` acts on
the answer (uses, refuses, or moves aside); refusals name what the file is (``describe``).

The bottom layer: it imports only the standard library and ``spectui.errors``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spectui.errors import SpectuiError

#: how much of an existing file is read to tell what it is
_HEAD_BYTES = 1 << 16

MINE, FOREIGN, CORRUPT = "mine", "foreign", "corrupt"


@dataclass(frozen=True)
class Kind:
    """What spectui expects at a path. ``check(path, head)`` says MINE, FOREIGN or CORRUPT (its
    kind, but unreadable) for an existing non-empty file; ``private``: it holds user text."""

    what: str
    check: Callable[[Path, bytes], str]
    private: bool = False


def magic_kind(what: str, magic: bytes, *, private: bool = False, valid: Callable[[Path], bool] | None = None) -> Kind:
    """Files that start with ``magic``; ``valid`` (optional) tells a readable one from a corrupt one."""

    def check(path: Path, head: bytes) -> str:
        if not head.startswith(magic):
            return FOREIGN
        return MINE if valid is None or valid(path) else CORRUPT

    return Kind(what, check, private)


def json_kind(what: str, is_mine: Callable[[object], bool], *, private: bool = False) -> Kind:
    """A JSON document ``is_mine`` recognises; text that starts like JSON but does not parse is
    a torn or damaged one of ours (CORRUPT), anything else FOREIGN."""

    def check(path: Path, head: bytes) -> str:
        if head.lstrip()[:1] not in (b"{", b"["):
            return FOREIGN
        try:
            doc = json.loads(path.read_bytes())
        except (ValueError, UnicodeDecodeError):
            return CORRUPT
        return MINE if is_mine(doc) else FOREIGN

    return Kind(what, check, private)


def jsonl_kind(what: str, is_mine: Callable[[object], bool], *, private: bool = False) -> Kind:
    """JSON lines whose first line ``is_mine`` recognises."""

    def check(path: Path, head: bytes) -> str:
        first = head.split(b"\n", 1)[0]
        if first.lstrip()[:1] != b"{":
            return FOREIGN
        try:
            doc = json.loads(first)
        except (ValueError, UnicodeDecodeError):
            return CORRUPT if b"\n" not in head else FOREIGN
        return MINE if is_mine(doc) else FOREIGN

    return Kind(what, check, private)


SQLITE_MAGIC = b"SQLite format 3\x00"


def sqlite_kind(what: str, table: str, columns: tuple[str, ...], *, private: bool = False) -> Kind:
    """An SQLite database holding ``table`` with ``columns``: another database is FOREIGN (a
    user's own), one whose header is right but that cannot be read is CORRUPT."""

    def check(path: Path, head: bytes) -> str:
        if not head.startswith(SQLITE_MAGIC):
            return FOREIGN
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
            try:
                db.execute("PRAGMA busy_timeout = 30000")
                found = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
                # no tables at all: a database another spectui is creating this instant (or
                # an empty one): nothing in it to lose
                empty = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
            finally:
                db.close()
        except sqlite3.DatabaseError as exc:
            # only a file SQLite calls damaged is; locked, busy, a full disk or a read-only
            # folder say nothing about the file, and the real open reports them in one line
            text = str(exc)
            return CORRUPT if "malformed" in text or "not a database" in text or "corrupt" in text else MINE
        return MINE if empty or set(columns) <= found else FOREIGN

    return Kind(what, check, private)


_KNOWN_MAGIC = [
    (b"SPECTUI", "a spectui recording"),
    (SQLITE_MAGIC, "an SQLite database"),
    (b"GGUF", "a GGUF model"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\x7fELF", "a program"),
]


def describe(head: bytes) -> str:
    """A few words on what a file is, for a refusal."""
    for magic, words in _KNOWN_MAGIC:
        if head.startswith(magic):
            return words
    if head.lstrip()[:1] in (b"{", b"["):
        return "a JSON file of something else"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return "a binary file of something else"
    return "a text file"


def recognisable(head: bytes) -> bool:
    """Whether ``head`` says what it is (a known format, JSON, text), as opposed to bytes that
    say nothing: at a path only spectui names (a cache file), the latter is damage of its own."""
    return describe(head) != "a binary file of something else"


def head_of(path: Path) -> bytes | None:
    """The first bytes of ``path``; None when there is nothing there (missing or empty)."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise SpectuiError(f"{path} is a folder; spectui needs a file path there") from None
    except OSError as exc:
        raise SpectuiError(f"cannot read {path}: {exc.strerror or exc}") from None
    return head or None


def classify(path: str | os.PathLike[str], kind: Kind) -> str | None:
    """None (nothing there, or an empty placeholder), MINE, FOREIGN or CORRUPT."""
    path = Path(path)
    head = head_of(path)
    return None if head is None else kind.check(path, head)


def refuse(path: Path, kind: Kind, head: bytes | None = None) -> SpectuiError:
    head = head_of(path) if head is None else head
    return SpectuiError(f"{path} is {describe(head or b'')}, not {kind.what}; spectui leaves it as it is (give another path)")
