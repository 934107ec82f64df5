"""``spectui run --server`` against llama-cpp-python's own server on the embedded model, AR and
with its prompt-lookup drafting, compared with the embedded engine on the same prompt.

Greedy output through the server must equal the embedded engine's token for token: the same
weights, the same llama.cpp, greedy on both sides, flash attention on both sides (see
``llama_cpp_server_args``). The server's ids are its streamed text re-tokenized with the model
file the server names as its model id.
"""

from __future__ import annotations

import json
import threading

import llama_cpp
import msgspec
import pytest

from spectui.compare.diff import diff_recordings
from spectui.compare.diff_format import format_diff_text
from spectui.config import BackendConfig, RunConfig
from spectui.errors import SpectuiError
from spectui.recording.reader import read_recording
from spectui.recording.schema import End, ModelArtifacts, Prefill, Step
from tests.conftest import run_cli
from tests.server.conftest import llama_cpp_server_args, start_server
from tests.unit.test_diff import edit_header, write_events

# the answer copies the prompt's words back: something for prompt lookup to draft from
PROMPT = "Fix the typos and return the text: The quick brwon fox jumsp over the lazy dgo near the rivr bank."
MAX_TOKENS = 24


@pytest.fixture(scope="module")
def lookup_server(model_path, server_logs):
    args = llama_cpp_server_args(model_path, "--draft_model", "prompt-lookup-decoding", "--draft_model_num_pred_tokens", "4")
    server = start_server(args, "/v1/models", server_logs)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    """The embedded engine's AR run of PROMPT: (JSON output, recording path)."""
    path = tmp_path_factory.mktemp("embedded") / "embedded.spectui"
    proc = run_cli("run", "--headless", "--json", "--mode", "ar", "--max-tokens", str(MAX_TOKENS), "--prompt", PROMPT, "--record", str(path))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), path


def expected_tokens(doc: dict) -> list[int]:
    """The embedded run's tokens as a server streams them: a run that ended on the model's
    end-of-generation token has it as its last id, and servers never stream that token."""
    return doc["tokens"][:-1] if doc["summary"]["finish_reason"] == "stop" else doc["tokens"]


def server_run(url: str, path, *extra: str) -> dict:
    proc = run_cli("run", "--headless", "--json", "--server", url, "--max-tokens", str(MAX_TOKENS), "--prompt", PROMPT, "--record", str(path), *extra)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


def check_server_recording(path, model_path: str, embedded_path, n_tokens: int, reason: str) -> None:
    rec = read_recording(path)
    h = rec.header
    s = h.artifacts.server
    assert s is not None and s.kind == "llama-cpp-python" and s.version == llama_cpp.__version__
    assert s.model_id == model_path and s.endpoint == "/v1/chat/completions"
    assert s.url.startswith("http://127.0.0.1:")
    # the server names a local file as its model: its identity is that file's, as embedded
    assert h.artifacts.target.sha256 == read_recording(embedded_path).header.artifacts.target.sha256
    assert h.config.backend.name == "server" and h.prompt_tokens == []

    steps = [e for e in rec.events if type(e) is Step]
    times = [t for st in steps for t in st.t_us]
    assert len(times) == n_tokens
    assert 0 < times[0] and times == sorted(times), "arrival times run forward from the request"
    prefill = next(e for e in rec.events if type(e) is Prefill)
    assert prefill.source.startswith("client:") and prefill.t_end_us == times[0]

    end = rec.events[-1]
    assert type(end) is End and end.reason == reason and end.server is not None
    assert end.server.chunks == len(steps) and end.server.token_ids == "re-tokenized"
    assert end.t_us >= times[-1]
    # llama-cpp-python reports no acceptance: the recording says so instead of a number
    assert (end.server.drafted, end.server.accepted) == (-1, -1)
    assert end.server.acceptance_source.startswith("not reported")


@pytest.fixture(scope="module")
def ar_recording(ar_server, tmp_path_factory):
    """The AR server's run of PROMPT: (JSON output, recording path)."""
    path = tmp_path_factory.mktemp("server") / "server.spectui"
    return server_run(ar_server.url, path), path


def test_ar_server_matches_the_embedded_engine(ar_recording, embedded, model_path):
    doc, embedded_path = embedded
    out, path = ar_recording
    assert out["text"] == doc["text"]
    assert out["tokens"] == expected_tokens(doc)
    check_server_recording(path, model_path, embedded_path, len(out["tokens"]), doc["summary"]["finish_reason"])

    report = run_cli("report", str(path))
    assert report.returncode == 0, report.stderr
    assert "-- server" in report.stdout and "llama-cpp-python" in report.stdout
    assert "acceptance               not reported" in report.stdout


def test_prompt_lookup_server_is_exact_and_reports_no_acceptance(lookup_server, embedded, model_path, tmp_path):
    doc, embedded_path = embedded
    out = server_run(lookup_server.url, tmp_path / "lookup.spectui", "--mode", "spec")
    assert out["text"] == doc["text"] and out["tokens"] == expected_tokens(doc)
    reason = doc["summary"]["finish_reason"]
    check_server_recording(tmp_path / "lookup.spectui", model_path, embedded_path, len(out["tokens"]), reason)

    report = json.loads(run_cli("report", "--json", str(tmp_path / "lookup.spectui")).stdout)
    assert report["header"]["config"]["mode"] == "spec"
    assert report["server"]["acceptance"].startswith("not reported (llama-cpp-python")
    assert report["summary"]["drafted"] == 0  # nothing invented per step either


def test_diff_between_a_server_recording_and_an_embedded_one(ar_recording, embedded, tmp_path):
    doc, embedded_path = embedded
    _, server_path = ar_recording
    n = len(expected_tokens(doc))

    proc = run_cli("diff", "--json", str(embedded_path), str(server_path))
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["comparable"] and not d["forced"]
    assert "compared by the prompt text (chat) and the model file's sha256" in d["basis"]
    assert d["outputs"]["identical"] and d["outputs"]["common_length"] == n
    if n < len(doc["tokens"]):
        assert "end-of-generation token is left out" in d["outputs"]["notes"][0]
    assert any(f["path"] == "artifacts.server.kind" for f in d["artifacts"])
    text = format_diff_text(diff_recordings(read_recording(embedded_path), read_recording(server_path)))
    assert f"identical: {n} tokens" in text and "acceptance (server-reported)" in text

    # another prompt, or another model, is refused as between two embedded runs
    server = read_recording(server_path)
    other_prompt = write_events(
        tmp_path / "other.spectui",
        edit_header(server.events, lambda h: msgspec.structs.replace(h, config=msgspec.structs.replace(h.config, prompt="Say hi"))),
    )
    with pytest.raises(SpectuiError, match="the prompts differ"):
        diff_recordings(read_recording(embedded_path), read_recording(other_prompt))
    unknown_model = write_events(tmp_path / "unknown.spectui", edit_header(server.events, without_local_model))
    with pytest.raises(SpectuiError, match="the models differ"):
        diff_recordings(read_recording(embedded_path), read_recording(unknown_model))


def without_local_model(h):
    """The same recording as if the server's model were not a local file: only its id."""
    a = msgspec.structs.replace(h.artifacts, target=ModelArtifacts(name="other-model"))
    a.server = msgspec.structs.replace(a.server, model_id="/srv/models/other-model.gguf")
    return msgspec.structs.replace(h, artifacts=a)


def test_the_dashboards_engine_thread_runs_a_server_session(ar_server, embedded, tmp_path):
    """The dashboard runs sessions through ``SessionRunner`` and ``open_engine``: a server
    config gets a ``ServerEngine`` there too, and its recording holds the same answer."""
    from spectui.sessions.notes import SessionFinished
    from spectui.sessions.runner import SessionRequest, SessionRunner

    doc, _ = embedded
    runner = SessionRunner()
    finished: list[SessionFinished] = []
    done = threading.Event()

    def post(message) -> None:
        if isinstance(message, SessionFinished):
            finished.append(message)
            done.set()

    thread = threading.Thread(target=runner.serve, daemon=True)
    thread.start()
    config = RunConfig(prompt=PROMPT, mode="ar", max_tokens=MAX_TOKENS, backend=BackendConfig(name="server", server_url=ar_server.url))
    runner.submit(SessionRequest(1, config, threading.Event(), post, record_to=lambda _c: tmp_path / "dashboard.spectui"))
    try:
        assert done.wait(180), "the session did not finish"
    finally:
        assert runner.shutdown(timeout=30)
    assert finished[0].error == "" and finished[0].path == tmp_path / "dashboard.spectui"
    rec = read_recording(finished[0].path)
    text = b"".join(p for e in rec.events if type(e) is Step for p in e.pieces).decode()
    assert text == doc["text"] and rec.events[-1].reason == doc["summary"]["finish_reason"]
