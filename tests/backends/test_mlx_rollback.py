"""MLX caches that mlx-lm cannot trim still roll back exactly: a sliding-window model (Gemma 3
layers with a 6-token window, ``RotatingKVCache``) and a hybrid one (LFM2: convolution layers in
an ``ArraysCache`` beside attention), built from mlx-lm's model classes with random weights.
Greedy speculative output equals AR past many rejections and past the window, and the engine
runs AR afterwards as before. Tens of tokens only: MLX on this CPU is slow."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from spectui.config import BackendConfig, SamplingConfig
from spectui.drafting import Fixed
from spectui.recording.schema import ModelArtifacts, Step

pytestmark = pytest.mark.slow

WINDOW = 6
CONFIGS = {
    "gemma3_text": dict(
        model_type="gemma3_text", hidden_size=64, num_hidden_layers=2, intermediate_size=128, num_attention_heads=2,
        head_dim=32, num_key_value_heads=1, vocab_size=257, sliding_window=WINDOW, sliding_window_pattern=2,
        query_pre_attn_scalar=32, max_position_embeddings=512,
    ),
    "lfm2": dict(
        model_type="lfm2", vocab_size=257, hidden_size=64, num_hidden_layers=3, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=512, norm_eps=1e-5, conv_bias=False, conv_L_cache=3,
        block_dim=64, block_multiple_of=16, block_ffn_dim_multiplier=1.0, block_auto_adjust_ff_dim=False,
        block_ff_dim=128, full_attn_idxs=[1],
    ),
}


def _tokenizer():
    from spectui.models.tokenizer import TextTokenizer, byte_decoder

    chars = sorted(byte_decoder(), key=byte_decoder().get)
    return TextTokenizer.from_gguf({
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "smollm",
        "tokenizer.ggml.tokens": ["<|endoftext|>", *chars],
        "tokenizer.ggml.merges": [],
        "tokenizer.ggml.token_type": [3] + [1] * 256,
        "tokenizer.ggml.eos_token_id": 0,
    })


def tiny_backend(model_type: str, seed: int):
    """An ``MLXBackend`` over a random mlx-lm model; weights scaled up so that logits are far
    from ties (a random init's logits are nearly flat)."""
    import mlx.core as mx
    from mlx.utils import tree_map

    from spectui.engine.backends.mlx import MLXBackend, MLXModel

    module = importlib.import_module(f"mlx_lm.models.{model_type}")
    mx.random.seed(seed)
    net = module.Model(module.ModelArgs.from_dict(CONFIGS[model_type]))
    net.update(tree_map(lambda p: p * 4.0 if p.ndim == 2 else p, net.parameters()))
    mx.eval(net.parameters())
    name = f"tiny-{model_type}-{seed}"  # built here, not read from a folder: its identity is its name
    model = MLXModel(name, net, CONFIGS[model_type], _tokenizer(), "unquantized", None, _artifacts=ModelArtifacts(name=name))
    return MLXBackend(model, BackendConfig(name="mlx", n_ctx=256))


def _decode(target, prompt, *, drafter=None, k=3, max_tokens=28):
    from spectui.engine.loop.decode import decode
    from spectui.engine.loop.draft_length import DraftLength
    from spectui.engine.loop.sampling import Sampler

    length = DraftLength(Fixed(k=k)) if drafter is not None else None
    steps = [e for e in decode(target, prompt, sampler=Sampler(SamplingConfig()), max_tokens=max_tokens,
                               drafter=drafter, draft_length=length) if type(e) is Step]
    return [t for s in steps for t in s.tokens], sum(s.drafted > s.accepted for s in steps)


@pytest.mark.parametrize("model_type", ["gemma3_text", "lfm2"])
def test_speculative_equals_ar_on_caches_mlx_lm_cannot_trim(model_type):
    from spectui.engine.drafters.model import ModelDrafter

    target, draft = tiny_backend(model_type, 1), tiny_backend(model_type, 2)
    try:
        assert target.rollback == "checkpoint", target.runtime_info()["rollback"]
        prompt = target.tokenize("abcabcabd hello")
        assert len(prompt) > WINDOW
        ar, _ = _decode(target, prompt)
        spec, rejected = _decode(target, prompt, drafter=ModelDrafter(draft, SamplingConfig()))
        assert rejected >= 5, f"only {rejected} blocks had a rejection"
        first = next((i for i, (a, s) in enumerate(zip(ar, spec)) if a != s), None)
        assert spec == ar, f"speculative output left AR at token {first}"
        assert _decode(target, prompt)[0] == ar  # the engine still runs, and runs the same
    finally:
        target.close()
        draft.close()


def test_rollback_before_the_checkpoint_rebuilds_and_stays_exact():
    from spectui.engine.protocol import CacheRebuilt

    t = tiny_backend("gemma3_text", 3)
    try:
        prompt = t.tokenize("the window is six tokens wide")
        t.eval(prompt, all_logits=False)
        t.eval([10, 20, 30], all_logits=True)  # the checkpoint: len(prompt)
        with pytest.raises(CacheRebuilt):
            t.truncate(len(prompt) - 2)
        after = np.array(t.eval([40], all_logits=False)[-1])
        t.truncate(0)
        t.eval(prompt[:-2], all_logits=False)
        fresh = np.array(t.eval([40], all_logits=False)[-1])
        assert float(np.abs(after - fresh).max()) < 1e-4
    finally:
        t.close()
