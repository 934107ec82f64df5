"""Unpacking a source package without trusting it: ``tarfile``'s ``data`` filter where this
Python has it, the same checks made here where it has not.

The filter arrived in Python 3.10.12 and 3.11.4 (and 3.12); spectui runs on any 3.10, where
``extractall(filter=...)`` is a ``TypeError``. Never a plain ``extractall`` instead: a member
named ``/etc/...`` or ``../..``, a link that points out of the destination, or a device file
would be written where the archive says. The fallback refuses, before each member is written, what
the ``data`` filter refuses, and drops what it drops (owners, set-id and group/other write bits).
"""

from __future__ import annotations

import copy
import os
import tarfile
from collections.abc import Sequence
from pathlib import Path


class UnsafeMember(Exception):
    """A member that would be written outside the destination, or is no plain file, folder or link."""


def extract_data(tar: tarfile.TarFile, dest: Path, members: Sequence[tarfile.TarInfo]) -> None:
    """Extract ``members`` into ``dest`` as the ``data`` filter allows, with or without it."""
    if hasattr(tarfile, "data_filter"):
        try:
            tar.extractall(dest, members=members, filter="data")
        except tarfile.FilterError as exc:
            raise UnsafeMember(str(exc)) from None
        return
    for member in members:
        # one at a time, each checked against what is on disk by then: a link extracted earlier
        # is followed by the next member's check, as the filter does
        tar.extract(checked_member(member, dest), dest)


def checked_member(member: tarfile.TarInfo, dest: Path) -> tarfile.TarInfo:
    """``member`` as the ``data`` filter would extract it into ``dest``, or ``UnsafeMember``."""
    name = member.name
    root = os.path.realpath(dest)
    if name.startswith(("/", os.sep)) or (os.altsep and name.startswith(os.altsep)) or os.path.splitdrive(name)[0]:
        raise UnsafeMember(f"{name!r} has an absolute path")
    if ".." in name.replace(os.sep, "/").split("/"):
        raise UnsafeMember(f"{name!r} climbs out of the folder (..)")
    target = os.path.realpath(os.path.join(root, name))
    if os.path.commonpath([root, target]) != root:
        raise UnsafeMember(f"{name!r} would be written outside the folder")
    if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
        raise UnsafeMember(f"{name!r} is a device, FIFO or other special file")
    if member.issym() or member.islnk():
        link = member.linkname
        if os.path.isabs(link):
            raise UnsafeMember(f"{name!r} links to an absolute path ({link!r})")
        # a symlink is read from its own folder, a hard link from the archive's root
        base = os.path.dirname(target) if member.issym() else root
        if os.path.commonpath([root, os.path.realpath(os.path.join(base, link))]) != root:
            raise UnsafeMember(f"{name!r} links outside the folder ({link!r})")
    safe = copy.copy(member)
    safe.uid = safe.gid = 0
    safe.uname = safe.gname = ""
    if safe.isreg() or safe.isdir():
        # as the data filter: no set-id or sticky bits, no group/other write; the owner may read (and write files)
        mode = safe.mode & 0o755
        safe.mode = mode | (0o600 if safe.isreg() else 0o700)
    return safe
