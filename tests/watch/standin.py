"""A real HTTP server on 127.0.0.1 that answers as llama-server, vLLM or SGLang do, serving the
``/metrics`` texts of tests/data/metrics (one moment per read, the last one repeated), ``/props``
and ``/slots`` as llama-server does, and writing down every request it gets: what the watch
tests (CLI, dashboard, recording) watch without a model."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from spectui.watch.source import WATCH_PATHS

DATA = Path(__file__).resolve().parents[1] / "data" / "metrics"
LLAMA_OFF = {
    "error": {
        "code": 501,
        "message": "This server does not support metrics endpoint. Start it with `--metrics`",
        "type": "not_supported_error",
    }
}


class StandIn(ThreadingHTTPServer):
    """A server that answers as ``flavour`` does and counts every request (method, path)."""

    daemon_threads = True

    def __init__(self, flavour: str, texts: list[str]) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.flavour = flavour
        self.texts = texts
        self.metrics_reads = 0
        self.delay_s = 0.0  # how long /metrics takes to answer (a server under load)
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: StandIn

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj: object) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json")

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        srv = self.server
        with srv.lock:
            srv.requests.append(("GET", self.path))
        if self.path == "/metrics":
            if srv.delay_s:
                time.sleep(srv.delay_s)
            if srv.flavour == "llama-off":
                return self._json(501, LLAMA_OFF)
            if srv.flavour == "none":
                return self._json(404, {"detail": "Not Found"})
            with srv.lock:
                text = srv.texts[min(srv.metrics_reads, len(srv.texts) - 1)]
                srv.metrics_reads += 1
            # llama-server names its process start in a header: constant here (the restart in
            # the texts is seen by its counters going down)
            extra = {"Process-Start-Time-Unix": "1795000000"} if srv.flavour == "llama-server" else {}
            return self._send(200, text.encode(), "text/plain; version=0.0.4", extra)
        if srv.flavour == "llama-server" and self.path == "/props":
            return self._json(200, {"build_info": "b9999-standin", "model_path": "/models/SmolLM2.gguf", "total_slots": 1, "endpoint_metrics": True})
        if srv.flavour == "llama-server" and self.path == "/slots":
            slot = {"id": 0, "n_ctx": 2048, "speculative": True, "is_processing": True, "next_token": [{"n_decoded": 17}]}
            return self._json(200, [slot])
        if self.path == "/v1/models":
            return self._json(200, {"object": "list", "data": [{"id": "standin-model", "object": "model"}]})
        return self._json(404, {"error": "not found"})

    def _refuse(self) -> None:
        with self.server.lock:
            self.server.requests.append((self.command, self.path))
        self._json(405, {"error": "a watch must not send this"})

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse  # noqa: N815


def serve(flavour: str, server_name: str = "") -> Iterator[StandIn]:
    texts = [p.read_text() for p in sorted(DATA.glob(f"{server_name}-*.txt"))] if server_name else [""]
    srv = StandIn(flavour, texts)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def assert_only_reads(srv: StandIn) -> None:
    methods = {m for m, _ in srv.requests}
    paths = {p for _, p in srv.requests}
    assert methods == {"GET"}, srv.requests
    assert paths <= set(WATCH_PATHS), paths
    assert not any("completion" in p or "chat" in p for p in paths)
