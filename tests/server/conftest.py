"""Real servers on loopback for the server-session tests: ``python -m llama_cpp.server`` and
``python -m mlx_lm.server`` on the embedded model, each started on a free 127.0.0.1 port,
waited for with a deadline, and stopped (terminate, then kill) when its module is done.

Every request these tests make goes to 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

import pytest

#: A server that is not answering after this long is a failure, not a slow start.
START_DEADLINE_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RunningServer:
    proc: subprocess.Popen
    port: int
    log: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, n: int = 2000) -> str:
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)


def start_server(module_args: list[str], ready_path: str, log_dir: str, *, program: str | None = None) -> RunningServer:
    """``python -m <module_args> --host 127.0.0.1 --port P`` (or ``program <module_args> ...``,
    a server binary); returns once ``ready_path`` answers 200, or fails the test with the
    server's log."""
    port = free_port()
    name = os.path.basename(program) if program else module_args[0]
    log = os.path.join(log_dir, f"{name}-{port}.log")
    argv = [program] if program else [sys.executable, "-m"]
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [*argv, *module_args, "--host", "127.0.0.1", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a stray signal to the test run does not reach it
        )
    server = RunningServer(proc, port, log)
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{name} exited with {proc.returncode} before answering:\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(f"{server.url}{ready_path}", timeout=5) as r:
                if r.status == 200:
                    return server
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    server.stop()
    pytest.fail(f"{name} did not answer {ready_path} within {START_DEADLINE_S:.0f} s:\n{server.log_tail()}")


def llama_cpp_server_args(model_path: str, *extra: str) -> list[str]:
    # flash attention on: llama.cpp's own default (auto) enables it on this CPU, and the
    # embedded engine runs with that default. llama-cpp-python's server turns it off unless
    # asked, and its other attention kernels round differently: on SmolLM2's near-ties that
    # changes greedy tokens (measured here: "Say hi" parts from the embedded output at its sixth token).
    return [
        "llama_cpp.server", "--model", model_path, "--n_ctx", "2048", "--n_threads", "2",
        "--flash_attn", "True", "--verbose", "False", *extra,
    ]


@pytest.fixture(scope="module")
def server_logs(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("server-logs"))


@pytest.fixture(scope="session")
def mlx_model_dir(model_path, tmp_path_factory) -> str:
    """The embedded GGUF as an mlx-lm model directory, made once per test session."""
    from spectui.engine.backends.mlx_gguf import export_mlx_model

    return export_mlx_model(model_path, tmp_path_factory.mktemp("mlx") / "smollm2")


class JsonHandler(BaseHTTPRequestHandler):
    """A stand-in server's handler: HTTP/1.0 (the body ends when the connection closes, as
    mlx-lm's does), quiet, with a JSON reply helper."""

    protocol_version = "HTTP/1.0"

    def log_message(self, *args: object) -> None:  # keep pytest's output clean
        pass

    def _json(self, status: int, obj: object) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def ar_server(model_path, server_logs):
    """llama-cpp-python's server on the embedded model, no drafting: one per test module."""
    server = start_server(llama_cpp_server_args(model_path), "/v1/models", server_logs)
    yield server
    server.stop()
