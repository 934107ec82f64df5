"""A test helper: tiny GGUF models with random weights, written with llama.cpp's ``gguf`` writer.

The tokenizer is the embedded SmolLM2's (copied key by key), so prompts tokenize as they do
for the shipped model and a tiny model can draft for another with the same vocabulary. The
weights are random but scaled so that the recurrent state, not only the current token,
decides the next one: a rollback that leaves rejected tokens in the state shows up as a
different continuation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from spectui.models.gguf import read_gguf
from spectui.models.registry import embedded_model_path

#: tokenizer keys copied from the embedded model
_TOKENIZER_KEYS = (
    "tokenizer.ggml.model",
    "tokenizer.ggml.pre",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.unknown_token_id",
    "tokenizer.ggml.padding_token_id",
    "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.add_space_prefix",
)


def _copy_tokenizer(writer, n_vocab: int | None = None) -> int:
    """The embedded model's tokenizer into ``writer``; padded with unused tokens to ``n_vocab``.
    Returns the vocabulary size written."""
    import gguf

    meta = read_gguf(embedded_model_path()).metadata
    tokens = list(meta["tokenizer.ggml.tokens"])
    types = list(meta["tokenizer.ggml.token_type"])
    if n_vocab is not None and n_vocab > len(tokens):
        extra = n_vocab - len(tokens)
        tokens += [f"<|pad_{i}|>" for i in range(extra)]
        types += [int(gguf.TokenType.UNUSED)] * extra
    for key in _TOKENIZER_KEYS:
        if key in meta:
            value = meta[key]
            if isinstance(value, bool):
                writer.add_bool(key, value)
            elif isinstance(value, int):
                writer.add_uint32(key, value)
            else:
                writer.add_string(key, value)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(meta["tokenizer.ggml.merges"])
    return len(tokens)


def write_tiny_mamba(path: Path, *, seed: int, n_embd: int = 64, n_layer: int = 2, d_state: int = 16) -> Path:
    """A Mamba (recurrent, no attention) model llama.cpp loads on a CPU; tensor names and
    shapes as llama.cpp's ``llama_model_mamba::load_arch_tensors`` asks for them."""
    import gguf

    rng = np.random.default_rng(seed)
    d_inner, d_conv, dt_rank = 2 * n_embd, 4, 8
    writer = gguf.GGUFWriter(str(path), "mamba")
    writer.add_name(f"tiny-mamba-{seed}")
    writer.add_context_length(4096)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(0)
    writer.add_head_count(0)
    writer.add_ssm_conv_kernel(d_conv)
    writer.add_ssm_inner_size(d_inner)
    writer.add_ssm_state_size(d_state)
    writer.add_ssm_time_step_rank(dt_rank)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(int(gguf.LlamaFileType.ALL_F32))
    n_vocab = _copy_tokenizer(writer)

    def normal(*shape: int, scale: float) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    # numpy shapes are ggml's ne reversed
    writer.add_tensor("token_embd.weight", normal(n_vocab, n_embd, scale=1.0))
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("output.weight", normal(n_vocab, n_embd, scale=1.0))
    for i in range(n_layer):
        b = f"blk.{i}"
        writer.add_tensor(f"{b}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(f"{b}.ssm_in.weight", normal(2 * d_inner, n_embd, scale=n_embd**-0.5))
        writer.add_tensor(f"{b}.ssm_conv1d.weight", normal(d_inner, d_conv, scale=0.5))
        writer.add_tensor(f"{b}.ssm_conv1d.bias", normal(d_inner, scale=0.1))
        writer.add_tensor(f"{b}.ssm_x.weight", normal(dt_rank + 2 * d_state, d_inner, scale=d_inner**-0.5))
        writer.add_tensor(f"{b}.ssm_dt.weight", normal(d_inner, dt_rank, scale=dt_rank**-0.5))
        # softplus(dt) around 0.1-0.5: the state keeps tokens from well back in the history
        writer.add_tensor(f"{b}.ssm_dt.bias", (rng.uniform(-2.5, -0.5, d_inner)).astype(np.float32))
        a = -np.tile(np.arange(1, d_state + 1, dtype=np.float32), (d_inner, 1)) * 0.1
        writer.add_tensor(f"{b}.ssm_a", a)
        writer.add_tensor(f"{b}.ssm_d", np.ones(d_inner, dtype=np.float32))
        # large enough that the state, not only the token's own embedding, picks the next token
        writer.add_tensor(f"{b}.ssm_out.weight", normal(n_embd, d_inner, scale=3 * d_inner**-0.5))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_tiny_lfm2(path: Path, *, seed: int, n_embd: int = 64, n_ff: int = 128, layers: str = "cac") -> Path:
    """An LFM2 (hybrid: short-convolution layers "c" with a recurrent state, attention layers
    "a" with a KV cache) llama.cpp loads on a CPU; names and shapes as
    ``llama_model_lfm2::load_arch_tensors`` asks for them (a layer with no KV heads is a
    convolution layer)."""
    import gguf

    rng = np.random.default_rng(seed)
    n_head, n_kv, l_cache = 4, 2, 3
    head = n_embd // n_head
    writer = gguf.GGUFWriter(str(path), "lfm2")
    writer.add_name(f"tiny-lfm2-{seed}")
    writer.add_context_length(4096)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(len(layers))
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv([n_kv if kind == "a" else 0 for kind in layers])
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_shortconv_l_cache(l_cache)
    writer.add_file_type(int(gguf.LlamaFileType.ALL_F32))
    n_vocab = _copy_tokenizer(writer)

    def normal(*shape: int, scale: float) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    ones = lambda n: np.ones(n, dtype=np.float32)  # noqa: E731
    writer.add_tensor("token_embd.weight", normal(n_vocab, n_embd, scale=1.0))
    writer.add_tensor("token_embd_norm.weight", ones(n_embd))
    writer.add_tensor("output.weight", normal(n_vocab, n_embd, scale=1.0))
    for i, kind in enumerate(layers):
        b = f"blk.{i}"
        writer.add_tensor(f"{b}.attn_norm.weight", ones(n_embd))
        writer.add_tensor(f"{b}.ffn_norm.weight", ones(n_embd))
        writer.add_tensor(f"{b}.ffn_gate.weight", normal(n_ff, n_embd, scale=n_embd**-0.5))
        writer.add_tensor(f"{b}.ffn_up.weight", normal(n_ff, n_embd, scale=n_embd**-0.5))
        writer.add_tensor(f"{b}.ffn_down.weight", normal(n_embd, n_ff, scale=n_ff**-0.5))
        if kind == "a":
            writer.add_tensor(f"{b}.attn_q_norm.weight", ones(head))
            writer.add_tensor(f"{b}.attn_k_norm.weight", ones(head))
            writer.add_tensor(f"{b}.attn_q.weight", normal(n_embd, n_embd, scale=n_embd**-0.5))
            writer.add_tensor(f"{b}.attn_k.weight", normal(n_kv * head, n_embd, scale=n_embd**-0.5))
            writer.add_tensor(f"{b}.attn_v.weight", normal(n_kv * head, n_embd, scale=n_embd**-0.5))
            writer.add_tensor(f"{b}.attn_output.weight", normal(n_embd, n_embd, scale=2 * n_embd**-0.5))
        else:
            writer.add_tensor(f"{b}.shortconv.conv.weight", normal(n_embd, l_cache, scale=1.0))
            writer.add_tensor(f"{b}.shortconv.in_proj.weight", normal(3 * n_embd, n_embd, scale=n_embd**-0.5))
            writer.add_tensor(f"{b}.shortconv.out_proj.weight", normal(n_embd, n_embd, scale=2 * n_embd**-0.5))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
