"""How a server session ends when the server misbehaves: killed mid-stream, HTTP errors,
malformed chunks, a stall, a dropped connection, an error sent in band, refused connections,
bad URLs and API keys.

The killed server is a real ``llama_cpp.server``. The other faults come from a small
``http.server`` endpoint in this file, on a real loopback socket, that sends exactly the bytes
each fault needs; spectui's own code runs unchanged against it. Every recording must keep each
token that arrived and end with ``End(reason="error")`` and a one-line reason.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from spectui.config import BackendConfig, RunConfig
from spectui.errors import SpectuiError
from spectui.recording.reader import read_recording
from spectui.recording.schema import End, Header, Step
from spectui.recording.writer import RecordingWriter
from spectui.server.engine import ServerEngine
from spectui.sessions.open import open_engine
from tests.conftest import run_cli
from tests.server.conftest import JsonHandler, free_port, llama_cpp_server_args, start_server


def chunk(text: str) -> bytes:
    body = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return f"data: {json.dumps(body)}\n\n".encode()


class FaultyServer(JsonHandler):
    """An OpenAI-style endpoint whose completion behaves as ``self.server.fault`` says."""

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self.server.auth_seen.append(self.headers.get("Authorization"))
            self._json(200, {"object": "list", "data": [{"id": "faulty", "object": "model", "owned_by": "tests"}]})
        else:
            self._json(404, {"error": "not here"})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        fault = self.server.fault
        if fault == "http500":
            self._json(500, {"error": {"code": 500, "message": "the model fell over", "type": "server_error"}})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(chunk("Hello") + chunk(" there"))
        self.wfile.flush()
        if fault == "malformed":
            self.wfile.write(b'data: {"choices": [{"delta": {"content": "!"\n\n')
        elif fault == "stall":
            self.server.release.wait(10)
        elif fault == "inband":
            self.wfile.write(b'error: {"code": 500, "message": "slot unavailable", "type": "unavailable_error"}\n\n')
        elif fault == "drop":
            pass  # the connection closes here: no finish reason, no [DONE]
        elif fault == "complete":
            end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()


@pytest.fixture
def faulty() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FaultyServer)
    server.daemon_threads = True
    server.fault = "complete"
    server.auth_seen = []
    server.release = threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()


def url_of(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def config_for(url: str, **kw: object) -> RunConfig:
    settings = {"prompt": "Say hi", "mode": "ar", "max_tokens": 32, **kw}
    return RunConfig(backend=BackendConfig(name="server", server_url=url), **settings)


def recorded(engine, config: RunConfig, path) -> tuple[list, list[int]]:
    """Run a session into a recording; return its events as read back, and the token ids seen."""
    seen: list[int] = []
    with RecordingWriter(path) as w:
        for ev in engine.run(config):
            w.write(ev)
            if type(ev) is Step:
                seen += ev.tokens
    return read_recording(path).events, seen


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


# -- a real server killed mid-stream ---------------------------------------------------------


def test_server_killed_mid_stream_keeps_every_received_token(model_path, server_logs, tmp_path):
    server = start_server(llama_cpp_server_args(model_path), "/v1/models", server_logs)
    try:
        config = config_for(server.url, max_tokens=400, prompt="Count from one to two hundred in words, one number per line.")
        engine = open_engine(config)
        assert isinstance(engine, ServerEngine)
        path = tmp_path / "killed.spectui"
        received: list[int] = []
        steps = 0
        with RecordingWriter(path) as w:
            for ev in engine.run(config):
                w.write(ev)
                if type(ev) is Step:
                    received += ev.tokens
                    steps += 1
                    if steps == 3:
                        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait(timeout=10)
    finally:
        server.stop()
    rec = read_recording(path)
    assert rec.complete and not rec.truncated
    kept = [t for e in rec.events if type(e) is Step for t in e.tokens]
    assert kept == received and len(kept) >= 3
    end = rec.events[-1]
    assert type(end) is End and end.reason == "error" and end.n_tokens == len(kept) < 400
    assert "mid-stream" in end.error, end.error
    assert f"after {end.server.chunks} content chunk" in end.error and "\n" not in end.error


# -- faults from the small endpoint ----------------------------------------------------------


def test_http_error_keeps_the_recording_and_exits_1(faulty, tmp_path):
    faulty.fault = "http500"
    path = tmp_path / "http500.spectui"
    proc = run_cli("run", "--headless", "--server", url_of(faulty), "--prompt", "Say hi", "--record", str(path))
    assert proc.returncode == 1, proc.stderr
    assert "HTTP 500 Internal Server Error from POST /v1/chat/completions: the model fell over" in proc.stderr
    rec = read_recording(path)
    assert [type(e) for e in rec.events] == [Header, End]
    assert rec.events[-1].reason == "error" and "the model fell over" in rec.events[-1].error
    assert rec.header.artifacts.server.kind == "openai-compatible"


def test_malformed_chunk_ends_the_session_after_the_good_ones(faulty, tmp_path):
    faulty.fault = "malformed"
    path = tmp_path / "malformed.spectui"
    proc = run_cli("run", "--headless", "--json", "--server", url_of(faulty), "--prompt", "Say hi", "--record", str(path))
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["text"] == "Hello there"
    events = read_recording(path).events
    assert b"".join(p for e in events if type(e) is Step for p in e.pieces) == b"Hello there"
    end = events[-1]
    assert end.reason == "error" and end.error.startswith("malformed chunk (not JSON") and "after 2 content chunks" in end.error


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("stall", "timed out: the server sent nothing for 1 s"),
        ("drop", "the server closed the connection mid-stream (after 2 content chunks"),
        ("inband", "the server reported an error mid-stream: slot unavailable"),
    ],
)
def test_stall_drop_and_in_band_error_end_with_the_tokens_received(faulty, tmp_path, fault, reason):
    faulty.fault = fault
    config = config_for(url_of(faulty))
    engine = ServerEngine.load(config, read_timeout_s=1.0)
    events, seen = recorded(engine, config, tmp_path / f"{fault}.spectui")
    assert len(seen) == 2 and [type(e) for e in events][-1] is End  # "Hello", " there": -1 each (no vocabulary)
    end = events[-1]
    assert end.reason == "error" and end.error.startswith(reason), end.error
    assert end.server.token_ids == "none" and end.server.chunks == 2


def test_a_complete_stream_from_an_unknown_server(faulty, tmp_path):
    events, seen = recorded(ServerEngine.load(config_for(url_of(faulty))), config_for(url_of(faulty)), tmp_path / "ok.spectui")
    end = events[-1]
    assert end.reason == "stop" and end.error == "" and seen == [-1, -1]
    assert end.server.acceptance_source == "not reported (openai-compatible reports no draft acceptance per request)"


def test_api_key_from_the_environment_is_sent_and_never_recorded(faulty, tmp_path):
    path = tmp_path / "key.spectui"
    env_var = "SPECTUI_TEST_SERVER_KEY"
    os.environ[env_var] = "s3cret-key-value"
    try:
        proc = run_cli("run", "--headless", "--server", url_of(faulty), "--api-key-env", env_var, "--prompt", "Say hi", "--record", str(path))
    finally:
        del os.environ[env_var]
    assert proc.returncode == 0, proc.stderr
    assert faulty.auth_seen == ["Bearer s3cret-key-value"]
    assert b"s3cret" not in path.read_bytes()
    assert read_recording(path).header.config.backend.api_key_env == env_var

    missing = run_cli("run", "--headless", "--server", url_of(faulty), "--api-key-env", "SPECTUI_NO_SUCH_VAR", "--prompt", "x")
    assert missing.returncode == 2 and "SPECTUI_NO_SUCH_VAR: that environment variable is not set" in one_line(missing.stderr)


def test_unreachable_server_and_bad_urls_are_one_line_and_exit_2():
    port = free_port()  # nothing listens there
    proc = run_cli("run", "--headless", "--server", f"http://127.0.0.1:{port}", "--prompt", "x")
    assert proc.returncode == 2 and proc.stdout == ""
    assert one_line(proc.stderr) == (f"spectui: error: cannot connect to http://127.0.0.1:{port}: connection refused"
                                     " (is the server running, and on that port?)")
    for url, fragment in [
        ("ftp://127.0.0.1:1", "expected http://HOST:PORT"),
        ("http://user:pw@127.0.0.1:1", "put no credentials in the server URL"),
        ("http://127.0.0.1:99999", "bad server URL"),
    ]:
        proc = run_cli("run", "--headless", "--server", url, "--prompt", "x")
        assert proc.returncode == 2 and fragment in one_line(proc.stderr), proc.stderr
    with pytest.raises(SpectuiError, match="needs a URL"):
        ServerEngine.load(RunConfig(prompt="x", backend=BackendConfig(name="server")))
