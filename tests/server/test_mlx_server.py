"""``spectui run --server`` against ``mlx_lm.server`` on the embedded model (exported once as
an mlx-lm directory), AR and with that same directory as its draft model.

mlx-lm computes in float32 where llama.cpp quantises activations, so on this prompt MLX's
greedy answer parts from llama.cpp's at the first token (a near-tie); the reference here is
spectui's own MLX backend on the same GGUF, which must agree with the server token for token.
MLX decodes ~8 tok/s on this CPU: 16 tokens a request.
"""

from __future__ import annotations

import json

import mlx_lm
import pytest

from spectui.recording.reader import read_recording
from spectui.recording.schema import End, Prefill, Step
from tests.conftest import run_cli
from tests.server.conftest import start_server

PROMPT = "Say hi"
MAX_TOKENS = 16


@pytest.fixture(scope="module")
def mlx_ar_server(mlx_model_dir, server_logs):
    server = start_server(["mlx_lm.server", "--model", mlx_model_dir], "/health", server_logs)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def mlx_draft_server(mlx_model_dir, server_logs):
    args = ["mlx_lm.server", "--model", mlx_model_dir, "--draft-model", mlx_model_dir, "--num-draft-tokens", "3"]
    server = start_server(args, "/health", server_logs)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def embedded_mlx():
    proc = run_cli("run", "--headless", "--json", "--backend", "mlx", "--mode", "ar", "--max-tokens", str(MAX_TOKENS), "--prompt", PROMPT,
                   "--no-record")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def mlx_run(url: str, model_dir: str, path, *extra: str) -> dict:
    # mlx-lm lists no usable model id (it scans the Hugging Face cache): --target names the model
    proc = run_cli(
        "run", "--headless", "--json", "--server", url, "--target", model_dir,
        "--max-tokens", str(MAX_TOKENS), "--prompt", PROMPT, "--record", str(path), *extra,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def check_mlx_recording(path, model_dir: str) -> None:
    rec = read_recording(path)
    s = rec.header.artifacts.server
    assert s is not None and s.kind == "mlx-lm" and s.vocabulary.endswith("smollm2")
    assert rec.header.artifacts.target.name == "Smollm2 135M 8k Lc100K Mix1 Ep2"  # from the export's config
    steps = [e for e in rec.events if type(e) is Step]
    times = [t for st in steps for t in st.t_us]
    assert times == sorted(times) and times[0] > 0
    end = rec.events[-1]
    assert type(end) is End and end.reason in ("length", "stop") and end.server is not None
    # mlx-lm: usage (asked for with stream_options) and a fingerprint naming its version, no acceptance
    assert end.server.completion_tokens == len(times) + (end.reason == "stop")  # it counts the unstreamed EOS
    prefill = next(e for e in rec.events if type(e) is Prefill)
    assert end.server.prompt_tokens == prefill.n_tokens > 0, "the server's prompt count = the local count"
    assert end.server.system_fingerprint.startswith(mlx_lm.__version__)
    assert (end.server.drafted, end.server.accepted) == (-1, -1)
    assert end.server.acceptance_source == "not reported (mlx-lm reports no draft acceptance per request)"


def test_mlx_server_ar_matches_spectuis_mlx_backend(mlx_ar_server, mlx_model_dir, embedded_mlx, tmp_path):
    out = mlx_run(mlx_ar_server.url, mlx_model_dir, tmp_path / "ar.spectui")
    assert out["text"] == embedded_mlx["text"]
    expected = embedded_mlx["tokens"][:-1] if embedded_mlx["summary"]["finish_reason"] == "stop" else embedded_mlx["tokens"]
    assert out["tokens"] == expected
    check_mlx_recording(tmp_path / "ar.spectui", mlx_model_dir)


def test_mlx_server_with_a_draft_model(mlx_draft_server, mlx_model_dir, embedded_mlx, tmp_path):
    out = mlx_run(mlx_draft_server.url, mlx_model_dir, tmp_path / "draft.spectui", "--mode", "spec")
    # greedy speculative decoding verifies every drafted token against the target: same text
    assert out["text"] == embedded_mlx["text"]
    check_mlx_recording(tmp_path / "draft.spectui", mlx_model_dir)
    report = run_cli("report", str(tmp_path / "draft.spectui")).stdout
    assert "speculative (drafting configured on the server)" in report
    assert "not reported (mlx-lm reports no draft acceptance per request)" in report
