"""A tiny random-weight ``qwen35`` GGUF with one nextn (MTP) layer, for llama-server's draft-mtp.

llama.cpp treats a model as MTP-capable when ``qwen35.nextn_predict_layers`` is set and the first
nextn block holds ``blk.{block_count - 1}.nextn.eh_proj.weight`` (llama.cpp's ``src/llama-model.cpp``).
The shape that runs (measured there): n_embd 64, two trunk layers, one Gated-DeltaNet and one
full attention (``full_attention_interval`` 2: with 1, llama-server aborts at warm-up), then
the nextn block; ``rope.dimension_sections`` and the five ``ssm.*`` keys are required. The
vocabulary is SmolLM2's (copied from the embedded GGUF), so spectui's local vocabulary turns
the server's text into ids as it does for the embedded model.

Random weights draft but accept nothing, which would leave draft-mtp's verification path
untested. So the trunk's own weights are small (std 0.02) against embeddings of std 1: each
layer adds little to the residual stream, and the trunk's next token is, nearly, a function
of the current token alone (``argmax(output @ norm(embed(t)))``). The nextn block's
``eh_proj`` is [I | 0]: it passes the normalised embedding of the token it is given and drops
the trunk's hidden state, so its head computes the same function and guesses what the trunk
will say; drafts get accepted. ``nextn=False`` writes the same trunk without the nextn block
(and without the key): the model draft-mtp must refuse.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

N_EMBD = 64
N_HEAD = 2
HEAD_DIM = N_EMBD // N_HEAD
N_FF = 128
N_TRUNK = 2
# Gated DeltaNet sizes: heads of SSM_STATE, SSM_GROUPS key heads and SSM_V_HEADS value heads
SSM_STATE = 16
SSM_GROUPS = 2
SSM_V_HEADS = 2
SSM_CONV = 4
#: imrope sections: they cover half the rotary dimensions (HEAD_DIM / 2)
ROPE_SECTIONS = [6, 5, 5, 0]


def write_tiny_mtp(path: str | Path, vocab_from: str, *, nextn: bool = True, seed: int = 0) -> Path:
    """Write the model at ``path`` with the vocabulary of the GGUF ``vocab_from``."""
    import gguf

    from spectui.models.gguf import read_gguf

    path = Path(path)
    rng = np.random.default_rng(seed)
    meta = read_gguf(vocab_from).metadata
    n_vocab = len(meta["tokenizer.ggml.tokens"])
    n_blocks = N_TRUNK + (1 if nextn else 0)

    w = gguf.GGUFWriter(str(path), "qwen35")
    w.add_name("spectui tiny MTP test model" if nextn else "spectui tiny test model (no MTP)")
    w.add_file_type(int(gguf.LlamaFileType.ALL_F32))
    w.add_context_length(4096)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(N_FF)
    w.add_block_count(n_blocks)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_dimension_sections(ROPE_SECTIONS)
    w.add_ssm_conv_kernel(SSM_CONV)
    w.add_ssm_inner_size(SSM_STATE * SSM_V_HEADS)
    w.add_ssm_state_size(SSM_STATE)
    w.add_ssm_time_step_rank(SSM_V_HEADS)
    w.add_ssm_group_count(SSM_GROUPS)
    w.add_full_attention_interval(2)
    if nextn:
        w.add_nextn_predict_layers(1)
    _copy_tokenizer(w, meta)

    def small(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    # numpy shapes are ggml's reversed: ggml {n_embd, n_vocab} is (n_vocab, n_embd)
    w.add_tensor("token_embd.weight", rng.standard_normal((n_vocab, N_EMBD)).astype(np.float32))
    w.add_tensor("output_norm.weight", ones(N_EMBD))
    w.add_tensor("output.weight", rng.standard_normal((n_vocab, N_EMBD)).astype(np.float32))

    key_dim, value_dim = SSM_STATE * SSM_GROUPS, SSM_STATE * SSM_V_HEADS
    for il in range(n_blocks):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", ones(N_EMBD))
        w.add_tensor(p + "post_attention_norm.weight", ones(N_EMBD))
        if il == 0:  # the Gated-DeltaNet layer ((il + 1) % 2 != 0)
            w.add_tensor(p + "attn_qkv.weight", small(2 * key_dim + value_dim, N_EMBD))
            w.add_tensor(p + "attn_gate.weight", small(value_dim, N_EMBD))
            w.add_tensor(p + "ssm_conv1d.weight", small(2 * key_dim + value_dim, SSM_CONV))
            w.add_tensor(p + "ssm_dt.bias", small(SSM_V_HEADS))
            w.add_tensor(p + "ssm_a", -np.abs(small(SSM_V_HEADS)) - 0.5)  # a decay: negative
            w.add_tensor(p + "ssm_beta.weight", small(SSM_V_HEADS, N_EMBD))
            w.add_tensor(p + "ssm_alpha.weight", small(SSM_V_HEADS, N_EMBD))
            w.add_tensor(p + "ssm_norm.weight", ones(SSM_STATE))
            w.add_tensor(p + "ssm_out.weight", small(N_EMBD, value_dim))
        else:  # full attention: the trunk's second layer and the nextn block alike
            w.add_tensor(p + "attn_q.weight", small(2 * HEAD_DIM * N_HEAD, N_EMBD))  # queries and their gate
            w.add_tensor(p + "attn_k.weight", small(HEAD_DIM * N_HEAD, N_EMBD))
            w.add_tensor(p + "attn_v.weight", small(HEAD_DIM * N_HEAD, N_EMBD))
            w.add_tensor(p + "attn_output.weight", small(N_EMBD, HEAD_DIM * N_HEAD))
            w.add_tensor(p + "attn_q_norm.weight", ones(HEAD_DIM))
            w.add_tensor(p + "attn_k_norm.weight", ones(HEAD_DIM))
        w.add_tensor(p + "ffn_gate.weight", small(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_up.weight", small(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_down.weight", small(N_EMBD, N_FF))
        if il >= N_TRUNK:  # the nextn block: [I | 0] over concat(norm(embedding), norm(hidden))
            eh = np.concatenate([np.eye(N_EMBD), np.zeros((N_EMBD, N_EMBD))], axis=1).astype(np.float32)
            w.add_tensor(p + "nextn.eh_proj.weight", eh)
            w.add_tensor(p + "nextn.enorm.weight", ones(N_EMBD))
            w.add_tensor(p + "nextn.hnorm.weight", ones(N_EMBD))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _copy_tokenizer(w, meta: dict) -> None:  # noqa: ANN001 - a gguf.GGUFWriter
    """Every ``tokenizer.*`` key of the source, with GGUF types llama.cpp reads them as."""
    import gguf

    for key, value in meta.items():
        if not key.startswith("tokenizer."):
            continue
        if isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        elif isinstance(value, str):
            w.add_string(key, value)
        elif isinstance(value, list) and value:
            sub = gguf.GGUFValueType.STRING if isinstance(value[0], str) else (
                gguf.GGUFValueType.FLOAT32 if isinstance(value[0], float) else gguf.GGUFValueType.INT32)
            w.add_key_value(key, value, gguf.GGUFValueType.ARRAY, sub_type=sub)
