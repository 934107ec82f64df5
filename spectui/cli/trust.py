"""Which config files a command line believes, as git's ``safe.directory`` and direnv's
``allow`` decide it.

* A config file (the user's or a project's) is read only when it is the user's own and no one
  else can write it or the folder holding it (``read_guarded``): whoever can write a folder
  above where a person works could otherwise put a ``spectui.toml`` there.
* A project file may set a key of ``spectui.profiles.SENSITIVE`` (a program spectui runs, a
  place data or a credential goes) only once the user trusted it: ``spectui config trust PATH``
  records the file's path and the SHA-256 of its bytes in the state folder (``trusted.json``);
  a file whose bytes changed since is untrusted again, and a trusted file is read whatever its
  owner or modes, since the bytes read are the bytes the user read. ``spectui config untrust
  PATH`` forgets it.

The record is written through ``spectui.storage`` (atomic, private, never over a file of
another kind) and read with the same guard as a config file: a record others could write
trusts nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from spectui import file_kinds, paths, storage
from spectui.errors import SpectuiError

#: The record of trusted files, in the state folder (``spectui.paths.state_dir``).
TRUST_FILE = "trusted.json"
_MARK = "spectui trusted config files"
TRUST_KIND = file_kinds.json_kind(
    "spectui's record of trusted config files", lambda doc: isinstance(doc, dict) and doc.get("what") == _MARK, private=True
)
#: A config file bigger than this is no config file (and a huge one is not read into memory).
MAX_CONFIG_BYTES = 1 << 20


def trust_file() -> Path:
    return paths.state_dir() / TRUST_FILE


def digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def trusted_path(path: Path) -> str:
    """The name a file is trusted under: absolute, symbolic links resolved."""
    return str(path.expanduser().resolve())


# -- owners and modes --------------------------------------------------------------------------


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def unsafe_reason(st: os.stat_result, what: str) -> str:
    """Why a file or folder with this ``stat`` is not the user's alone to write ("" when it is):
    owned by someone else, or writable by its group or by others. Windows keeps no such bits
    (its ACLs are another matter), so there it is always ""."""
    if os.name == "nt" or not hasattr(os, "getuid"):
        return ""
    if st.st_uid != os.getuid():
        return f"{what} is owned by {_owner(st.st_uid)}, not you"
    mode = stat.S_IMODE(st.st_mode)
    who = [name for bit, name in ((stat.S_IWGRP, "its group"), (stat.S_IWOTH, "others")) if mode & bit]
    return f"{what} is writable by {' and '.join(who)} (mode {mode:o})" if who else ""


@dataclass(frozen=True)
class GuardedRead:
    """A file's bytes (None: no such file) and why they are not safe to believe ("": they are)."""

    raw: bytes | None
    unsafe: str = ""


def read_guarded(path: Path) -> GuardedRead:
    """``path``'s bytes, with what makes them unsafe: the file and the folder holding it (as
    found, and after symbolic links) must be the user's and writable by no one else. The owner
    and modes are those of the file read (``fstat`` of the open file), so a file swapped in
    between a check and the read is still the one checked. A path that is no regular file (a
    pipe would block the read), is too big or cannot be read is one line."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except (FileNotFoundError, NotADirectoryError):
        return GuardedRead(None)
    except OSError as exc:
        raise SpectuiError(f"{path}: cannot read the config file: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SpectuiError(f"{path}: not a regular file, so not a config file")
        if st.st_size > MAX_CONFIG_BYTES:
            raise SpectuiError(f"{path}: {st.st_size} bytes is too big for a config file (at most {MAX_CONFIG_BYTES})")
        with os.fdopen(os.dup(fd), "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise SpectuiError(f"{path}: cannot read the config file: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    unsafe = unsafe_reason(st, "the file")
    for folder in dict.fromkeys((path.absolute().parent, path.resolve().parent)):
        if unsafe:
            break
        try:
            unsafe = unsafe_reason(os.stat(folder), f"its folder {folder}")
        except OSError as exc:
            unsafe = f"its folder {folder} cannot be checked: {exc.strerror or exc}"
    return GuardedRead(raw, unsafe)


# -- the record of trusted files ---------------------------------------------------------------


def trusted_files() -> dict[str, str]:
    """Each trusted file's path and the SHA-256 it was trusted with. A record that is missing,
    damaged, of another kind or writable by others trusts nothing."""
    read = read_guarded(trust_file())
    if read.raw is None or read.unsafe:
        return {}
    try:
        doc = json.loads(read.raw)
    except (ValueError, UnicodeDecodeError):
        return {}
    files = doc.get("files") if isinstance(doc, dict) and doc.get("what") == _MARK else None
    if not isinstance(files, dict):
        return {}
    return {p: e["sha256"] for p, e in files.items() if isinstance(e, dict) and isinstance(e.get("sha256"), str)}


def trust_state(path: Path, raw: bytes, record: Mapping[str, str] | None = None) -> str:
    """"trusted", "changed" (trusted once, with other bytes) or "" (never trusted)."""
    record = trusted_files() if record is None else record
    known = record.get(trusted_path(path))
    if known is None:
        return ""
    return "trusted" if known == digest(raw) else "changed"


def _rewrite(change: str, path: Path, sha256: str | None) -> bool:
    """Set (``sha256``) or drop (None) ``path``'s entry under the record's lock; whether the
    record held it before."""
    record = trust_file()
    try:
        storage.prepare_dir(record.parent, private=True)
        with storage.locked(record):
            if storage.claim(record, TRUST_KIND):  # one of ours, readable: merge with it
                doc = json.loads(record.read_bytes())
            else:
                doc = {"what": _MARK, "version": 1, "files": {}}
            files = doc.setdefault("files", {})
            key = trusted_path(path)
            had = key in files
            if sha256 is None:
                files.pop(key, None)
            else:
                files[key] = {"sha256": sha256, "trusted_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
            if sha256 is not None or had:
                storage.write_atomic(record, json.dumps(doc, indent=1, sort_keys=True) + "\n", TRUST_KIND, own_dir=False, claimed=True)
    except OSError as exc:
        raise storage.disk_error(record, exc) from None
    except ValueError:  # claim said ours and readable, then another writer tore it: say so
        raise SpectuiError(f"{record}: the record of trusted files cannot be read; {change} again") from None
    return had


def trust(path: Path, raw: bytes) -> str:
    """Record ``path`` as trusted with these bytes; returns their SHA-256."""
    sha256 = digest(raw)
    _rewrite("trust it", path, sha256)
    return sha256


def untrust(path: Path) -> bool:
    """Forget ``path``; whether it was trusted."""
    return _rewrite("untrust it", path, None)
