"""A started runtime's log: where it goes, and the line of it that says what went wrong."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from spectui import storage
from spectui.paths import cache_dir

#: Server logs without a recording to sit beside: the newest are kept.
KEEP_LOGS = 20


def read_all(path: Path, limit: int = 4 << 20) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def log_file(log_path: str | os.PathLike[str] | None, recording: str | os.PathLike[str] | None, name: str, log_folder: str) -> Path:
    """Where a start's log goes: ``log_path``, else beside ``recording`` (``NAME.<runtime>.log``),
    else ``log_folder`` under the user cache (the newest ``KEEP_LOGS`` kept); never over another run's log."""
    if log_path is not None:
        path = Path(log_path)
        storage.prepare_dir(path.parent)
        return path
    if recording is not None:
        rec = Path(recording)
        folder = storage.prepare_dir(rec.parent, private=True)
        base = f"{rec.stem}.{name}"
    else:
        folder = storage.prepare_dir(cache_dir() / log_folder, private=True)
        prune_logs(folder, name)
        base = f"{name}-{dt.datetime.now():%Y%m%d-%H%M%S}-{os.getpid()}"
    path = folder / f"{base}.log"
    n = 2
    while path.exists() and path.stat().st_size:  # never over another run's log
        path = folder / f"{base}-{n}.log"
        n += 1
    return path


def prune_logs(folder: Path, name: str) -> None:
    """The newest ``KEEP_LOGS`` kept; a log another spectui removed meanwhile is no failure."""
    storage.prune_oldest(folder, f"{name}-*.log", KEEP_LOGS)


def read_tail(path: Path, n: int = 16384) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


#: Words of a log line that says what went wrong: the first group names a cause, the second
#: often only that something failed ("failed to load model" after the "error loading model:
#: <why>" line), so a line of the first group wins.
_CAUSE = ("error", "abort", "assert", "exception", "invalid", "terminate", "unknown", "not supported")
_FAILED = ("failed", "couldn't", "cannot", "doesn't", "not found")
_GENERIC = ("exiting due to", "cleaning up before exit")


def last_log_line(path: str | os.PathLike[str]) -> str:
    """The last line of a server log that says what went wrong (else its last line)."""
    lines = [ln.strip() for ln in read_tail(Path(path)).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not any(g in ln for g in _GENERIC)] or lines
    for words in (_CAUSE, _FAILED):
        telling = [ln for ln in lines if any(w in ln.lower() for w in words)]
        if telling:
            return telling[-1][:300]
    return (lines or ["(the log is empty)"])[-1][:300]
