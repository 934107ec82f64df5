"""The node's side of the channel: ``spectui node serve``, started by the local spectui over SSH.

It says hello (``wire.Hello``), then answers requests read from stdin one at a time, holding
one engine between them (a conversation keeps its KV cache on the node between turns, a sweep
loads a model once). A run's events go to stdout framed as the recorder frames them, each as
soon as it exists; nothing is written to disk on the node.

The process never outlives the connection. When the link drops, sshd closes the session's
pipes: stdin reaches end of file (the current run is stopped, and the process exits within
``EXIT_GRACE_S`` even if a model is still loading), and the next write to stdout fails
(SIGPIPE, left at its default, ends the process at once). SIGHUP and SIGTERM end it too. The
engine and what it computes are passed in (``spectui.cli.node`` wires the sessions layer), so
this package stays beside the engine and the server client, not above them.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.recording.schema import End, Header
from spectui.remote.wire import Hello, Reply, Request, decode_request, frame

#: After stdin ends, the seconds the node waits for the current step to finish and the engine
#: to close before it exits regardless.
EXIT_GRACE_S = 5.0

OpenEngine = Callable[[RunConfig], Any]
RunSession = Callable[..., Iterator[Any]]


class _Output:
    """The real stdout, kept for frames; fd 1 itself is pointed at stderr, so nothing a
    library prints can land inside the stream."""

    def __init__(self) -> None:
        from spectui.recording.writer import MAGIC

        sys.stdout.flush()
        self._fd = os.dup(1)
        os.dup2(2, 1)
        self._send(MAGIC)

    def write(self, record: object) -> None:
        self._send(frame(record))

    def _send(self, payload: bytes) -> None:
        data = memoryview(payload)
        while data:
            try:
                n = os.write(self._fd, data)
            except BrokenPipeError:  # the connection is gone: nobody is left to tell
                os._exit(141)
            data = data[n:]


def _hang_up_exits() -> None:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    for sig in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: os._exit(128 + signum))


def open_stream() -> _Output:
    """stdout as a record stream (the recording format), for a command other than ``serve`` that
    streams to the local side (``spectui node watch``); the process ends when the link drops."""
    _hang_up_exits()
    return _Output()


def serve(hello: Hello, open_engine: OpenEngine, run_session: RunSession, prepare: Callable[[RunConfig], RunConfig],
          *, stdin: BinaryIO | None = None) -> int:  # fmt: skip
    """Serve the channel until stdin ends. ``prepare`` resolves a configuration on this node
    (catalogue names to paths, the undeclared headroom floor from this node's memory)."""
    _hang_up_exits()
    out = _Output()
    out.write(hello)
    requests: queue.Queue[tuple[Request, threading.Event] | None] = queue.Queue()
    current_stop = [threading.Event()]

    def read_requests() -> None:
        for line in stdin or sys.stdin.buffer:
            try:
                request = decode_request(line)
            except Exception:  # noqa: BLE001 - not our peer: refused (no configuration) below
                requests.put((Request(op="check"), threading.Event()))
                continue
            if request.op == "stop":
                current_stop[0].set()
                continue
            stop = threading.Event()
            if request.op == "run":
                current_stop[0] = stop
            requests.put((request, stop))
        # End of file: the local side closed the channel, or the link dropped.
        current_stop[0].set()
        requests.put(None)
        timer = threading.Timer(EXIT_GRACE_S, os._exit, args=(0,))
        timer.daemon = True
        timer.start()

    threading.Thread(target=read_requests, name="spectui-node-stdin", daemon=True).start()
    engine = None
    try:
        while (item := requests.get()) is not None:
            request, stop = item
            engine = _answer(request, stop, engine, out, open_engine, run_session, prepare)
    finally:
        if engine is not None:
            engine.close()
    return 0


def _answer(request: Request, stop: threading.Event, engine: Any, out: _Output, open_engine: OpenEngine,
            run_session: RunSession, prepare: Callable[[RunConfig], RunConfig]) -> Any:  # fmt: skip
    """Answer one request; return the engine held afterwards."""
    header_sent = False
    try:
        if request.config is None:
            raise SpectuiError("an unreadable request: is the spectui here the one on the other side?")
        config = prepare(request.config)
        if request.op == "open":
            if engine is None or not engine.fits(config):
                if engine is not None:
                    engine, old = None, engine
                    old.close()
                engine = open_engine(config)
            out.write(Reply())
            return engine
        if engine is None:
            raise SpectuiError("no engine is open on this node")
        if request.op == "check":
            engine.check(config)
            out.write(Reply())
        elif request.op == "fits":
            out.write(Reply(fits=engine.fits(config)))
        elif request.op == "calibrate":
            out.write(Reply(batch_noise=engine.calibrate(config)))
        elif request.op == "run":
            for event in run_session(engine, config, stop=stop):
                header_sent = header_sent or type(event) is Header
                out.write(event)
    except SpectuiError as exc:
        out.write(Reply(ok=False, error=str(exc)) if not header_sent else End(reason="error", error=str(exc)))
    except Exception as exc:  # noqa: BLE001 - the local side must hear of it, in one line
        why = f"{type(exc).__name__}: {exc}"
        out.write(Reply(ok=False, error=why) if not header_sent else End(reason="error", error=why))
    return engine


def node_hello() -> Hello:
    """What this machine is and can run: the handshake's record."""
    import importlib.util
    from importlib import metadata

    from spectui import __version__
    from spectui.models.artifacts import host_info
    from spectui.recording.schema import SCHEMA_VERSION

    backends = {}
    for module, dist in (("llama_cpp", "llama-cpp-python"), ("mlx", "mlx"), ("mlx_lm", "mlx-lm")):
        if importlib.util.find_spec(module) is not None:
            try:
                backends[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                backends[dist] = "?"
    try:
        from spectui.models.catalogue import discover

        models = [m.name for m in discover().models]
    except (SpectuiError, OSError):
        models = []
    return Hello(spectui_version=__version__, schema_version=SCHEMA_VERSION, host=host_info(), backends=backends, models=models)
