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

import datetime as dt
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from spectui import paths, storage
from spectui.errors import SpectuiError
from spectui.format import model_name
from spectui.history.labels import run_label
from spectui.recording.reader import Recording
from spectui.recording.schema import Header
from spectui.recording.writer import SUFFIX

#: Bumped whenever the table's columns or their meaning change: an index with another value is
#: rebuilt (it may come from an older spectui, or a newer one). 2: models by their file name.
#: 3: the OS a column of its own (``host_detail`` the rest). 4: each run's one label (``label``).
#: 5: watches (``spectui watch``) indexed too, by the server watched (``watch``).
INDEX_SCHEMA = 5
INDEX_FILE = "history.sqlite"
#: the file ``spectui sweep`` writes into its folder (``spectui.lab.sweep.MANIFEST``; lab sits
#: beside this package, so the name is repeated rather than imported)
SWEEP_MANIFEST = "sweep.json"
#: the file ``spectui workload`` writes into its folder (``spectui.workload.result.RESULT_NAME``;
#: the workload package sits above history, so the name is repeated rather than imported)
WORKLOAD_RESULT = "workload.json"
#: rows written per transaction while indexing: a crash loses at most this much work
_BATCH = 500
#: what may be at the index's path: an SQLite file with spectui's ``runs`` table (a corrupt
#: one is moved aside; any other file, a recording or a user's database, is refused)
INDEX_KIND = storage.sqlite_kind("a spectui history index", "runs", ("path", "size", "mtime_ns"), private=True)


def default_index_path() -> Path:
    """``history.sqlite`` in the user data directory (``spectui.paths``), beside the default
    recordings folder."""
    return paths.data_dir() / INDEX_FILE


@dataclass(slots=True)
class IndexedRun:
    """One recording as the index holds it. Numbers a run does not have are NaN."""

    path: str
    size: int = 0
    mtime_ns: int = 0
    note: str = ""  # non-empty: the file could not be read, and why (one line)
    started_at: str = ""  # ISO 8601 UTC, from the header
    host: str = ""  # the machine: CPU, cores, memory (a series never spans two)
    os: str = ""  # the OS release (what may change on one machine, with host_detail)
    host_detail: str = ""  # Python, GPU
    target_sha256: str = ""
    target_name: str = ""
    target_quant: str = ""
    backend: str = ""
    mode: str = ""
    drafter: str = ""  # "AR", "n-gram" or the draft model's file name
    draft_source: str = ""  # as the configuration names it: "ngram" or a path (sweep floors use it)
    draft_sha256: str = ""
    k: str = ""  # "K=4", "K=1..16 adaptive", "" for AR
    #: the run's one label, as the dashboard's header and compare columns give it
    #: (``history.labels.run_label``): "spec n-gram K=1..16 adaptive", "AR", ...
    label: str = ""
    k_value: int = 0
    sampling: str = ""
    prompt: str = ""  # the prompt's name, else a digest and its first words
    prompt_tier: str = ""
    runtime: str = ""  # JSON object, sorted keys: {"llama-cpp-python": "0.3.16", ...}
    chat_template: str = ""  # the target's chat template sha256
    spectui_version: str = ""
    sweep: str = ""  # the sweep folder holding this recording, "" if none
    n_tokens: int = 0
    complete: bool = False
    decode_tok_s: float = float("nan")
    acceptance: float = float("nan")
    itl_p95_ms: float = float("nan")
    ttft_ms: float = float("nan")
    peak_rss_bytes: float = float("nan")
    #: a watch's recording: the server watched ("llama-server at http://127.0.0.1:8080"); "" for a
    #: session. A watch's row: ``backend`` the server's kind, ``mode`` "watch", ``prompt`` its
    #: URL, ``target_name`` its model, ``runtime`` its build; ``decode_tok_s`` the tokens/s it
    #: generated over the watch (all its requests), ``acceptance`` its acceptance rate,
    #: ``peak_rss_bytes`` its process's peak RSS where read, ``n_tokens`` the tokens it generated
    watch: str = ""
    watch_seconds: float = float("nan")

    @property
    def readable(self) -> bool:
        return not self.note

    @property
    def is_watch(self) -> bool:
        return bool(self.watch)


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
        found = storage.classify(self.path, INDEX_KIND)
        if found == storage.FOREIGN:
            raise storage.refuse(self.path, INDEX_KIND)
        if found == storage.CORRUPT:
            self._move_aside("is corrupt (SQLite cannot read it)")
        try:
            if found == storage.MINE:
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
                rows = [_index_file(p, *found[p]) for p in stale[lo : lo + _BATCH]]
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


# -- one file --------------------------------------------------------------------------------


def _index_file(path: str, size: int, mtime_ns: int) -> IndexedRun:
    """The row of one recording; an unreadable file becomes a row with its reason."""
    from spectui.metrics.stats import summarize
    from spectui.recording.reader import read_recording

    run = IndexedRun(path=path, size=size, mtime_ns=mtime_ns)
    try:
        rec = read_recording(path)
    except SpectuiError as exc:
        run.note = str(exc).replace(path, "").strip(" :") or "unreadable"
        return run
    except OSError as exc:
        run.note = f"cannot read: {exc.strerror or exc}"
        return run
    if rec.header.watch is not None:
        fill_from_watch(run, rec)
        return run
    fill_from_header(run, rec.header)
    s = summarize(rec.events)
    run.n_tokens, run.complete = s.n_tokens, rec.complete
    run.decode_tok_s, run.acceptance, run.itl_p95_ms, run.ttft_ms = s.decode_tok_s, s.acceptance_rate, s.itl_p95_ms, s.ttft_ms
    run.peak_rss_bytes = float(s.peak_rss_bytes) if s.peak_rss_bytes else float("nan")
    folder = os.path.dirname(path)
    run.sweep = folder if os.path.isfile(os.path.join(folder, SWEEP_MANIFEST)) else ""
    return run


def parse_time(text: str) -> dt.datetime | None:
    """An ISO 8601 start time; naive ones are UTC (as the writer's are); None if unreadable."""
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.timezone.utc)


def fill_from_header(run: IndexedRun, h: Header) -> None:
    """The header's frozen facts as the index's columns (labels chosen once, here)."""
    import hashlib

    c, a = h.config, h.artifacts
    host = a.host
    memory = f", {host.total_memory_bytes / 2**30:.0f} GiB" if host.total_memory_bytes else ""
    run.host = f"{host.cpu or host.machine or 'unknown host'} x{host.cpu_count}{memory}"
    if h.node:  # a node's run (--host): the node's name leads, so two nodes alike never share a series
        run.host = f"{h.node}: {run.host}"
    run.os = host.os
    run.host_detail = ", ".join(x for x in (f"Python {host.python}" if host.python else "", host.gpu) if x)
    t = parse_time(h.started_at)  # one spelling (UTC, "+00:00"), so the text sorts by time
    run.started_at = t.astimezone(dt.timezone.utc).isoformat() if t is not None else h.started_at
    # the one display name every screen uses (format.model_name: the file's, not general.name)
    run.target_sha256, run.target_quant = a.target.sha256, a.target.quant
    run.target_name = model_name(a.target.path or c.target) if a.target.path or not a.target.name else a.target.name
    run.chat_template = a.target.chat_template_sha256
    run.backend, run.mode = c.backend.name, c.mode
    draft_path = a.draft.path if a.draft is not None else ""
    run.label = run_label(c, draft_path)
    if c.mode == "ar":
        run.drafter, run.k = "AR", ""
    elif c.backend.name == "server":  # the server drafts as it is configured: one series whatever ours said
        run.drafter, run.k = "server", ""
    else:
        d = c.draft
        name = os.path.basename(d.flag) if d.has_model else ""
        run.drafter = d.drafter_label if not d.has_model else model_name(draft_path or name)
        # k_value: a fixed K, what a sweep's floor is kept for (0: cost-aware, or the runtime's)
        run.draft_source, run.k, run.k_value = d.flag, d.k_label(), d.fixed_k or 0
        run.draft_sha256 = a.draft.sha256 if a.draft is not None else ""
    s = c.sampling
    run.sampling = "greedy" if s.greedy else f"T={s.temperature:g} top-k={s.top_k} top-p={s.top_p:g} seed={s.seed}"
    if c.prompt_name:
        run.prompt = c.prompt_name
    else:
        words = " ".join(c.prompt.split())
        digest = hashlib.sha256(c.prompt.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        run.prompt = f"{digest} {words[:24]}{'…' if len(words) > 24 else ''}"
    run.prompt_tier = c.prompt_tier
    run.runtime = json.dumps(dict(sorted(a.runtime.items())))
    run.spectui_version = h.spectui_version


def fill_from_watch(run: IndexedRun, rec: Recording) -> None:
    """A watch's row (``IndexedRun.watch``): grouped by the server, its figures the watch's."""
    from spectui.watch.record import read_watch
    from spectui.watch.summary import process_figures

    h = rec.header
    watch = read_watch(rec)
    info = watch.info
    host = h.artifacts.host
    run.host = f"{host.cpu or host.machine or 'unknown host'} x{host.cpu_count}"
    if h.node:
        run.host = f"{h.node}: {run.host}"
    run.os = host.os
    t = parse_time(h.started_at)
    run.started_at = t.astimezone(dt.timezone.utc).isoformat() if t is not None else h.started_at
    run.watch = f"{info.server} at {info.url}"
    run.backend, run.mode, run.label, run.prompt = info.server, "watch", f"watch of {info.server}", info.url
    run.target_name = info.identity.get("model", "")
    run.runtime = json.dumps({f"{info.server} build": info.identity["build"]} if info.identity.get("build") else {})
    run.spectui_version = h.spectui_version
    totals = watch.totals
    run.n_tokens, run.complete = int(totals.generated_tokens or 0), watch.end is not None
    run.watch_seconds = totals.seconds
    run.decode_tok_s = totals.generated_tok_s if totals.generated_tok_s is not None else float("nan")
    run.acceptance = totals.acceptance_rate if totals.acceptance_rate is not None else float("nan")
    proc = process_figures(watch)
    run.peak_rss_bytes = float(proc.peak_rss_bytes) if proc is not None else float("nan")
