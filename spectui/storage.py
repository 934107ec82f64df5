"""The one way spectui writes a file it owns: checked, atomic, private where it holds text.

Every cache, index, memory, result and output spectui writes goes through here (each is listed,
with where it lives and what survives what, in docs/reference/files.md), and follows one rule:

* It never replaces a file it did not make. Before an existing path is replaced or opened for writing,
  ``claim`` looks at it: a file of the expected kind is used; a file of another kind (a recording
  where an index was asked for, a user's database, a model) is refused with one line
  (``SpectuiError``, exit 2) and left byte-identical; a file of the expected kind that cannot be
  read is moved aside as ``NAME.corrupt-<time>`` (never deleted) and the move is said.
* A write is atomic: a temporary file in the same folder, fsync, ``os.replace``, fsync of the folder;
  a kill at any instant leaves the old version or the new one, never half of either, and a full
  disk leaves the old version and an error.
* Files that hold what people typed or what a model answered (recordings, chat folders, the draft
  memory, tune results, the history index) are created 0600 in 0700 folders whatever the umask,
  as ssh and shell history files are; an existing one spectui writes again is tightened, with one
  line saying so. Caches without text keep the umask's modes.
* ``locked`` serialises read-merge-write cycles between processes (two dashboards, a dashboard and
  a sweep) so neither drops the other's entries; ``prune_oldest`` keeps a folder's newest files.

What a file at a path is (a ``Kind``: spectui's own, another's, or its own but unreadable) is
``spectui.file_kinds``'s to say; this module acts on it. The bottom layer: it imports only the
standard library, ``spectui.file_kinds`` and ``spectui.errors``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fnmatch
import os
import signal
import stat
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from spectui.errors import SpectuiError
from spectui.file_kinds import CORRUPT, FOREIGN, Kind, head_of, refuse

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700

#: Test hook: ``SPECTUI_FAULT_KILL=<point>[@N]`` (a glob such as ``write:*.json`` or
#: ``index-batch``) makes the process SIGKILL itself at that point, so the fault tests kill
#: the real command in the middle of a real write rather than guessing the moment.
FAULT_ENV = "SPECTUI_FAULT_KILL"


class StorageNotice(UserWarning):
    """Something spectui did to a file of its own that the user should hear about (a corrupt
    file moved aside, a file's permissions tightened); the message is one line."""


def notice(line: str) -> None:
    warnings.warn(f"spectui: {line}", StorageNotice, stacklevel=3)


_fault_hits = 0


def fault_point(point: str) -> None:
    """Kill this process here when the fault tests ask for ``point`` (see ``FAULT_ENV``);
    ``point@N`` kills at its Nth passage (a sweep's second manifest, say)."""
    global _fault_hits
    wanted = os.environ.get(FAULT_ENV)
    if not wanted:
        return
    pattern, _, nth = wanted.partition("@")
    if fnmatch.fnmatchcase(point, pattern):
        _fault_hits += 1
        if _fault_hits >= int(nth or 1):
            os.kill(os.getpid(), signal.SIGKILL)


def claim(path: str | os.PathLike[str], kind: Kind) -> bool:
    """Make ``path`` safe to write as ``kind``: True when a usable file of that kind is there,
    False when nothing is (a corrupt one was moved aside); ``SpectuiError`` for another kind."""
    path = Path(path)
    head = head_of(path)
    if head is None:
        return False
    found = kind.check(path, head)
    if found == FOREIGN:
        raise refuse(path, kind, head)
    if found == CORRUPT:
        move_aside(path, "cannot be read")
        return False
    return True


def move_aside(path: str | os.PathLike[str], why: str, *, say: bool = True) -> Path:
    """Rename a damaged file of spectui's own to ``NAME.corrupt-<time>`` (kept, never deleted);
    ``say``: print the one line (False where the caller says it in its own words)."""
    path = Path(path)
    stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    aside, n = path.with_name(f"{path.name}.corrupt-{stamp}"), 2
    while aside.exists():
        aside, n = path.with_name(f"{path.name}.corrupt-{stamp}-{n}"), n + 1
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return aside  # another spectui moved it first
    except OSError as exc:
        raise SpectuiError(f"{path} {why}, and cannot be moved aside: {exc.strerror or exc}") from None
    if say:
        notice(f"{path} {why}; moved it aside to {aside.name} and started a new one")
    return aside


# -- folders and modes ---------------------------------------------------------------------------


def prepare_dir(folder: str | os.PathLike[str], *, private: bool = False, own: bool = False) -> Path:
    """Create ``folder`` (and its missing parents) for files spectui writes; a folder it creates
    for private files is 0700 (its parents get the umask's modes). ``own``: the folder is
    spectui's (a default location, a run folder): an existing one others can read is tightened
    to 0700, with one line. A folder the user named and that exists is left as it is.
    Raises OSError."""
    folder = Path(folder)
    missing = []
    p = folder
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for p in reversed(missing):
        leaf = private and p == folder  # the parents (~/.cache/spectui) hold caches too: normal modes
        try:
            os.mkdir(p, PRIVATE_DIR_MODE if leaf else 0o777)
        except FileExistsError:
            continue  # another process made it: checked below like any existing folder
        if leaf:
            os.chmod(p, PRIVATE_DIR_MODE)  # mkdir's mode passes through the umask
    if not folder.is_dir():
        raise NotADirectoryError(20, "Not a directory", str(folder))
    if private and (own or folder in missing):
        tighten(folder, PRIVATE_DIR_MODE)
    return folder


def tighten(path: str | os.PathLike[str], mode: int = PRIVATE_FILE_MODE) -> bool:
    """Take group and other access off ``path`` (a file or folder with user text); says so."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    if not stat.S_IMODE(st.st_mode) & 0o077:
        return False
    try:
        os.chmod(path, mode)
    except OSError:
        return False  # not ours to change (another user's file): reading it still works
    what = "folder" if stat.S_ISDIR(st.st_mode) else "file"
    notice(f"{path} held text others on this machine could read; made the {what} private ({mode:o})")
    return True


def create_new(path: str | os.PathLike[str], *, private: bool) -> int:
    """A new file (O_EXCL: never someone else's), 0600 if ``private`` whatever the umask;
    an existing empty placeholder (mktemp, touch) is taken over. Returns a write-only
    descriptor opened for appending. Raises FileExistsError for a non-empty file, OSError."""
    mode = PRIVATE_FILE_MODE if private else 0o666
    flags = os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        fd = os.open(path, flags)
        if os.fstat(fd).st_size:
            os.close(fd)
            raise
    if private:
        try:
            os.fchmod(fd, PRIVATE_FILE_MODE)
        except BaseException:
            os.close(fd)  # the caller never sees it: closed here or never
            raise
    return fd


def discard(file: BinaryIO) -> None:
    """Close a buffered file without writing what its buffer still holds: a write to it failed (a full
    disk), so a flush would fail again, and a file left open has Python try that flush when it
    exits, which Python 3.13 reports after the error ("Exception ignored in")."""
    raw = getattr(file, "raw", None)
    with contextlib.suppress(OSError, ValueError):
        if raw is not None:
            raw.close()  # a buffered file over a closed raw one closes without a flush
        file.close()


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# -- writing -------------------------------------------------------------------------------------


def fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # some filesystems refuse a folder fsync: the rename still stands
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def temp_file(path: Path) -> tuple[int, str]:
    """A new 0600 file beside ``path`` named ``.NAME.<pid>.<random>.tmp`` (the pid lets a
    later write tell a killed process's leftover from a live one's)."""
    return tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")


def remove_stale_temps(path: Path) -> None:
    """Delete temporary files a killed writer of ``path`` left (its process is gone): they
    were never anything but half of a write whose old version still stands."""
    prefix = f".{path.name}."
    try:
        names = [n for n in os.listdir(path.parent) if n.startswith(prefix) and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix):].split(".", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            os.unlink(path.parent / name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True


def write_atomic(
    path: str | os.PathLike[str], data: bytes | str, kind: Kind, *, own_dir: bool = True, claimed: bool = False
) -> Path:
    """Replace ``path`` with ``data`` as ``kind``: checked first (``claim``), then a temporary
    file in the same folder, fsync, rename, fsync of the folder. ``own_dir``: the folder is
    spectui's own (see ``prepare_dir``); ``claimed``: the caller has run ``claim`` already.
    Raises SpectuiError for a file of another kind and OSError for a failed write (the old
    file is then untouched and no temporary file is left)."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    existed = claimed or claim(path, kind)  # before touching the folder: a refusal changes nothing
    folder = prepare_dir(path.parent, private=kind.private, own=own_dir)
    loose = False
    with contextlib.suppress(OSError):  # gone meanwhile: nothing to say of its mode
        loose = existed and kind.private and bool(stat.S_IMODE(os.stat(path).st_mode) & 0o077)
    remove_stale_temps(path)
    fd, tmp = temp_file(path)  # 0600
    try:
        with os.fdopen(fd, "wb") as f:
            if not kind.private:
                os.fchmod(f.fileno(), 0o666 & ~current_umask())
            half = len(payload) // 2
            f.write(payload[:half])
            f.flush()
            fault_point(f"write:{path.name}")  # the fault tests' kill lands mid-file
            f.write(payload[half:])
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(folder)
    if loose:  # the new file is the temporary one, 0600 already: say what changed
        notice(f"{path} held text others on this machine could read; made the file private (600)")
    return path


def write_new(path: str | os.PathLike[str], data: bytes | str, kind: Kind, *, own_dir: bool = False) -> Path:
    """Write ``data`` at ``path`` only where nothing is (a model, an export): atomic, and a
    file that appears meanwhile is not replaced (a hard link, then the temporary name goes)."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    prepare_dir(path.parent, private=kind.private, own=own_dir)
    remove_stale_temps(path)
    fd, tmp = temp_file(path)
    try:
        with os.fdopen(fd, "wb") as f:
            if not kind.private:
                os.fchmod(f.fileno(), 0o666 & ~current_umask())
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        publish_new(Path(tmp), path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return path


def publish_new(tmp: Path, path: Path) -> None:
    """Give the finished file ``tmp`` the name ``path`` only if nothing has that name (os.link
    fails on an existing name where os.replace would overwrite it); ``tmp`` stays to be removed."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise SpectuiError(f"{path} exists; spectui does not replace it (give another path)") from None
    except OSError:  # a filesystem without hard links: check, then rename (a narrow race)
        if os.path.lexists(path):
            raise SpectuiError(f"{path} exists; spectui does not replace it (give another path)") from None
        os.rename(tmp, path)
    fsync_dir(path.parent)


@contextlib.contextmanager
def locked(path: str | os.PathLike[str]) -> Iterator[bool]:
    """Hold an exclusive lock beside ``path`` (``.NAME.lock``) while a read-merge-write runs,
    so two processes take turns; yields False when no lock could be had (a read-only folder:
    nothing will be written there either)."""
    path = Path(path)
    try:
        import fcntl
    except ImportError:  # Windows: atomic replace alone (last writer wins)
        yield False
        return
    try:
        fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError:
        yield False
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(fd)  # closing releases the lock


def prune_oldest(folder: Path, pattern: str, keep: int) -> None:
    """Delete all but the ``keep`` newest ``pattern`` files of ``folder``; one another spectui removed meanwhile is skipped."""
    dated = []
    for path in folder.glob(pattern):
        with contextlib.suppress(FileNotFoundError):
            dated.append((path.stat().st_mtime, path))
    for _, old in sorted(dated)[: max(len(dated) - keep, 0)]:
        with contextlib.suppress(OSError):
            old.unlink()


def disk_error(path: str | os.PathLike[str], exc: OSError) -> SpectuiError:
    """The one line for a write that failed (full disk, read-only or missing folder)."""
    return SpectuiError(f"cannot write {os.fspath(path)}: {exc.strerror or exc}")
