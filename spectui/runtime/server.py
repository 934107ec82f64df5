"""Starting llama-server for a run, and making sure it stops.

``launch`` starts the binary on 127.0.0.1 with the run's settings and method, waits until
``/health`` answers, reads ``/props``, and returns a ``RuntimeServer`` whose ``client()`` is the
existing server client (``spectui.server.client``) with the key set. ``stop`` (also on leaving a
``with`` block) ends it.

What a shared machine needs (issue 43):

* **A fresh API key per start** (``secrets``), handed to llama-server in its environment
  (``LLAMA_API_KEY``), never on its command line, which every user can read in ``ps``;
  ``/proc/PID/environ`` is readable by its owner only. It is given to the client and nowhere
  else: not in ``command_line``, not in the log (llama-server prints keys at trace level
  only), not in errors. ``/health`` stays public (llama-server's rule), every other route asks
  for the key.
* **No /slots** (``--no-slots``): llama-server cannot show part of it, and it shows the
  prompts; the recording takes the speculative settings from the command line instead. No web
  UI (``--no-webui``), one slot (``-np 1``), ``--metrics`` for the acceptance counters.
* **The environment is the command line's**: ``LLAMA_ARG_*`` variables (llama-server reads
  one per flag) are dropped from the child's environment, so ``command_line`` is the whole
  configuration.
* **A free port, and a busy one is not a failure**: a port the OS just gave out can be taken
  before llama-server binds it; llama-server binds before it loads the model, so a bind
  failure shows within milliseconds and the launch tries another port.
* **It never outlives spectui**: its own process group (a Ctrl-C in the terminal reaches
  spectui only, which stops it in order), stopped by ``stop``, by an ``atexit`` hook on any
  exit, and on Linux by the kernel when spectui dies by any signal, SIGKILL included
  (``prctl(PR_SET_PDEATHSIG, SIGKILL)`` set in the child before exec). The kernel sends that
  signal when the *thread* that forked the child ends, so every server is forked by one
  long-lived thread of its own (``_Spawner``), whichever thread asks. macOS has no
  PDEATHSIG: there ``atexit`` and a SIGTERM/SIGHUP handler (installed only where the signal
  has none) cover every way out but SIGKILL and a crash of the interpreter itself; a
  watchdog process that holds a pipe to spectui would close that gap (not built yet).
* **A failed start is one line**: the exit status or the timeout, and the last meaningful
  line of its log; the log is kept (beside the recording when one is named, else in the
  user cache) and its path is in the line.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import datetime as dt
import functools
import os
import queue
import re
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spectui import storage
from spectui.errors import SpectuiError
from spectui.paths import cache_dir
from spectui.runtime.build import ServerBinary, spec_types
from spectui.runtime.methods import RuntimeMethod
from spectui.server.client import ServerClient, ServerError, parse_server_url

HOST = "127.0.0.1"
#: How long a model may take to load before the start counts as failed.
READY_TIMEOUT_S = 180.0
#: How long a stopped server gets to exit on SIGTERM before SIGKILL.
STOP_GRACE_S = 10.0
#: Ports tried before a start gives up on binding.
PORT_ATTEMPTS = 5
#: Server logs without a recording to sit beside: the newest are kept.
KEEP_LOGS = 20
_BIND_FAILED = "couldn't bind HTTP server socket"


@dataclass(frozen=True)
class LaunchSettings:
    """What a run asks of the server; ``threads`` 0 = one per core this process may use."""

    model: str
    method: RuntimeMethod = field(default_factory=lambda: RuntimeMethod(("none",)))
    threads: int = 0
    ctx: int = 4096
    flash_attn: str = "auto"  # llama.cpp's on / off / auto
    gpu_layers: int = -1  # -1 = llama-server's own default
    extra: tuple[str, ...] = ()  # more flags, passed as they are

    def args(self, port: int) -> list[str]:
        threads = str(self.threads or _usable_cores())
        out = ["-m", self.model, "-c", str(self.ctx), "-t", threads, "-tb", threads, "-fa", self.flash_attn]
        if self.gpu_layers >= 0:
            out += ["-ngl", str(self.gpu_layers)]
        if self.method.uses_draft_model:
            out += ["-td", threads, "-tbd", threads]
        out += ["-np", "1", "--metrics", "--no-slots", "--no-webui", "--host", HOST, "--port", str(port)]
        return out + self.method.args() + list(self.extra)


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def free_port() -> int:
    """A loopback port nobody holds this instant (the OS's pick)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class RuntimeServer:
    """A llama-server this process started: its port, client, command line, ``/props``, log."""

    def __init__(self, binary: ServerBinary, proc: subprocess.Popen, argv: list[str], port: int, api_key: str, log_path: Path) -> None:
        self.binary = binary
        self.proc = proc
        self.argv = argv
        self.port = port
        self._api_key = api_key
        self.log_path = log_path
        self.props: dict[str, Any] = {}
        self.started_s = 0.0  # launch to ready, seconds

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

    def stop(self) -> int | None:
        """SIGTERM to its process group, SIGKILL after ``STOP_GRACE_S``; its exit status."""
        _LIVE.discard(self)
        if self.proc.poll() is None:
            _signal_group(self.proc, signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self) -> RuntimeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def last_log_line(self) -> str:
        return last_log_line(self.log_path)


def launch(
    binary: ServerBinary,
    settings: LaunchSettings,
    *,
    log_path: str | os.PathLike[str] | None = None,
    recording: str | os.PathLike[str] | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
    pick_port: Callable[[], int] = free_port,
    attempts: int = PORT_ATTEMPTS,
) -> RuntimeServer:
    """Start llama-server and return it ready (``/health`` 200, ``/props`` read). The log
    goes to ``log_path``, else beside ``recording`` (``NAME.llama-server.log``), else to the
    user cache. What cannot work (a missing model, a method the GGUF headers rule out, a
    ``--spec-type`` the binary does not list) is refused before anything starts. A failure is
    a ``SpectuiError`` of one line, after the process is gone."""
    if not os.path.isfile(settings.model):
        raise SpectuiError(f"model file not found: {settings.model}")
    accepted = accepted_types(binary.path) if settings.method.speculative else ()
    if settings.method.speculative and not accepted:
        raise SpectuiError(f"{binary.path} has no --spec-type (a llama-server older than llama.cpp's speculative types); "
                           "`spectui runtime build` makes one from the vendored llama.cpp")
    settings.method.check(settings.model, accepted=accepted)
    log = _log_file(log_path, recording)
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
            server = _start(binary, settings, port, fd, log)
            try:
                outcome = _wait_ready(server, ready_timeout_s)
            except BaseException:  # Ctrl-C while it loads: it goes too
                server.stop()
                raise
            if outcome == "ready":
                return server
            server.stop()
            if outcome == "bind" and attempt < attempts:
                continue
            if outcome == "bind":
                raise SpectuiError(f"llama-server could not bind a port on {HOST} in {attempts} tries (last {port}); log: {log}")
            raise SpectuiError(f"llama-server {outcome}: {last_log_line(log)} (log: {log})")
        raise AssertionError("unreachable")
    finally:
        os.close(fd)  # the child holds its own copy


@functools.lru_cache(maxsize=8)
def _types_of(path: str, _mtime_ns: int) -> tuple[str, ...]:
    return spec_types(path)


def accepted_types(path: str) -> tuple[str, ...]:
    """The binary's ``--spec-type`` values, read from its ``--help`` once per file version."""
    try:
        return _types_of(path, os.stat(path).st_mtime_ns)
    except OSError as exc:
        raise SpectuiError(f"cannot run {path}: {exc.strerror or exc}") from None


def _start(binary: ServerBinary, settings: LaunchSettings, port: int, log_fd: int, log: Path) -> RuntimeServer:
    api_key = secrets.token_urlsafe(32)
    argv = [binary.path, *settings.args(port)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_") and k != "LLAMA_API_KEY"}
    env["LLAMA_API_KEY"] = api_key
    proc = _SPAWNER.popen(argv, env=env, stdout=log_fd)
    server = RuntimeServer(binary, proc, argv, port, api_key, log)
    _LIVE.add(server)
    _install_exit_hooks()
    return server


def _wait_ready(server: RuntimeServer, timeout_s: float) -> str:
    """"ready", "bind" (the port was taken) or why it failed, as words.

    Nothing is asked of the port before the server's log says it listens there
    (``listening on http://127.0.0.1:PORT``, after the model loaded, in this revision and in
    older ones alike): until then the port may belong to someone else, whose answer to
    ``/health`` would pass for ours."""
    started = time.monotonic()
    client = server.client(read_timeout_s=5.0)
    listening = re.compile(rf"listening on https?://{re.escape(HOST)}:{server.port}\b")
    pause = 0.05
    while True:
        rc = server.proc.poll()
        if rc is not None:
            return "bind" if _BIND_FAILED in _read_tail(server.log_path) else f"exited with status {rc} before it was ready"
        if listening.search(_read_all(server.log_path)):
            try:
                if client.get("/health", timeout_s=5.0).ok:
                    props = client.get("/props", timeout_s=10.0)
                    server.props = props.json() if props.ok and isinstance(props.json(), dict) else {}
                    server.started_s = time.monotonic() - started
                    return "ready"
            except ServerError:
                pass  # still warming up (503)
        if time.monotonic() - started > timeout_s:
            return f"was not ready within {timeout_s:.0f} s"
        time.sleep(pause)
        pause = min(pause * 1.5, 0.5)


def _read_all(path: Path, limit: int = 4 << 20) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def _log_file(log_path: str | os.PathLike[str] | None, recording: str | os.PathLike[str] | None) -> Path:
    if log_path is not None:
        path = Path(log_path)
        storage.prepare_dir(path.parent)
        return path
    if recording is not None:
        rec = Path(recording)
        folder = storage.prepare_dir(rec.parent, private=True)
        base = f"{rec.stem}.llama-server"
    else:
        folder = storage.prepare_dir(cache_dir() / "llama.cpp" / "logs", private=True)
        _prune_logs(folder)
        base = f"llama-server-{dt.datetime.now():%Y%m%d-%H%M%S}-{os.getpid()}"
    path = folder / f"{base}.log"
    n = 2
    while path.exists() and path.stat().st_size:  # never over another run's log
        path = folder / f"{base}-{n}.log"
        n += 1
    return path


def _prune_logs(folder: Path) -> None:
    logs = sorted(folder.glob("llama-server-*.log"), key=lambda p: p.stat().st_mtime)
    for old in logs[:-KEEP_LOGS]:
        with contextlib.suppress(OSError):
            old.unlink()


def _read_tail(path: Path, n: int = 16384) -> str:
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
    lines = [ln.strip() for ln in _read_tail(Path(path)).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not any(g in ln for g in _GENERIC)] or lines
    for words in (_CAUSE, _FAILED):
        telling = [ln for ln in lines if any(w in ln.lower() for w in words)]
        if telling:
            return telling[-1][:300]
    return (lines or ["(the log is empty)"])[-1][:300]


# -- never outliving spectui ------------------------------------------------------------------


_LIVE: set[RuntimeServer] = set()
_HOOKS = threading.Lock()
_hooked = False


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
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
