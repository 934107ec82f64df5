"""The drafters' replay counts what llama-server counts: real settings on a real server over a
small workload, each request's drafted and accepted tokens from the server against the replay's
over the AR run's own tokens (about a minute)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spectui.cli import build_parser
from spectui.cli.profiles import parse_args
from spectui.cli.tune_traffic import prepare
from spectui.errors import SpectuiError
from spectui.runtime.spec_replay import Stream, prompt_tokens, replay, replay_tool
from spectui.tune.traffic_space import Candidate
from spectui.workload.request import request_config

pytestmark = [pytest.mark.slow, pytest.mark.server]

PROMPTS = [
    "Repeat this sentence three times: the quick brown fox jumps over the lazy dog.",
    "List the numbers from 1 to 12, one per line.",
    "Copy this line twice, exactly: alpha beta gamma delta epsilon zeta eta theta.",
    "Write the alphabet in capital letters, separated by commas.",
]
SETTINGS = [Candidate(("ngram-simple",), k=8, lookup=2), Candidate(("ngram-mod",), n_min=2), Candidate(("ngram-cache",)),
            Candidate(("ngram-map-k", "ngram-mod"))]


def test_the_replay_counts_what_the_server_counts(llama_server_binary, tmp_path: Path) -> None:
    workload = tmp_path / "copies.jsonl"
    workload.write_text("".join(json.dumps({"messages": [{"role": "user", "content": p}], "max_tokens": 48}) + "\n" for p in PROMPTS))
    tune = prepare(parse_args(build_parser(), ["tune", "--workload", str(workload), "--llama-server", llama_server_binary.path,
                                               "--threads", "1", "--out", str(tmp_path / "unused")]))
    ar = tune._setting(None)
    settings = [tune._setting(c) for c in SETTINGS]
    levels = {lv.setting: lv for lv in tune.run_settings(tune.tuning, [ar, *settings], tmp_path / "runs", judged=False)}
    tool, why = replay_tool(llama_server_binary.path)
    assert tool is not None, why
    engine, _, _ = tune.opener(ar, 1, tmp_path / "tokens")
    try:
        client = engine.engine.client  # type: ignore[attr-defined]  # a served engine
        requests = {r.index: r for r in tune.tuning.requests}
        prompts = {i: prompt_tokens(client, request_config(ar.config, r, tune.tuning.name, False)) for i, r in requests.items()}
    finally:
        engine.close()
    done = sorted(levels[ar.label].requests, key=lambda r: r.sent_s)
    streams = [[Stream(prompts[r.index], tuple(r.tokens), requests[r.index].max_tokens, r.reason == "stop") for r in done]]
    counts = replay(tool, [c.runtime_method().args() for c in SETTINGS], streams, n_ctx=tune.base.backend.n_ctx)
    drafted = 0
    for setting, per_request in zip(settings, counts):
        server = {r.index: (r.drafted, r.accepted) for r in levels[setting.label].requests}
        replayed = {r.index: (k.drafted, k.accepted) for r, k in zip(done, per_request)}
        assert replayed == server, setting.label
        for r, k in zip(done, per_request):
            assert k.passes + k.accepted == len(r.tokens) - 1 + (r.reason == "stop")  # every token is a pass's or an accepted one
        drafted += sum(k.drafted for k in per_request)
    assert drafted > 0  # the prompts made the drafters draft: the equality above is not of zeros


def test_a_drafter_that_needs_a_model_or_a_flag_llama_cpp_refuses_is_one_line(llama_server_binary) -> None:
    tool, why = replay_tool(llama_server_binary.path)
    assert tool is not None, why
    stream = [[Stream((1, 2, 3), (4, 5, 6), 16, False)]]
    with pytest.raises(SpectuiError, match="needs a model to draft: draft"):
        replay(tool, [["--spec-type", "draft-simple"]], stream, n_ctx=512)
    with pytest.raises(SpectuiError, match="did not take these flags"):
        replay(tool, [["--spec-ngram-mod-n-match", "many"]], stream, n_ctx=512)


def test_a_server_spectui_did_not_build_is_not_replayed(tmp_path: Path) -> None:
    binary = tmp_path / "bin" / "llama-server"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n")
    tool, why = replay_tool(str(binary))
    assert tool is None and "not spectui's own build" in why
