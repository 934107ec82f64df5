"""A server spectui started never outlives it, whichever runtime it is.

Its own process group (a Ctrl-C in the terminal reaches spectui only, which stops it in order),
stopped by its owner, by an ``atexit`` hook on any exit, by SIGTERM/SIGHUP handlers that turn
those signals into an orderly exit, and on Linux by the kernel when spectui dies by any signal,
SIGKILL included (``prctl(PR_SET_PDEATHSIG, SIGKILL)`` set in the child before exec). The kernel
sends that signal when the *thread* that forked the child ends, so every server is forked by one
long-lived thread of its own (``_Spawner``), whichever thread asks. macOS has no PDEATHSIG:
there the hooks cover every way out but SIGKILL and a crash of the interpreter itself; a
watchdog process that holds a pipe to spectui would close that gap (not built yet).

**The hooks are installed on the main thread at start** (``install_exit_hooks``: the command
line does it before any command runs): Python takes signal handlers from the main thread only,
and the dashboard starts its runtimes from a worker thread, where only ``atexit`` could be
registered. ``keep`` installs what it can too, for a caller that never went through the command
line.

**A child is registered before ``spawn`` returns**: the spawner thread records it in
``_CHILDREN`` as soon as it exists, and Python delivers KeyboardInterrupt to the main thread
only, so no Ctrl-C falls between the fork and the record. A caller interrupted while it waits
for the child has it killed at once; a child spawned and never ``keep``-ed is killed on exit.
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
from typing import Any, Protocol

from spectui import subprocesses
from spectui.errors import SpectuiError


class Stoppable(Protocol):
    def stop(self) -> int | None: ...


_LIVE: set[Stoppable] = set()
#: every child ``spawn`` started and that has not been seen to end, by pid: what ``stop_all``
#: kills where its owner never kept it (an interruption between ``spawn`` and ``keep``)
_CHILDREN: dict[int, subprocess.Popen] = {}
_HOOKS = threading.Lock()
_atexit_hooked = False
_signals_hooked = False
#: the signals that would otherwise end spectui without running ``atexit``
EXIT_SIGNALS = tuple(s for s in (signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)


def keep(server: Stoppable) -> None:
    """Stop ``server`` on any exit of this process, until ``forget``."""
    _LIVE.add(server)
    install_exit_hooks()


def forget(server: Stoppable) -> None:
    _LIVE.discard(server)


def install_exit_hooks() -> None:
    """``stop_all`` on any exit: an ``atexit`` hook (from any thread) and, on the main thread,
    SIGTERM/SIGHUP handlers where the signal has none (a default death skips ``atexit``; the
    handler's ``SystemExit`` runs it, and unwinds whatever waits on a child, a build included).
    Call it on the main thread at start; calling it again does no harm."""
    global _atexit_hooked, _signals_hooked
    with _HOOKS:
        if not _atexit_hooked:
            _atexit_hooked = True
            atexit.register(stop_all)
        if _signals_hooked or threading.current_thread() is not threading.main_thread():
            return
        _signals_hooked = True
        for sig in EXIT_SIGNALS:
            if signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, _exit_on_signal)


def hooks_installed() -> tuple[bool, bool]:
    """(the ``atexit`` hook, the signal handlers) installed yet."""
    return _atexit_hooked, _signals_hooked


def spawn(argv: Sequence[str], *, env: dict[str, str], stdout: int, cwd: str | None = None, **kwargs: Any) -> subprocess.Popen:
    """Start ``argv`` in its own process group, isolated by ``spectui.subprocesses`` (in
    ``cwd``, a private folder of the caller's, else that module's private working folder), to
    die with this process (see the module doc). ``kwargs`` go to ``Popen`` (``text``...)."""
    return _SPAWNER.popen(argv, env=env, stdout=stdout, cwd=cwd, **kwargs)


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # its own session: the group id is its pid
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


def stop_all() -> None:
    """Stop every server this process started (``atexit`` calls it), then kill any child that
    was spawned and never kept."""
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.stop()
    for proc in list(_CHILDREN.values()):
        with contextlib.suppress(Exception):
            _kill(proc)


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        signal_group(proc, signal.SIGKILL)
        proc.wait()
    _CHILDREN.pop(proc.pid, None)


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


class _Job:
    """One child to start, and its hand-over to the thread that asked. A caller interrupted
    while it waits ``abandon``s it: the child is killed whether it started before or after."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], stdout: int, cwd: str | None, kwargs: dict[str, Any]) -> None:
        self.argv, self.env, self.stdout, self.cwd, self.kwargs = argv, env, stdout, cwd, kwargs
        self.done: queue.Queue = queue.Queue(maxsize=1)
        self._lock = threading.Lock()
        self._abandoned = False

    def deliver(self, ok: bool, value: object) -> None:
        with self._lock:
            if not self._abandoned:
                self.done.put((ok, value))
                return
        if ok and isinstance(value, subprocess.Popen):
            _kill(value)

    def abandon(self) -> None:
        with self._lock:
            self._abandoned = True
            try:
                ok, value = self.done.get_nowait()
            except queue.Empty:
                return  # not started yet: ``deliver`` kills it
        if ok:
            _kill(value)


class _Spawner:
    """Forks every server from one thread that lives as long as the process: PR_SET_PDEATHSIG
    fires when the forking *thread* ends, and a worker thread that started a server must not
    take it down when it finishes; and no KeyboardInterrupt reaches that thread, so a child is
    always recorded in ``_CHILDREN`` once it exists."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[_Job] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, argv: Sequence[str], *, env: dict[str, str], stdout: int, cwd: str | None = None, **kwargs: Any) -> subprocess.Popen:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="spectui-runtime-spawner", daemon=True)
                self._thread.start()
        job = _Job(argv, env, stdout, cwd, kwargs)
        self._jobs.put(job)
        try:
            ok, value = job.done.get()
        except BaseException:  # Ctrl-C while the child starts: it must not be left running
            job.abandon()
            raise
        if not ok:
            raise value
        return value

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                proc = self._popen(job)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, which raises it
                job.deliver(False, exc)
            else:
                job.deliver(True, proc)

    @staticmethod
    def _popen(job: _Job) -> subprocess.Popen:
        for pid, old in list(_CHILDREN.items()):
            if old.returncode is not None:  # reaped by its owner: nothing left to stop
                _CHILDREN.pop(pid, None)
        try:
            proc = subprocesses.popen(
                job.argv, env=job.env, stdin=subprocess.DEVNULL, stdout=job.stdout, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent(os.getpid()), close_fds=True, cwd=job.cwd, **job.kwargs,
            )
        except OSError as exc:
            raise SpectuiError(f"cannot start {job.argv[0]}: {exc.strerror or exc}") from None
        _CHILDREN[proc.pid] = proc
        return proc


_SPAWNER = _Spawner()
