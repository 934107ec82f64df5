"""The real llama-server, started by spectui's launcher on 127.0.0.1, on the embedded model.

Exactness: each n-gram type, draft-simple (a Q8_0 requantized copy of the embedded model as the
draft) and a combination, then draft-mtp on a tiny random-weight qwen35 with one nextn layer,
each produce the greedy output of the same binary and model without speculation, token by
token, and report that they drafted. One thread with flash attention on: there a block's
logits equal one token's bit for bit (spectui.engine.host.noise: batch invariance), so equality is the
expected result rather than a near-tie lottery. The tokens come through the existing server
engine and client (``spectui.runtime.engine``).

Safety: a draft-mtp target without nextn layers is refused before any process starts; a busy
port is not a failure; a request without the key is refused; the key is in no command line,
log or repr; a failed start is one line with the server's log line; a server killed
mid-stream leaves the session every token that arrived; and a spectui process killed with
SIGKILL mid-run leaves no server behind.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from spectui.config import BackendConfig, RunConfig
from spectui.errors import SpectuiError
from spectui.recording.schema import End, Header, Step
from spectui.runtime.engine import runtime_engine
from spectui.runtime.llama_server import LaunchSettings, launch
from spectui.runtime.methods import RuntimeMethod
from spectui.runtime.server import HOST, free_port
from spectui.server.client import ServerClient, ServerError, parse_server_url
from tests.conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.server]

#: An answer that repeats its own n-grams ("1, 2, 3, ..."): every n-gram type drafts on it
#: (ngram-cache needs statistics from the text so far; measured: a typo-fixing prompt gave it none)
PROMPT = "List the numbers from 1 to 20, each on its own line, like: Number 1, Number 2, Number 3."
MAX_TOKENS = 96


def settings(model: str, method: str = "none", **kw: object) -> LaunchSettings:
    return LaunchSettings(model=model, method=RuntimeMethod.parse(method, **kw), threads=1, ctx=1024, flash_attn="on")


def greedy(server, target: str, *, prompt: str = PROMPT, max_tokens: int = MAX_TOKENS) -> tuple[list[int], End, Header]:
    config = RunConfig(target=target, mode="ar", prompt=prompt, max_tokens=max_tokens, backend=BackendConfig(name="server"))
    events = list(runtime_engine(server, config).run(config))
    end = events[-1]
    assert isinstance(end, End) and end.reason in ("stop", "length"), end.error
    tokens = [t for e in events if isinstance(e, Step) for t in e.tokens]
    return tokens, end, events[0]


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("runtime-logs")


@pytest.fixture(scope="module")
def ar_tokens(llama_server_binary, model_path, logs) -> list[int]:
    with launch(llama_server_binary, settings(model_path), log_path=logs / "ar.log") as server:
        tokens, end, _ = greedy(server, model_path)
    assert end.server is not None and end.server.token_ids == "server"  # the server's own ids
    assert len(tokens) >= 16
    return tokens


# short keys, or this short answer offers nothing to look up; ngram-mod's own n-min (48) would
# keep only full blocks of K
NGRAM = {"k": 8, "lookup": 2}


@pytest.mark.parametrize("method, kw", [
    ("ngram-simple", NGRAM), ("ngram-map-k", NGRAM), ("ngram-map-k4v", NGRAM), ("ngram-mod", {**NGRAM, "n_min": 1}),
    ("ngram-cache", {}),
], ids=lambda v: v if isinstance(v, str) else "")
def test_every_ngram_type_is_exact_and_drafts(llama_server_binary, model_path, ar_tokens, logs, method, kw):
    with launch(llama_server_binary, settings(model_path, method, **kw), log_path=logs / f"{method}.log") as server:
        tokens, end, header = greedy(server, model_path)
    assert tokens == ar_tokens, f"{method}: greedy output differs from the same server's AR output"
    assert end.server is not None and end.server.drafted > 0, f"{method} drafted nothing: {end.server}"
    props = header.artifacts.server.props
    assert f"--spec-type {method}" in props["runtime.command_line"]


def test_draft_simple_with_a_requantized_copy_is_exact(llama_server_binary, model_path, draft_copy, ar_tokens, logs):
    for method in ("draft-simple", "ngram-mod,draft-simple"):
        s = settings(model_path, method, k=4, lookup=2, draft_model=draft_copy)
        with launch(llama_server_binary, s, log_path=logs / f"{method}.log") as server:
            tokens, end, _ = greedy(server, model_path)
        assert tokens == ar_tokens, f"{method}: greedy output differs from the same server's AR output"
        assert end.server.drafted > 0 and end.server.accepted > 0, end.server


def test_draft_mtp_on_a_tiny_qwen35_with_a_nextn_layer_is_exact(llama_server_binary, tiny_mtp, logs):
    prompt = "Say something."
    with launch(llama_server_binary, settings(tiny_mtp), log_path=logs / "mtp-ar.log") as server:
        ar, _, _ = greedy(server, tiny_mtp, prompt=prompt, max_tokens=32)
    with launch(llama_server_binary, settings(tiny_mtp, "draft-mtp", k=2), log_path=logs / "mtp.log") as server:
        spec, end, _ = greedy(server, tiny_mtp, prompt=prompt, max_tokens=32)
    assert len(ar) >= 8
    assert spec == ar, "draft-mtp's greedy output differs from the same model without speculation"
    assert end.server.drafted > 0 and end.server.accepted > 0, end.server  # the head ran, and guessed right


def test_draft_mtp_without_nextn_layers_is_refused_before_any_server_starts(llama_server_binary, model_path, tmp_path):
    log = tmp_path / "never.log"
    with pytest.raises(SpectuiError, match="draft-mtp needs multi-token-prediction") as err:
        launch(llama_server_binary, settings(model_path, "draft-mtp"), log_path=log)
    assert "\n" not in str(err.value)
    assert not log.exists() and not _servers()


def test_a_busy_port_is_not_a_failure(llama_server_binary, model_path, logs):
    with socket.socket() as busy:
        busy.bind((HOST, 0))
        busy.listen()
        taken = busy.getsockname()[1]
        picked: list[int] = []

        def pick() -> int:
            picked.append(taken if not picked else free_port())
            return picked[-1]

        with launch(llama_server_binary, settings(model_path), log_path=logs / "busy.log", pick_port=pick) as server:
            assert picked[0] == taken and len(picked) == 2 and server.port == picked[1]
            assert server.client().get("/health").ok


def test_the_server_wants_its_fresh_key_shows_no_slots_and_the_key_is_nowhere(llama_server_binary, model_path, tmp_path):
    recording = tmp_path / "run.spectui"
    with launch(llama_server_binary, settings(model_path, "ngram-mod"), recording=recording) as server:
        anonymous = ServerClient(parse_server_url(server.url))
        assert anonymous.get("/v1/models").status == 401
        assert anonymous.get("/props").status == 401
        with pytest.raises(ServerError, match="HTTP 401"):
            list(anonymous.stream("/v1/completions", {"prompt": "hi", "max_tokens": 4, "stream": True}))
        assert anonymous.get("/health").ok  # public by llama-server's own rule: says nothing
        client = server.client()
        assert client.get("/v1/models").ok
        assert client.get("/slots").status == 501  # --no-slots: the prompts stay unseen
        key = server._api_key
        with launch(llama_server_binary, settings(model_path), log_path=tmp_path / "second.log") as other:
            assert other._api_key != key  # a fresh key per start
        assert key not in server.command_line and key not in repr(server)
        assert key.encode() not in Path(f"/proc/{server.pid}/cmdline").read_bytes()
        assert server.props.get("build_info")  # /props, for the header
        # it listens on loopback only: nothing beyond this machine reaches it, key or not
        listening = [c.laddr for c in psutil.Process(server.pid).net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
        assert listening and all(addr.ip == "127.0.0.1" for addr in listening), listening
    log = tmp_path / "run.llama-server.log"
    assert server.log_path == log and log.stat().st_size > 0 and (log.stat().st_mode & 0o077) == 0
    assert key not in log.read_text(errors="replace")


def test_a_failed_start_is_one_line_with_the_servers_last_log_line(llama_server_binary, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + os.urandom(64))
    with pytest.raises(SpectuiError, match=r"llama-server exited with status \d+ before it was ready: .+ \(log: .+\)") as err:
        launch(llama_server_binary, settings(str(bad)), log_path=tmp_path / "bad.log")
    assert "\n" not in str(err.value) and (tmp_path / "bad.log").stat().st_size > 0
    assert not _servers()


def test_a_server_killed_mid_stream_leaves_every_token_that_arrived(llama_server_binary, model_path, logs):
    prompt = "Write a long story about a lighthouse keeper and the sea, with many chapters."
    config = RunConfig(target=model_path, mode="ar", prompt=prompt, max_tokens=2000, backend=BackendConfig(name="server"))
    with launch(llama_server_binary, settings(model_path), log_path=logs / "killed.log") as server:
        steps, end = [], None
        for event in runtime_engine(server, config).run(config):
            if isinstance(event, Step):
                steps.append(event)
                if len(steps) == 5:
                    os.kill(server.pid, signal.SIGKILL)
            elif isinstance(event, End):
                end = event
    assert end is not None and end.reason == "error" and "\n" not in end.error
    assert len(steps) >= 5 and end.n_tokens == sum(len(s.tokens) for s in steps)


def test_a_server_started_from_a_finished_thread_keeps_running(llama_server_binary, model_path, logs):
    """PR_SET_PDEATHSIG follows the forking thread: the launcher forks from a thread of its own."""
    started = []
    worker = threading.Thread(target=lambda: started.append(launch(llama_server_binary, settings(model_path), log_path=logs / "thread.log")))
    worker.start()
    worker.join()
    server = started[0]
    try:
        time.sleep(0.5)
        assert server.running and server.client().get("/v1/models").ok
    finally:
        server.stop()


_SPECTUI_MID_RUN = """
import sys
from spectui.runtime.build import ServerBinary
from spectui.runtime.llama_server import LaunchSettings, launch
from spectui.runtime.methods import RuntimeMethod

binary = ServerBinary(path=sys.argv[1], origin="--llama-server")
server = launch(binary, LaunchSettings(model=sys.argv[2], method=RuntimeMethod.parse("ngram-mod"), threads=1), log_path=sys.argv[3])
print(server.pid, flush=True)
body = {"prompt": "Once upon a time", "max_tokens": 100000, "stream": True, "ignore_eos": True}
for event in server.client().stream("/v1/completions", body):
    print("chunk", flush=True)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's; macOS relies on atexit (module doc)")
def test_no_server_outlives_a_spectui_killed_with_sigkill_mid_run(llama_server_binary, model_path, tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", _SPECTUI_MID_RUN, llama_server_binary.path, model_path, str(tmp_path / "k.log")],
                            stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        server_pid = int(proc.stdout.readline())
        for _ in range(5):  # mid-run: tokens are streaming
            assert proc.stdout.readline().strip() == "chunk"
        assert psutil.pid_exists(server_pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(server_pid):
            time.sleep(0.05)
        assert not _alive(server_pid), "llama-server outlived the spectui process that started it"
    finally:
        proc.kill()
        proc.wait()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE  # a zombie is dead, awaiting its reaper
    except psutil.NoSuchProcess:
        return False


def _servers() -> list[psutil.Process]:
    """The llama-server processes this test process started that still run."""
    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.name().startswith("llama-server") and child.status() != psutil.STATUS_ZOMBIE:
                out.append(child)
        except psutil.NoSuchProcess:
            pass
    return out
