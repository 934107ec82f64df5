"""What spectui runs or loads from its cache is the user's own: a cached llama-server binary
(with the folders it lives in and the libraries beside it) and an exported MLX model folder.

A file another user owns, or that the group or others may write, could have been replaced by
someone else since spectui made it: running it would run their code as this user, and a model
folder feeds a server that any local user can send requests to. Such a file is refused in one
line, never repaired silently.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from spectui.errors import SpectuiError


def untrusted(path: str | os.PathLike[str]) -> str:
    """Why ``path`` is not safe to run or load ("" where it is the user's and only theirs to write)."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    uid = os.getuid() if hasattr(os, "getuid") else None
    if uid is not None and st.st_uid != uid:
        return f"is owned by uid {st.st_uid}, not by you (uid {uid})"
    if stat.S_ISLNK(st.st_mode):
        return ""  # a link's own mode means nothing; it is the user's, and what it names is checked where it lies
    if st.st_mode & stat.S_IWOTH:
        return f"is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    if st.st_mode & stat.S_IWGRP and not private_group(st.st_gid):
        return f"is writable by its group, gid {st.st_gid} (mode {stat.S_IMODE(st.st_mode):o})"
    return ""


def private_group(gid: int) -> bool:
    """Whether ``gid`` is the user's own group (named after them, their primary group, no other
    member listed): where the umask is 002 every file the user makes is group-writable, and
    nobody else is in that group."""
    try:
        import grp
        import pwd

        user = pwd.getpwuid(os.getuid()).pw_name
        group = grp.getgrgid(gid)
    except (ImportError, KeyError, OSError):
        return False
    return gid == os.getgid() and group.gr_name == user and set(group.gr_mem) <= {user}


def require_owned(paths: Iterable[str | os.PathLike[str]], what: str, remedy: str, *,
                  error: type[SpectuiError] = SpectuiError) -> None:
    """Refuse, in one line (an ``error``), the first of ``paths`` that is not the user's alone."""
    for path in paths:
        why = untrusted(path)
        if why:
            raise error(f"{what}: {path} {why}; spectui does not run or load it ({remedy})")


def folder_and_files(folder: Path) -> list[Path]:
    """``folder``, the folder above it, and everything inside it: what must be the user's for
    the folder's files to be the ones spectui wrote."""
    out = [folder.parent, folder]
    for root, dirs, files in os.walk(folder):
        out += [Path(root, d) for d in dirs] + [Path(root, f) for f in files]
    return out
