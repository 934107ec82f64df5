"""Trained draft heads on the real llama-server: EAGLE-3 (with and without a d2t map), DFlash
and DSpark heads made for the embedded target (tests/runtime/tiny_heads.py) each run through
``--runtime llama-server``, with greedy output identical to the same server without
speculation, and say how many drafts were kept, overall and per draft position, from
llama-server's ``/metrics`` counters. The head built to repeat the last token has its drafts
kept on a prompt the target answers by repeating one token; random heads draft tokens the
target rejects. The recording's header says which head ran.

One thread with flash attention on, as tests/runtime/test_server.py: a block's logits equal
one token's there, so equality with AR is the expected result. The refusals of heads that do
not fit (hidden size, layer index, width) need no server: tests/unit/test_heads.py.
"""

from __future__ import annotations

import pytest

from spectui.config import BackendConfig, RunConfig
from spectui.drafting import DraftConfig, Fixed, Runtime
from spectui.recording.schema import End, Header, Step
from spectui.runtime.session import RuntimeEngine

pytestmark = [pytest.mark.slow, pytest.mark.server]

#: a raw prompt the embedded target answers "-1000000...": one token repeated (measured)
PROMPT = "!!!!!!!!!!!!!!!!!!!!!!!!!!"
MAX_TOKENS = 32
K = 3
PER_POS = 'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="%d"}'


def config(binary: str, target: str, method: str = "none", head: str = "") -> RunConfig:
    return RunConfig(
        target=target, mode="ar" if method == "none" else "spec", prompt=PROMPT, chat=False, max_tokens=MAX_TOKENS,
        draft=DraftConfig(drafter=Runtime(method=method, draft_model=head), length=Fixed(k=K)),
        backend=BackendConfig(name="llama-server", runtime_binary=binary, n_threads=1, flash_attn="on", n_ctx=1024),
    )


def run(cfg: RunConfig) -> tuple[list[int], Header, End]:
    with RuntimeEngine.load(cfg) as engine:
        events = list(engine.run(cfg))
    header, end = events[0], events[-1]
    assert isinstance(header, Header) and isinstance(end, End) and end.reason in ("stop", "length"), getattr(end, "error", end)
    return [t for e in events if isinstance(e, Step) for t in e.tokens], header, end


@pytest.fixture(scope="module")
def ar_tokens(llama_server_binary, model_path) -> list[int]:
    tokens, header, _ = run(config(llama_server_binary.path, model_path))
    assert header.artifacts.head is None and len(tokens) == MAX_TOKENS
    return tokens


@pytest.mark.parametrize("name, method, extract, block", [
    ("eagle3", "draft-eagle3", [2, 15, 27], 0),
    ("eagle3-d2t", "draft-eagle3", [2, 15, 27], 0),
    ("eagle3-keep", "draft-eagle3", [2, 15, 27], 0),
    ("dflash", "draft-dflash", [2, 15, 27], 4),
    ("dspark", "draft-dspark", [2, 15, 27], 4),
])
def test_each_head_runs_exact_and_reports_acceptance_per_position(llama_server_binary, model_path, tiny_heads, ar_tokens,
                                                                   name, method, extract, block):
    tokens, header, end = run(config(llama_server_binary.path, model_path, method, tiny_heads[name]))
    assert tokens == ar_tokens, f"{name}'s greedy output differs from the same server without speculation"
    head = header.artifacts.head
    assert head is not None and head.path == tiny_heads[name]
    assert (head.kind, head.extract_layers, head.block_size) == (method.removeprefix("draft-"), extract, block)
    report = end.server
    assert report is not None and report.drafted > 0, f"{name} drafted nothing"
    delta = report.metrics_delta
    drafted, accepted = delta["llamacpp:spec_decode_num_draft_tokens_total"], delta["llamacpp:spec_decode_num_accepted_tokens_total"]
    assert drafted > 0
    positions = [delta[PER_POS % i] for i in range(K) if PER_POS % i in delta]
    assert positions, f"no per-position acceptance for {name} on /metrics"
    assert sum(positions) == accepted
    if name == "eagle3-keep":  # its drafts repeat the last token, as the target does here
        assert accepted / drafted > 0.5 and all(p > 0 for p in positions), delta
