"""Speculation on recurrent and hybrid models stays exact: tiny Mamba (recurrent) and LFM2
(hybrid: convolution state beside attention) GGUFs with random weights, written in the test,
as target and draft model, which disagree on nearly every token.

A recurrent state cannot be partly erased (``llama_memory_seq_rm`` refuses and returns false);
the llama.cpp backend keeps a checkpoint of the state before each verification block (and each
draft) in a spare sequence and rolls back by restoring it and evaluating the kept tokens again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spectui.config import BackendConfig, RunConfig
from spectui.drafting import DraftConfig, Fixed, Model
from spectui.engine.protocol import CacheRebuilt
from spectui.recording.schema import End, Step
from tests.backends.tiny_gguf import write_tiny_lfm2, write_tiny_mamba

pytestmark = pytest.mark.slow

PROMPT = "The quick brown fox jumps over the lazy dog. Once upon a time"


WRITERS = {"mamba": write_tiny_mamba, "lfm2": write_tiny_lfm2}


@pytest.fixture(scope="module", params=sorted(WRITERS))
def models(request, tmp_path_factory) -> tuple[Path, Path]:
    """(target, draft) of one architecture."""
    folder = tmp_path_factory.mktemp(request.param)
    write = WRITERS[request.param]
    return write(folder / "target.gguf", seed=1), write(folder / "draft.gguf", seed=2)


def _run(config: RunConfig) -> tuple[list[int], int, End]:
    from spectui.engine.embedded import Engine

    tokens, rejected, end = [], 0, None
    with Engine.load(config) as engine:
        assert engine.target.rollback == "checkpoint"
        for event in engine.run(memory_interval_s=None):
            if type(event) is Step:
                tokens += event.tokens
                rejected += event.drafted > event.accepted
            elif type(event) is End:
                end = event
    return tokens, rejected, end


def test_speculative_equals_ar_on_a_recurrent_target_and_draft(models):
    target, draft = models
    base = dict(target=str(target), prompt=PROMPT, chat=False, max_tokens=60, backend=BackendConfig(n_ctx=512))
    ar, _, ar_end = _run(RunConfig(mode="ar", **base))
    spec, rejected, spec_end = _run(RunConfig(mode="spec", draft=DraftConfig(drafter=Model(path=str(draft)), length=Fixed(k=4)), **base))
    assert ar_end.reason == spec_end.reason == "length", (ar_end, spec_end)
    assert rejected >= 20, f"only {rejected} blocks had a rejection: the draft should disagree"
    first = next((i for i, (a, s) in enumerate(zip(ar, spec)) if a != s), None)
    assert spec == ar, f"speculative output left AR at token {first}"


def test_rollback_past_the_checkpoint_rebuilds_the_state_exactly(models):
    from spectui.engine.backends.llamacpp import LlamaCppBackend

    settings = BackendConfig(n_ctx=256)
    t = LlamaCppBackend.open(str(models[0]), settings)
    try:
        prompt = t.tokenize(PROMPT, add_bos=True)
        t.eval(prompt, all_logits=False)
        t.eval([100, 200, 300, 400], all_logits=True)  # checkpoint at len(prompt)
        with pytest.raises(CacheRebuilt):
            t.truncate(len(prompt) - 3)  # before the checkpoint: no way back in place
        assert t.n_past == len(prompt) - 3 and t.cached == prompt[:-3]
        after = np.array(t.eval([555], all_logits=False)[-1])

        t.truncate(0)
        t.eval(prompt[:-3], all_logits=False)
        fresh = np.array(t.eval([555], all_logits=False)[-1])
        assert float(np.abs(after - fresh).max()) <= 1e-3
        t.truncate(0)
        t.eval(prompt[:-4], all_logits=False)  # one token less: the state, not only 555, sets the logits
        assert float(np.abs(np.array(t.eval([555], all_logits=False)[-1]) - fresh).max()) > 0.1
    finally:
        t.close()
