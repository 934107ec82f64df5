"""The SQLite index of recordings: one row per file, refreshed by path, size and mtime.

Reading a recording and summarising it costs a few milliseconds; a nightly node collects
thousands. The index keeps what ``history`` needs of each file (its frozen artifacts, its
configuration and the five numbers the trends plot) so a second look reads only the files
that are new or changed since the last one, and forgets the ones that are gone.

The index is a cache, never the only copy of anything, and never replaces what it did not
write: at its path, a file of another kind (a recording, a user's own database) is refused in
one line (exit 2) and left as it is; a damaged index is moved aside (``NAME.corrupt-<time>``)
and one written with another ``INDEX_SCHEMA`` has its tables rebuilt from the recordings in
one transaction, each with one line saying why. WAL mode and a busy timeout let two spectuis
use it at once; it quotes prompts' first words, so it is private (0600 in a 0700 folder). A recording that cannot be read is kept as a row with
its reason (``note``), so it is not re-read each time and still gets its one-line note.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from spectui import file_kinds, paths, storage
from spectui.errors import SpectuiError
from spectui.history.row import IndexedRun, index_file
from spectui.recording.writer import SUFFIX

#: Bumped whenever the table's columns or their meaning change: an index with another value is
#: rebuilt (it may come from an older spectui, or a newer one). 2: models by their file name.
#: 3: the OS a column of its own (``host_detail`` the rest). 4: each run's one label (``label``).
#: 5: watches (``spectui watch``) indexed too, by the server watched (``watch``).
INDEX_SCHEMA = 5
INDEX_FILE = "history.sqlite"
#: the file ``spectui workload`` writes into its folder (``spectui.workload.result.RESULT_NAME``;
#: the workload package sits above history, so the name is repeated rather than imported)
WORKLOAD_RESULT = "workload.json"
#: rows written per transaction while indexing: a crash loses at most this much work
_BATCH = 500
#: what may be at the index's path: an SQLite file with spectui's ``runs`` table (a corrupt
#: one is moved aside; any other file, a recording or a user's database, is refused)
INDEX_KIND = file_kinds.sqlite_kind("a spectui history index", "runs", ("path", "size", "mtime_ns"), private=True)


def default_index_path() -> Path:
    """``history.sqlite`` in the user data directory (``spectui.paths``), beside the default
    recordings folder."""
    return paths.data_dir() / INDEX_FILE


_COLUMNS = [f.name for f in fields(IndexedRun)]
_FLOAT_COLUMNS = [f.name for f in fields(IndexedRun) if f.type in ("float", float)]


def _create_sql() -> str:
    cols = []
    for f in fields(IndexedRun):
        kind = {"int": "INTEGER", "float": "REAL", "bool": "INTEGER"}.get(str(f.type), "TEXT")
        cols.append(f"{f.name} {kind}{' PRIMARY KEY' if f.name == 'path' else ''}")
    return f"CREATE TABLE IF NOT EXISTS runs ({', '.join(cols)})"


@dataclass
class IndexUpdate:
    """What one refresh did, and the one-line notes for the user."""

    index_path: str
    found: int = 0
    read: int = 0
    unchanged: int = 0
    removed: int = 0
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


class HistoryIndex:
    """The index file, open. ``refresh(folders)`` brings it up to date; ``runs(folders)`` lists."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_index_path()
        self.notes: list[str] = []  # a rebuild's reason, for the next IndexUpdate
        self.db = self._open()

    # -- opening, checking, rebuilding -------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        # Never replace a file that is not an index (a recording given to --index by a slip):
        # refuse it in one line; a damaged index is moved aside as NAME.corrupt-<time>, never
        # deleted (``spectui.storage``).
        if self.path.is_dir():
            raise SpectuiError(f"--index {self.path} is a folder; give a file path")
        try:
            storage.prepare_dir(self.path.parent, private=True, own=self.path.parent == paths.data_dir())
        except OSError as exc:
            if self._read_only():
                return self._in_memory(exc.strerror or str(exc))
            raise SpectuiError(f"cannot create the folder of the history index {self.path}: {exc.strerror or exc}") from None
        found = file_kinds.classify(self.path, INDEX_KIND)
        if found == file_kinds.FOREIGN:
            raise file_kinds.refuse(self.path, INDEX_KIND)
        if found == file_kinds.CORRUPT:
            self._move_aside("is corrupt (SQLite cannot read it)")
        try:
            if found == file_kinds.MINE:
                storage.tighten(self.path)  # the rows quote prompts' first words
            else:
                os.close(storage.create_new(self.path, private=True))  # 0600 before SQLite opens it
        except FileExistsError:
            pass  # another spectui created it this instant: SQLite's locks take over
        except OSError as exc:
            if self._read_only():
                return self._in_memory(exc.strerror or str(exc))
            raise SpectuiError(f"cannot create the history index {self.path}: {exc.strerror or exc}") from None
        try:
            db = sqlite3.connect(self.path, timeout=30)
            # two spectuis at once (a dashboard and a sweep): readers never block the writer
            db.execute("PRAGMA busy_timeout = 30000")
            db.execute("PRAGMA journal_mode = WAL")
        except sqlite3.Error as exc:
            if self._read_only():
                return self._in_memory(str(exc))
            raise SpectuiError(f"cannot open the history index {self.path}: {exc}") from None
        why = self._problem(db)
        if why is not None:
            self.notes.append(f"history index {self.path} {why}; rebuilding it from the recordings")
        return self._create(db, rebuild=why is not None)

    @staticmethod
    def _problem(db: sqlite3.Connection) -> str | None:
        """Why an existing index cannot be used as it is (None: it can, or it is new)."""
        try:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables:
                return None  # new (or emptied): created below
            row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() if "meta" in tables else None
        except sqlite3.DatabaseError as exc:
            return f"is corrupt ({exc})"
        if row is None or row[0] != str(INDEX_SCHEMA):
            if row is None and "meta" not in tables:
                return "was built by an older spectui (no schema version)"
            found = row[0] if row is not None else "?"
            older = not found.isdigit() or int(found) < INDEX_SCHEMA
            return f"was built by {'an older' if older else 'a newer'} spectui (index schema {found}, this one writes {INDEX_SCHEMA})"
        return None

    def _create(self, db: sqlite3.Connection, *, rebuild: bool = False) -> sqlite3.Connection:
        """The tables, in one transaction: a rebuild drops the old ones inside it, so a kill
        leaves the old index or the new one (the file is spectui's own cache: replacing its
        tables loses nothing the recordings do not hold)."""
        from spectui import __version__

        try:
            with db:
                db.execute("BEGIN IMMEDIATE")  # two spectuis creating at once take turns
                if rebuild:
                    db.execute("DROP TABLE IF EXISTS runs")
                    db.execute("DROP TABLE IF EXISTS meta")
                db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
                db.executemany(
                    "INSERT OR IGNORE INTO meta VALUES (?, ?)", [("schema", str(INDEX_SCHEMA)), ("spectui_version", __version__)]
                )
                db.execute(_create_sql())
        except sqlite3.DatabaseError as exc:
            db.close()
            if rebuild or "corrupt" not in str(exc) and "malformed" not in str(exc):
                raise SpectuiError(f"cannot write the history index {self.path}: {exc}") from None
            self._move_aside(f"is corrupt ({exc})")
            return self._open()
        return db

    def _read_only(self) -> bool:
        """The index's folder cannot be written (a read-only mount, another user's folder); a
        full disk is not this: it is an error the user should see."""
        folder = self.path.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        return not os.access(folder, os.W_OK)

    def _in_memory(self, why: str) -> sqlite3.Connection:
        """The report still works where the index cannot be written: every recording is read
        into a throwaway index, and the file (if any) is left as it is."""
        self.notes.append(f"cannot write the history index {self.path} ({why}); read every recording instead, nothing saved")
        return self._create(sqlite3.connect(":memory:"))

    def _move_aside(self, why: str) -> None:
        aside = storage.move_aside(self.path, why, say=False)
        self.notes.append(f"history index {self.path} {why}; moved it aside to {aside.name} and rebuilt it from the recordings")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> HistoryIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- refreshing ----------------------------------------------------------------------------

    def refresh(self, folders: Sequence[str | os.PathLike[str]]) -> IndexUpdate:
        """Index every recording under ``folders`` (files given directly count too): read the
        new and changed ones, drop the rows of files gone from them."""
        t0 = time.perf_counter()
        roots = [os.path.abspath(os.fspath(f)) for f in folders]
        update = IndexUpdate(index_path=str(self.path), notes=list(self.notes))
        self.notes.clear()
        found = _find_recordings(roots, update.notes)
        update.found = len(found)
        known = {p: (s, m) for p, s, m in self.db.execute("SELECT path, size, mtime_ns FROM runs")}
        stale = [p for p, stat in found.items() if known.get(p) != stat]
        update.unchanged = len(found) - len(stale)
        gone = [p for p in known if p not in found and _under(p, roots)]
        insert = f"INSERT OR REPLACE INTO runs ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
        try:
            with self.db:
                self.db.executemany("DELETE FROM runs WHERE path = ?", [(p,) for p in gone])
            for lo in range(0, len(stale), _BATCH):
                rows = [index_file(p, *found[p]) for p in stale[lo : lo + _BATCH]]
                with self.db:
                    self.db.executemany(insert, [[getattr(r, c) for c in _COLUMNS] for r in rows])
                storage.fault_point("index-batch")  # the fault tests kill a rebuild here
        except sqlite3.Error as exc:
            raise SpectuiError(f"cannot write the history index {self.path}: {exc}") from None
        update.read, update.removed = len(stale), len(gone)
        update.notes += [f"{r.path}: {r.note}" for r in self.runs(roots) if r.note]
        update.seconds = time.perf_counter() - t0
        return update

    def runs(self, folders: Sequence[str | os.PathLike[str]] | None = None) -> list[IndexedRun]:
        """Every indexed run under ``folders`` (all of them for None), oldest first."""
        roots = None if folders is None else [os.path.abspath(os.fspath(f)) for f in folders]
        out = []
        for row in self.db.execute(f"SELECT {', '.join(_COLUMNS)} FROM runs ORDER BY started_at, path"):
            run = IndexedRun(**dict(zip(_COLUMNS, row)))
            if roots is not None and not _under(run.path, roots):
                continue
            for name in _FLOAT_COLUMNS:  # SQLite keeps NaN as NULL
                if getattr(run, name) is None:
                    setattr(run, name, float("nan"))
            run.complete = bool(run.complete)
            out.append(run)
        return out


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def _find_recordings(roots: Sequence[str], notes: list[str]) -> dict[str, tuple[int, int]]:
    """Every ``*.spectui`` file under the roots: path -> (size, mtime_ns). A folder that cannot
    be listed is one note; the walk goes on."""
    found: dict[str, tuple[int, int]] = {}

    def unreadable(exc: OSError) -> None:
        notes.append(f"cannot read folder {exc.filename}: {exc.strerror or exc}")

    for root in roots:
        if os.path.isfile(root):
            st = os.stat(root)
            found[root] = (st.st_size, st.st_mtime_ns)
            continue
        if not os.path.isdir(root):
            notes.append(f"no such folder: {root}")
            continue
        for folder, dirs, files in os.walk(root, onerror=unreadable):
            if WORKLOAD_RESULT in files:
                dirs[:] = []  # a workload's requests are its series' parts (``spectui.workload.history``), not runs
                continue
            for name in files:
                if not name.endswith(SUFFIX):
                    continue
                path = os.path.join(folder, name)
                try:
                    st = os.stat(path)
                except OSError as exc:
                    notes.append(f"cannot read {path}: {exc.strerror or exc}")
                    continue
                found[path] = (st.st_size, st.st_mtime_ns)
    return found
