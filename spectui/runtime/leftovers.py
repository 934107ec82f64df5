"""Folders a crashed run left half-made, removed at the next start: a source package's
unpacking (``.unpack-<pid>-*``) and an MLX export (``.<name>.<pid>.tmp``).

Only names spectui gives its own work-in-progress folders are looked at, and each carries the
id of the process that made it: a folder whose process is gone is a leftover; one whose process
lives (or may: another user's, whose liveness is not ours to see) is left alone, since another
spectui may be writing it right now. A process id the system has given out again since only
delays the removal to a later start. A name without a readable id (an older spectui's) is
removed once it is a day old: no unpacking or export takes that long.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

#: how old a leftover whose name carries no process id must be before it is removed
STALE_AFTER_S = 24 * 3600.0


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user's counts: it may be at work)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers(folder: Path, pattern: re.Pattern[str], *, now: float | None = None) -> list[Path]:
    """Remove the folders in ``folder`` whose names match ``pattern`` (its ``pid`` group the
    maker's process id, optional) and whose maker is gone; the ones removed."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    now = time.time() if now is None else now
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if m is None or not entry.is_dir(follow_symlinks=False):
            continue
        pid = m.groupdict().get("pid")
        if pid is not None:
            if process_alive(int(pid)):
                continue
        else:
            try:
                if now - entry.stat(follow_symlinks=False).st_mtime < STALE_AFTER_S:
                    continue
            except OSError:
                continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed
