"""Faults for the storage tests: a full disk, a read-only folder, a process killed mid-write.

A full disk is a small tmpfs where the tests run as root (as in CI containers); elsewhere a
file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored) on the child process, which fails its writes
past the limit with EFBIG the way a full disk fails them with ENOSPC.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.conftest import REPO

FAULT_ENV = "SPECTUI_FAULT_KILL"


def _try_tmpfs(size: int) -> Path | None:
    if os.geteuid() != 0:
        return None
    folder = Path(tempfile.mkdtemp(prefix="spectui-full-disk-"))
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if proc.returncode != 0:
        folder.rmdir()
        return None
    return folder


@contextlib.contextmanager
def small_disk(size: int = 256 * 1024) -> Iterator[tuple[Path, Callable[[], None] | None]]:
    """A folder with ``size`` bytes of room, and a ``preexec_fn`` for a child process that
    must hit the limit (None where the folder is a real small filesystem)."""
    mounted = _try_tmpfs(size)
    if mounted is not None:
        try:
            yield mounted, None
        finally:
            subprocess.run(["umount", "-l", str(mounted)], check=False)
            with contextlib.suppress(OSError):
                mounted.rmdir()
        return
    folder = Path(tempfile.mkdtemp(prefix="spectui-fsize-"))

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    yield folder, limit


def fill(folder: Path, leave: int = 4096) -> None:
    """Use up a small tmpfs but ``leave`` bytes (a file-size limit needs no filling)."""
    st = os.statvfs(folder)
    free = st.f_bavail * st.f_frsize
    if free > leave and free < 1 << 30:  # a real small filesystem, not the test machine's disk
        with open(folder / "filler", "wb") as f:
            with contextlib.suppress(OSError):
                f.write(b"\0" * (free - leave))


def python(code: str, *, env: dict[str, str] | None = None, preexec: Callable[[], None] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter from the repository (the real modules, real files)."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        preexec_fn=preexec,
        timeout=timeout,
    )


def killed(proc: subprocess.CompletedProcess) -> bool:
    return proc.returncode == -signal.SIGKILL


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """``folder`` read-only for the test (root ignores modes: a read-only bind mount then)."""
    if os.geteuid() == 0:
        proc = subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(folder)], capture_output=True)
        if proc.returncode != 0:  # root ignores modes, and this container allows no mounts
            import pytest

            pytest.skip("a read-only folder needs a bind mount as root, and this machine allows none")
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=False)
        try:
            yield folder
        finally:
            subprocess.run(["umount", "-l", str(folder)], check=False)
        return
    os.chmod(folder, 0o555)
    try:
        yield folder
    finally:
        os.chmod(folder, 0o755)
