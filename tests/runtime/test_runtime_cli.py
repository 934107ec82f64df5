"""``--runtime llama-server`` end to end through the command line: spectui finds the binary,
starts llama-server per setting on a free loopback port, streams the session through the
server engine and stops it; the recording names the runtime and its command line, carries
llama-server's acceptance block by block, and diffs against the runtime's own AR run.

One thread with flash attention on, as in test_server.py: there a block's logits equal one
token's bit for bit, so the runtime's speculative output must equal its AR output."""

from __future__ import annotations

import json

import psutil
import pytest

from spectui.recording.reader import read_recording
from spectui.recording.schema import End, Step
from tests.conftest import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.server]

COMMON = ("--headless", "--json", "--prompt-name", "copy-quote-paragraph", "--max-tokens", "72", "--threads", "1",
          "--flash-attn", "on", "--ctx", "1024")


def runtime_run(binary, out, *args: str):
    proc = run_cli("run", *COMMON, "--runtime", "llama-server", "--llama-server", binary.path, "-o", str(out), *args)
    assert proc.returncode == 0, proc.stderr
    return read_recording(out), json.loads(proc.stdout)


def test_a_runtime_method_runs_exact_and_reports_acceptance_per_block(llama_server_binary, tmp_path):
    ar, _ = runtime_run(llama_server_binary, tmp_path / "ar.spectui", "--mode", "ar")
    spec, printed = runtime_run(llama_server_binary, tmp_path / "spec.spectui", "--draft", "runtime:ngram-simple", "--k", "8",
                                  "--lookup", "2")

    config = spec.header.config
    assert config.backend.name == "llama-server" and config.draft.flag == "runtime:ngram-simple"
    assert config.label() == "spec llama-server ngram-simple K=8"
    props = spec.header.artifacts.server.props
    assert "--spec-type ngram-simple" in props["runtime.command_line"]
    assert "--spec-ngram-simple-size-m 8" in props["runtime.command_line"]
    assert "--spec-ngram-simple-size-n 2" in props["runtime.command_line"]
    assert "--api-key" not in props["runtime.command_line"]  # the key is never recorded
    assert "--spec-type" not in ar.header.artifacts.server.props["runtime.command_line"]  # AR: a server without it
    # the server's log sits beside the recording the run named, and the header names it
    assert props["runtime.log"] == str(tmp_path / "spec.llama-server.log") and (tmp_path / "spec.llama-server.log").stat().st_size

    ar_tokens, spec_tokens = ([t for e in r.events if type(e) is Step for t in e.tokens] for r in (ar, spec))
    assert spec_tokens == ar_tokens and len(ar_tokens) >= 32
    end = spec.events[-1]
    assert isinstance(end, End) and end.server is not None and end.server.drafted > 0
    blocks = [e for e in spec.events if type(e) is Step and e.drafted]
    # the stream's cumulative counters, step by step, add up to the request's own
    assert sum(e.drafted for e in blocks) == end.server.drafted
    assert sum(e.accepted for e in blocks) == end.server.accepted > 0
    assert printed["summary"]["drafted"] == end.server.drafted
    # acceptance per draft position, from the change of llama-server's /metrics around the session
    per_position = {k: v for k, v in end.server.metrics_delta.items() if "accepted_tokens_per_pos_total{" in k}
    assert per_position and sum(per_position.values()) == end.server.accepted, end.server.metrics_delta

    diff = run_cli("diff", str(tmp_path / "ar.spectui"), str(tmp_path / "spec.spectui"))
    assert diff.returncode == 0, diff.stderr
    assert "identical" in diff.stdout
    # no server outlives the command
    assert not [p for p in psutil.process_iter(["name"]) if p.info["name"] == "llama-server" and p.ppid() == 1]


@pytest.mark.parametrize("args, says", [
    (("--draft", "ngram"), "drafts with its own methods: --draft runtime:ngram-mod"),
    (("--draft", "runtime:draft-mtp"), "draft-mtp needs multi-token-prediction (nextn) layers in the target"),
    (("--draft", "runtime:draft-simple"), "draft-simple needs a draft model (--draft-model FILE.gguf)"),
    (("--draft", "runtime:ngram-nope"), "unknown llama-server method 'ngram-nope'"),
], ids=["spectui-drafter", "mtp-without-nextn", "simple-without-draft", "unknown"])
def test_what_cannot_work_is_one_line_before_a_server_starts(llama_server_binary, tmp_path, args, says):
    before = {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "llama-server"}
    proc = run_cli("run", *COMMON, "--runtime", "llama-server", "--llama-server", llama_server_binary.path, *args,
                   "-o", str(tmp_path / "x.spectui"))
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "x.spectui").exists()
    assert {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "llama-server"} <= before
