"""The launcher every runtime's server shares: start it for a run, and make sure it stops.

``start`` takes a ``Runtime`` (what differs between runtimes: the command line, the
environment, the log line that says it listens, when it is ready: ``llama_server.LlamaServer``,
``mlx_lm_server.MlxLmServer``), starts it on a free loopback port, waits until it is ready and
returns a ``RuntimeServer`` whose ``client()`` is the existing server client
(``spectui.server.client``) with its key set. ``stop`` (also on leaving a ``with`` block) ends
it; ``guard`` stops it where it ever listens beyond loopback.

What a shared machine needs, for every runtime:

* **A fresh API key per start** (``secrets``), for a runtime that takes one; the runtime hands
  it to its server in the environment, never on the command line, which every user can read
  in ``ps`` (``/proc/PID/environ`` is readable by its owner only). It is given to the client
  and nowhere else: not in ``command_line``, not in errors.
* **A free port, and a busy one is not a failure**: a port the OS just gave out can be taken
  before the server binds it; the runtime says from its log when a bind failed, and the start
  tries another port.
* **Loopback only, failing closed**: kept only where its processes are seen listening on its
  port and on loopback alone, while it loads and once ready, then read again every
  ``GUARD_EVERY_S`` for as long as it runs; a listener beyond loopback, or listeners that can
  no longer be read, stop it.
* **It never outlives spectui**: its own process group, stopped by ``stop``, on any exit, and
  on Linux by the kernel when spectui dies by any signal, SIGKILL included
  (``spectui.runtime.lifetime`` says how, and what macOS lacks).
* **A failed start is one line**: the exit status or the timeout, and the last meaningful
  line of its log; the log (``logs``) is kept (beside the recording when one is named, else in
  the user cache) and its path is in the line.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from spectui import storage
from spectui.errors import SpectuiError
from spectui.runtime import lifetime
from spectui.runtime.logs import last_log_line, log_file, read_all, read_tail
from spectui.server.client import ServerClient, ServerError, parse_server_url
from spectui.watch.process import beyond_loopback, listening_sockets

HOST = "127.0.0.1"
#: How long a model may take to load before the start counts as failed.
READY_TIMEOUT_S = 180.0
#: How long a stopped server gets to exit on SIGTERM before SIGKILL.
STOP_GRACE_S = 10.0
#: how often a started server's listeners are read again for as long as it runs (``guard``): a
#: server accepted on loopback alone may open another listener later (a second port, a worker)
GUARD_EVERY_S = 1.0
#: Ports tried before a start gives up on binding.
PORT_ATTEMPTS = 5


def free_port() -> int:
    """A loopback port nobody holds this instant (the OS's pick)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class StartFailed(Exception):
    """A runtime that will not become ready, in words (``Runtime.ready`` raises it)."""


class Runtime(Protocol):
    """One runtime's part of a start; ``start`` does the rest. A runtime may also have a
    ``workdir()``, the folder its process starts in (else this process's working directory)."""

    @property
    def name(self) -> str:
        """In messages and log names ("llama-server", "mlx_lm.server")."""
        ...

    @property
    def log_folder(self) -> str:
        """Logs without a recording to sit beside: this folder under the user cache."""
        ...

    def argv(self, port: int) -> list[str]: ...

    def environment(self, api_key: str) -> dict[str, str]:
        """The child's environment; ``api_key`` is fresh for this start ("" = the runtime takes none)."""
        ...

    def takes_key(self) -> bool: ...

    def listening(self, port: int) -> re.Pattern[str]:
        """The log line that says it listens on ``port`` (nothing is asked of the port before)."""
        ...

    def bind_failed(self, log_tail: str) -> bool: ...

    def ready(self, server: RuntimeServer) -> bool:
        """Once it listens: whether it serves (False or ``ServerError``: not yet; ``StartFailed``: never)."""
        ...

    def props(self) -> dict[str, str]:
        """What the header records about this runtime besides its command line (``runtime.*``)."""
        ...


class RuntimeServer:
    """A runtime's server this process started: its port, client, command line, ``/props``, log."""

    def __init__(self, runtime: Runtime, proc: subprocess.Popen, argv: list[str], port: int, api_key: str, log_path: Path) -> None:
        self.runtime = runtime
        self.proc = proc
        self.argv = argv
        self.port = port
        self._api_key = api_key
        self.log_path = log_path
        self.props: dict[str, Any] = {}
        self.started_s = 0.0  # launch to ready, seconds
        #: why the guard stopped it (it listened beyond loopback, or could no longer be read); ""
        self.refused = ""
        self._stopping = threading.Event()

    def __repr__(self) -> str:  # never the key
        return f"RuntimeServer(pid={self.pid}, url={self.url!r})"

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def command_line(self) -> str:
        """The whole command, as a shell would take it (the key is not on it: see the module doc)."""
        return shlex.join(self.argv)

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def client(self, *, read_timeout_s: float | None = None) -> ServerClient:
        kwargs = {} if read_timeout_s is None else {"read_timeout_s": read_timeout_s}
        return ServerClient(parse_server_url(self.url), self._api_key, **kwargs)

    def guard(self, every_s: float = GUARD_EVERY_S) -> None:
        """Read where its processes listen every ``every_s`` for as long as it runs, and stop it
        (``refused`` says why) where one listens beyond loopback or they can no longer be read:
        ``start`` saw it on loopback alone, which says nothing of a listener opened later."""
        threading.Thread(target=self._guard, args=(every_s,), name=f"spectui-guard-{self.pid}", daemon=True).start()

    def _guard(self, every_s: float) -> None:
        # fails closed: whatever goes wrong while it reads, the server is stopped, never left
        # running unguarded by a thread that ended on an error nobody saw
        while not self._stopping.wait(every_s):
            try:
                sockets, why_unread = read_listeners(self.pid)
                if self.proc.poll() is not None:
                    return  # it exited: nothing listens
                exposed = beyond_loopback(sockets) if sockets is not None else []
            except Exception as exc:  # noqa: BLE001 - any error is a server that can no longer be watched
                sockets, why_unread, exposed = None, _said(exc), []
            if sockets is None or exposed:
                unread = "its listeners could no longer be read" + (f" ({why_unread})" if why_unread else "")
                where = f"listened on {', '.join(exposed)}, beyond this machine" if exposed else unread
                self.refused = f"{self.runtime.name} (port {self.port}) {where}; spectui's runtimes listen on {HOST} only: stopped"
                try:
                    self.stop()
                except Exception:  # noqa: BLE001 - stopped the hard way rather than left running
                    lifetime.signal_group(self.proc, signal.SIGKILL)
                return

    def stop(self) -> int | None:
        """SIGTERM to its process group, SIGKILL after ``STOP_GRACE_S``; its exit status."""
        self._stopping.set()
        lifetime.forget(self)
        if self.proc.poll() is None:
            lifetime.signal_group(self.proc, signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                lifetime.signal_group(self.proc, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self) -> RuntimeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def last_log_line(self) -> str:
        return self.refused or last_log_line(self.log_path)


def start(
    runtime: Runtime,
    *,
    log_path: str | os.PathLike[str] | None = None,
    recording: str | os.PathLike[str] | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
    pick_port: Callable[[], int] = free_port,
    attempts: int = PORT_ATTEMPTS,
) -> RuntimeServer:
    """Start ``runtime`` on a free loopback port and return it ready; the log goes to
    ``log_path``, else beside ``recording`` (``NAME.<runtime>.log``), else to the user cache.
    A failure is a ``SpectuiError`` of one line, after the process is gone."""
    log = log_file(log_path, recording, runtime.name, runtime.log_folder)
    try:
        fd = storage.create_new(log, private=True)  # the log may quote prompts: 0600
    except FileExistsError:
        raise SpectuiError(f"{log} exists and is not empty; spectui does not write over it (name another log)") from None
    except OSError as exc:
        raise storage.disk_error(log, exc) from None
    try:
        for attempt in range(1, attempts + 1):
            port = pick_port()
            os.ftruncate(fd, 0)  # a retry's log replaces the failed bind's
            server = _spawn(runtime, port, fd, log)
            try:
                outcome = _wait_ready(server, ready_timeout_s)
            except BaseException:  # Ctrl-C while it loads: it goes too
                server.stop()
                raise
            if outcome in ("ready", _EXPOSED, _UNSEEN):
                # whatever its flags said, a server this process started never serves beyond
                # this machine: kept only where it is seen listening on its port and on loopback
                # alone, while it loads (``_wait_ready``) and once ready; otherwise stopped
                sockets, _why = read_listeners(server.pid)
                exposed = beyond_loopback(sockets or ())
                if outcome == "ready" and sockets is not None and not exposed and any(p == port for _, p in sockets):
                    server.guard()
                    return server
                server.stop()
                if exposed or outcome == _EXPOSED:
                    raise SpectuiError(f"{runtime.name} listened on {', '.join(exposed) or 'an address'} (port {port}), beyond "
                                       f"this machine; spectui's runtimes listen on {HOST} only: stopped (log: {log})")
                state = "answered" if outcome == "ready" else "was loading"
                raise SpectuiError(f"{runtime.name} {state} on port {port}, but where its processes listen could not "
                                   f"be read, so that it listens on {HOST} only is not known: stopped (log: {log})")
            server.stop()
            if outcome == "bind" and attempt < attempts:
                continue
            if outcome == "bind":
                raise SpectuiError(f"{runtime.name} could not bind a port on {HOST} in {attempts} tries (last {port}); log: {log}")
            raise SpectuiError(f"{runtime.name} {outcome}: {last_log_line(log)} (log: {log})")
        raise AssertionError("unreachable")
    finally:
        os.close(fd)  # the child holds its own copy


def _spawn(runtime: Runtime, port: int, log_fd: int, log: Path) -> RuntimeServer:
    api_key = secrets.token_urlsafe(32) if runtime.takes_key() else ""
    argv = runtime.argv(port)
    workdir = getattr(runtime, "workdir", None)  # optional: a runtime that must not start where the user is
    proc = lifetime.spawn(argv, env=runtime.environment(api_key), stdout=log_fd, cwd=workdir() if workdir else None)
    try:  # registered with ``lifetime`` already: an interruption here leaves nothing behind
        server = RuntimeServer(runtime, proc, argv, port, api_key, log)
        lifetime.keep(server)
    except BaseException:
        lifetime.signal_group(proc, signal.SIGKILL)
        proc.wait()
        raise
    return server


def read_listeners(pid: int) -> tuple[list[tuple[str, int]] | None, str]:
    """``listening_sockets`` failing closed: any error reads as "could not be read" (None),
    with the error in words ("" where it was only refused)."""
    try:
        return listening_sockets(pid), ""
    except Exception as exc:  # noqa: BLE001 - an unexpected error must not pass for loopback alone
        return None, _said(exc)


def _said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:200].replace("\n", " ")


#: ``_wait_ready``'s outcomes for a server seen listening beyond loopback while it loaded, and
#: for one whose listeners could not be read then (no wide listener seen is no proof of none)
_EXPOSED, _UNSEEN = "exposed", "unseen"


def _wait_ready(server: RuntimeServer, timeout_s: float) -> str:
    """"ready", "bind" (the port was taken), ``_EXPOSED`` (it listened beyond loopback while
    loading: a model takes minutes to load, and it would be reachable all that time),
    ``_UNSEEN`` (where it listened could not be read while it loaded) or why it failed, as words.

    Nothing is asked of the port before the server's log says it listens there: until then
    the port may belong to someone else, whose answer would pass for ours."""
    started = time.monotonic()
    runtime = server.runtime
    listening = runtime.listening(server.port)
    pause = 0.02
    while True:
        rc = server.proc.poll()
        failed_bind = runtime.bind_failed(read_tail(server.log_path))
        if rc is not None:
            return "bind" if failed_bind else f"exited with status {rc} before it was ready"
        if failed_bind:  # a server whose other threads keep it alive after the bind failed
            return "bind"
        sockets, _why = read_listeners(server.pid)
        if sockets is None:
            if server.proc.poll() is None:  # not an exit between the two looks: unreadable
                return _UNSEEN
            continue  # it exited: the next look says how
        if beyond_loopback(sockets):
            return _EXPOSED
        if listening.search(read_all(server.log_path)):
            try:
                if runtime.ready(server):
                    server.started_s = time.monotonic() - started
                    return "ready"
            except ServerError:
                pass  # still warming up
            except StartFailed as exc:
                return str(exc)
        if time.monotonic() - started > timeout_s:
            return f"was not ready within {timeout_s:.0f} s"
        time.sleep(pause)
        # a small model is ready within a second, and tune starts a server for every candidate it
        # screens: looks 50 ms apart then (steps growing to 0.5 s cost 0.1-0.2 s of a 0.5 s start),
        # farther apart once a big model is clearly loading
        waited = time.monotonic() - started
        pause = min(pause * 1.5, 0.05 if waited < 2.0 else 0.1 if waited < 5.0 else 0.5)
