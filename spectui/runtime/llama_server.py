"""llama-server as a runtime spectui starts, measures and stops (``--runtime llama-server``).

``launch`` starts llama-server on 127.0.0.1 with the run's settings and method through the
shared launcher (``spectui.runtime.server.start``), which waits until ``/health`` answers;
``LlamaServer.ready`` reads ``/props`` then. What cannot work (a missing model, a method the
GGUF headers rule out, a ``--spec-type`` the binary does not list) is refused before anything
starts.

What llama-server needs besides what the launcher does for every runtime:

* **Its API key in its environment** (``LLAMA_API_KEY``), never on its command line; it is
  not in the log either (llama-server prints keys at trace level only). ``/health`` stays
  public (llama-server's rule), every other route asks for the key.
* **No /slots** (``--no-slots``): llama-server cannot show part of it, and it shows the
  prompts; the recording takes the speculative settings from the command line instead. No web
  UI (``--no-webui``), one slot unless a workload asks for more (``-np``), ``--metrics`` for the
  acceptance counters.
* **The environment is the command line's**: ``LLAMA_ARG_*`` variables (llama-server reads
  one per flag) are dropped from the child's environment, so ``command_line`` is the whole
  configuration.
* **A busy port shows at once**: llama-server binds before it loads the model, so a bind
  failure is in its log within milliseconds and the launcher tries another port.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from spectui.errors import SpectuiError
from spectui.runtime.build import ServerBinary, spec_types
from spectui.runtime.methods import RuntimeMethod
from spectui.runtime.server import HOST, PORT_ATTEMPTS, READY_TIMEOUT_S, RuntimeServer, free_port, start

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
    #: slots (``-np``): clients served at once, each with a context of ``ctx`` tokens and, for a
    #: speculative method, a drafting state of its own (a workload's clients)
    parallel: int = 1

    def args(self, port: int) -> list[str]:
        threads = str(self.threads or _usable_cores())
        # llama-server splits ``-c`` between its slots: each slot gets the context a run asks for
        ctx = str(self.ctx * self.parallel)
        out = ["-m", self.model, "-c", ctx, "-t", threads, "-tb", threads, "-fa", self.flash_attn]
        if self.gpu_layers >= 0:
            out += ["-ngl", str(self.gpu_layers)]
        if self.method.uses_draft_model:
            out += ["-td", threads, "-tbd", threads]
        out += ["-np", str(self.parallel), "--metrics", "--no-slots", "--no-webui", *self.method.args()]
        # last, so that no flag before them can move the server off loopback (llama-server
        # takes the last of a repeated flag)
        return out + ["--host", HOST, "--port", str(port)]


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


@dataclass(frozen=True)
class LlamaServer:
    """llama-server as a ``Runtime``."""

    binary: ServerBinary
    settings: LaunchSettings
    name: str = "llama-server"
    log_folder: str = "llama.cpp/logs"

    def argv(self, port: int) -> list[str]:
        return [self.binary.path, *self.settings.args(port)]

    def environment(self, api_key: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_") and k != "LLAMA_API_KEY"}
        env["LLAMA_API_KEY"] = api_key
        return env

    def takes_key(self) -> bool:
        return True

    def listening(self, port: int) -> re.Pattern[str]:
        # after the model loaded, in this revision and in older ones alike
        return re.compile(rf"listening on https?://{re.escape(HOST)}:{port}\b")

    def bind_failed(self, log_tail: str) -> bool:
        return _BIND_FAILED in log_tail

    def ready(self, server: RuntimeServer) -> bool:
        client = server.client(read_timeout_s=5.0)
        if not client.get("/health", timeout_s=5.0).ok:
            return False  # still warming up (503)
        props = client.get("/props", timeout_s=10.0)
        server.props = props.json() if props.ok and isinstance(props.json(), dict) else {}
        return True

    def props(self) -> dict[str, str]:
        b = self.binary
        out = {"runtime.binary": b.path, "runtime.origin": b.origin, "runtime.version": b.version or "unknown",
               "runtime.commit": b.commit or "unknown"}
        if b.llama_cpp_python:
            out["runtime.built_from"] = f"llama-cpp-python {b.llama_cpp_python}"
        return out


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
    return start(LlamaServer(binary, settings), log_path=log_path, recording=recording, ready_timeout_s=ready_timeout_s,
                 pick_port=pick_port, attempts=attempts)


@functools.lru_cache(maxsize=8)
def _types_of(path: str, _mtime_ns: int) -> tuple[str, ...]:
    return spec_types(path)


def accepted_types(path: str) -> tuple[str, ...]:
    """The binary's ``--spec-type`` values, read from its ``--help`` once per file version."""
    try:
        return _types_of(path, os.stat(path).st_mtime_ns)
    except OSError as exc:
        raise SpectuiError(f"cannot run {path}: {exc.strerror or exc}") from None
