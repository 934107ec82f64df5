"""The peer benchmark reads llama.cpp's tools from their logs: the parsers, on the lines those
tools print (formats from llama.cpp's source: llama-context.cpp's perf print, lookup.cpp's and
speculative-simple.cpp's summaries, with the log prefix the common logger adds)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import native_tools as nt  # noqa: E402

COMPLETION_LOG = """\
llama_perf_sampler_print:    sampling time =      10.51 ms /   229 runs   (    0.05 ms per token, 21789.65 tokens per second)
llama_perf_context_print:        load time =     212.36 ms
llama_perf_context_print: prompt eval time =     731.20 ms /   101 tokens (    7.24 ms per token,   138.13 tokens per second)
llama_perf_context_print:        eval time =    1943.18 ms /   127 runs   (   15.30 ms per token,    65.36 tokens per second)
"""

LOOKUP_LOG = """\
0.03.101.100 I encoded  130 tokens in    0.912 seconds, speed:  142.544 t/s
0.03.101.126 I decoded   77 tokens in    1.200 seconds, speed:   64.167 t/s
0.03.101.150 I
0.03.101.160 I n_draft      = 8
0.03.101.170 I n_predict    = 77
0.03.101.180 I n_drafted    = 120
0.03.101.190 I t_draft_flat = 0.01 ms
0.03.101.203 I n_accept     = 57
0.03.101.210 I accept       = 47.500%
"""


def fake_tool(tmp_path, name: str, stderr: str, stdout: str = "generated text") -> None:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{stdout}\nEOF\ncat >&2 <<'EOF'\n{stderr}EOF\n")
    path.chmod(0o755)


def test_completion_rate_is_runs_over_eval_time_not_the_prompt(tmp_path):
    fake_tool(tmp_path, "llama-completion", COMPLETION_LOG)
    run = nt.run_completion(tmp_path, "m.gguf", "p.txt", n=128, threads=2, n_ctx=4096)
    assert run.tok_s == pytest.approx(127 / 1.94318)
    assert run.n_tokens == 128


def test_lookup_counts_and_rate_leave_the_first_token_out(tmp_path):
    fake_tool(tmp_path, "llama-lookup", LOOKUP_LOG)
    run = nt.run_lookup(tmp_path, "m.gguf", "p.txt", n=256, k=8, threads=2, n_ctx=4096)
    assert (run.n_tokens, run.drafted, run.accepted) == (77, 120, 57)
    assert run.tok_s == pytest.approx(76 / 1.2)


def test_a_failing_tool_is_one_clear_error(tmp_path):
    path = tmp_path / "llama-lookup"
    path.write_text("#!/bin/sh\necho 'error: invalid argument: --bogus' >&2\nexit 1\n")
    path.chmod(0o755)
    with pytest.raises(nt.ToolError, match="llama-lookup exited 1: error: invalid argument"):
        nt.run_lookup(tmp_path, "m.gguf", "p.txt", n=8, k=2, threads=1, n_ctx=64)


def test_prompt_file_survives_the_trailing_newline_llama_drops(tmp_path):
    text = "<|im_start|>assistant\n"
    path = nt.write_prompt(text, str(tmp_path), "p")
    raw = open(path, encoding="utf-8").read()
    assert raw[:-1] == text  # what `-f` keeps after dropping one newline
