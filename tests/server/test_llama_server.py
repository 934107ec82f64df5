"""``spectui run --server`` against the real ``llama-server`` binary.

The binary is ``llama_server_binary`` (tests/conftest.py): found, or built once from the
installed llama-cpp-python source package (the same vendored llama.cpp) into the user cache.

Checked: the server is recognised as llama-server (``/props``), its greedy output equals the
embedded engine's, its own prompt timing is the Prefill, and with n-gram drafting on the
recording carries the acceptance it reported (``timings.draft_n`` / ``draft_n_accepted`` and
the Prometheus counters).
"""

from __future__ import annotations

import json

import pytest

from spectui.recording.reader import read_recording
from spectui.recording.schema import End, Prefill
from tests.conftest import run_cli
from tests.server.conftest import start_server

PROMPT = "Fix the typos and return the text: The quick brwon fox jumsp over the lazy dgo near the rivr bank."
MAX_TOKENS = 24


def server_args(model_path: str, *extra: str) -> list[str]:
    # flash attention on and two threads, as the embedded engine runs by default
    return ["-m", model_path, "-c", "2048", "-t", "2", "-fa", "on", "--metrics", "--no-webui", *extra]


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    path = tmp_path_factory.mktemp("embedded") / "embedded.spectui"
    proc = run_cli("run", "--headless", "--json", "--mode", "ar", "--max-tokens", str(MAX_TOKENS), "--prompt", PROMPT, "--record", str(path))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    return doc["tokens"][:-1] if doc["summary"]["finish_reason"] == "stop" else doc["tokens"]


def run_against(server, tmp_path, *extra: str):  # noqa: ANN001
    path = tmp_path / "server.spectui"
    proc = run_cli("run", "--headless", "--json", "--server", server.url, "--max-tokens", str(MAX_TOKENS), "--prompt", PROMPT,
                   "--record", str(path), *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), read_recording(path)


# ngram-simple looks up 12-grams by default: far longer than anything this short answer repeats
NGRAM = ("--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "2", "--spec-ngram-simple-size-m", "8")


@pytest.mark.parametrize("spec", [(), NGRAM], ids=["ar", "ngram-simple"])
def test_llama_server_is_exact_and_reports_what_it_drafted(llama_server_binary, model_path, server_logs, embedded, tmp_path, spec):
    server = start_server(server_args(model_path, *spec), "/health", server_logs, program=llama_server_binary.path)
    try:
        out, rec = run_against(server, tmp_path, *(("--mode", "spec") if spec else ()))
    finally:
        server.stop()
    assert out["tokens"] == embedded, "llama-server's greedy output differs from the embedded engine's"
    s = rec.header.artifacts.server
    assert s is not None and s.kind == "llama-server"
    prefill = next(e for e in rec.events if type(e) is Prefill)
    assert prefill.source.startswith("server:")  # llama-server's own prompt_ms
    end = rec.events[-1]
    assert type(end) is End and end.server is not None
    if spec:
        assert end.server.drafted > 0 and 0 <= end.server.accepted <= end.server.drafted, end.server
    report = run_cli("report", str(rec.path))
    assert report.returncode == 0 and "llama-server" in report.stdout
