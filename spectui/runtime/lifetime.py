"""A server spectui started never outlives it (issue 43), whichever runtime it is.

Its own process group (a Ctrl-C in the terminal reaches spectui only, which stops it in order),
stopped by its owner, by an ``atexit`` hook on any exit, and on Linux by the kernel when spectui
dies by any signal, SIGKILL included (``prctl(PR_SET_PDEATHSIG, SIGKILL)`` set in the child
before exec). The kernel sends that signal when the *thread* that forked the child ends, so
every server is forked by one long-lived thread of its own (``_Spawner``), whichever thread
asks. macOS has no PDEATHSIG: there ``atexit`` and a SIGTERM/SIGHUP handler (installed only
where the signal has none) cover every way out but SIGKILL and a crash of the interpreter
itself; a watchdog process that holds a pipe to spectui would close that gap (not built yet).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from spectui.errors import SpectuiError


class Stoppable(Protocol):
    def stop(self) -> int | None: ...


_LIVE: set[Stoppable] = set()
_HOOKS = threading.Lock()
_hooked = False


def keep(server: Stoppable) -> None:
    """Stop ``server`` on any exit of this process, until ``forget``."""
    _LIVE.add(server)
    _install_exit_hooks()


def forget(server: Stoppable) -> None:
    _LIVE.discard(server)


def spawn(argv: Sequence[str], *, env: dict[str, str], stdout: int) -> subprocess.Popen:
    """Start ``argv`` in its own process group, to die with this process (see the module doc)."""
    return _SPAWNER.popen(argv, env=env, stdout=stdout)


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # its own session: the group id is its pid
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


def stop_all() -> None:
    """Stop every server this process started (``atexit`` calls it)."""
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.stop()


def _install_exit_hooks() -> None:
    global _hooked
    with _HOOKS:
        if _hooked:
            return
        _hooked = True
    atexit.register(stop_all)
    if _PRCTL is not None or threading.current_thread() is not threading.main_thread():
        return  # Linux: the kernel ends the servers on any death; signal handlers are not needed
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None and signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _exit_on_signal)  # a default death skips atexit; SystemExit runs it


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def _load_prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` on Linux, loaded before any fork (a forked child must not load libraries)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    return fn


_PRCTL = _load_prctl()
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    prctl = _PRCTL

    def in_child() -> None:  # between fork and exec: no allocation-heavy work here
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            if os.getppid() != parent_pid:  # the parent died before the line above took effect
                os._exit(1)

    return in_child


class _Spawner:
    """Forks every server from one thread that lives as long as the process: PR_SET_PDEATHSIG
    fires when the forking *thread* ends, and a worker thread that started a server must not
    take it down when it finishes."""

    def __init__(self) -> None:
        self._jobs: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, argv: Sequence[str], *, env: dict[str, str], stdout: int) -> subprocess.Popen:
        if _PRCTL is None:  # no PDEATHSIG: any thread may fork
            return self._popen(argv, env, stdout)
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="spectui-runtime-spawner", daemon=True)
                self._thread.start()
        done: queue.Queue = queue.Queue(maxsize=1)
        self._jobs.put((argv, env, stdout, done))
        ok, value = done.get()
        if not ok:
            raise value
        return value

    def _serve(self) -> None:
        while True:
            argv, env, stdout, done = self._jobs.get()
            try:
                done.put((True, self._popen(argv, env, stdout)))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, which raises it
                done.put((False, exc))

    @staticmethod
    def _popen(argv: Sequence[str], env: dict[str, str], stdout: int) -> subprocess.Popen:
        try:
            return subprocess.Popen(
                list(argv), env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent(os.getpid()), close_fds=True,
            )
        except OSError as exc:
            raise SpectuiError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None


_SPAWNER = _Spawner()
