"""Tiny seeded draft heads for the embedded SmolLM2-135M target (hidden size 576, 30 layers):
EAGLE-3 (with and without a ``d2t`` map), DFlash and DSpark, as the vendored llama.cpp loads
them (``src/models/eagle3.cpp``, ``src/models/dflash.cpp``, ``common/speculative.cpp``), and
one EAGLE-3 head built so that its drafts are kept.

Random weights draft tokens the target rejects, which tests the path (a head runs, the output
is AR's) but never the accepting side. So ``write_keep_eagle3`` writes a head that repeats the
last token, exactly:

* its own token embeddings, 128 wide: a random unit code for each token (127 dimensions, times
  8) and one constant dimension (8), so every row has the same norm and, after the RMS norm,
  the constant dimension is the same for every token;
* queries and keys read only that constant dimension: the same vector at every position, so
  after RoPE the score is largest at distance 0 (a sum of cosines of the position difference)
  and, scaled up, attention reads the current position alone;
* values pass the token's code, the output projection is the identity, the fused target
  features are dropped (``fc`` = 0) and the FFN adds nothing (``ffn_down`` = 0), so the
  decoder's state is the code of the token it was given (times the step: the state carries on);
* its output head is the codes again: the token given has cosine 1, any other about 0.1.

The drafter is given the last accepted token first, so it drafts that token K times; a prompt
the target continues by repeating one token gets its drafts accepted.

The misfits (``write_eagle3(..., target_hidden_size=512)``, ``extract_layers=(2, 15, 31)``,
``write_dflash(..., width=512)``) are the heads the runtime must refuse before a server starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tests.runtime.tiny_mtp import _copy_tokenizer

#: the embedded target's shape (SmolLM2-135M)
TARGET_HIDDEN = 576
TARGET_LAYERS = 30
EXTRACT = (2, 15, 27)
N_FF = 256
BLOCK_SIZE = 4
#: DFlash's masked positions: any id of the vocabulary does for random weights
MASK_TOKEN = 0
DRAFT_VOCAB = 2048  # the reduced vocabulary of the d2t head
MARKOV_RANK = 8


def _writer(path: Path, arch: str, vocab_from: str, *, width: int, n_head: int, n_head_kv: int, n_ff: int,
            extract: Sequence[int], name: str, rope_base: float = 10000.0):  # noqa: ANN202 - a gguf.GGUFWriter
    import gguf

    from spectui.models.gguf import read_gguf

    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(name)
    w.add_file_type(int(gguf.LlamaFileType.ALL_F32))
    w.add_context_length(8192)
    w.add_embedding_length(width)
    w.add_feed_forward_length(n_ff)
    w.add_block_count(1)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(rope_base)
    w.add_array(f"{arch}.target_layers", [int(i) for i in extract])
    _copy_tokenizer(w, read_gguf(vocab_from).metadata)
    return w


def _finish(w) -> None:  # noqa: ANN001 - a gguf.GGUFWriter
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_eagle3(path: str | Path, vocab_from: str, *, d2t: bool = False, target_hidden_size: int = TARGET_HIDDEN,
                 extract_layers: Sequence[int] = EXTRACT, seed: int = 0) -> Path:
    """A random EAGLE-3 head, 576 wide (it borrows the target's embeddings and, without
    ``d2t``, its output head); with ``d2t`` it has its own head over a reduced vocabulary."""
    path = Path(path)
    rng = np.random.default_rng(seed)
    width, n_head, n_kv = TARGET_HIDDEN, 9, 3
    head_dim = width // n_head
    w = _writer(path, "eagle3", vocab_from, width=width, n_head=n_head, n_head_kv=n_kv, n_ff=N_FF, extract=extract_layers,
                name="spectui tiny EAGLE-3 head" + (" (d2t)" if d2t else ""))
    w.add_uint32("eagle3.target_hidden_size", target_hidden_size)

    def rand(*shape: int, std: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    ones = np.ones(width, dtype=np.float32)
    # numpy shapes are ggml's reversed
    w.add_tensor("fc.weight", rand(width, 3 * target_hidden_size))
    w.add_tensor("output_norm.weight", ones)
    if d2t:
        n_vocab = len(read_vocab(vocab_from))
        ids = np.sort(rng.choice(n_vocab, DRAFT_VOCAB, replace=False)).astype(np.int64)
        w.add_tensor("d2t", ids)
        w.add_tensor("output.weight", rand(DRAFT_VOCAB, width, std=1.0))
    p = "blk.0."
    w.add_tensor(p + "attn_norm.weight", ones)
    w.add_tensor(p + "attn_norm_2.weight", ones)
    w.add_tensor(p + "attn_q.weight", rand(head_dim * n_head, 2 * width))
    w.add_tensor(p + "attn_k.weight", rand(head_dim * n_kv, 2 * width))
    w.add_tensor(p + "attn_v.weight", rand(head_dim * n_kv, 2 * width))
    w.add_tensor(p + "attn_output.weight", rand(width, head_dim * n_head))
    w.add_tensor(p + "ffn_norm.weight", ones)
    w.add_tensor(p + "ffn_gate.weight", rand(N_FF, width))
    w.add_tensor(p + "ffn_up.weight", rand(N_FF, width))
    w.add_tensor(p + "ffn_down.weight", rand(width, N_FF))
    _finish(w)
    return path


def write_keep_eagle3(path: str | Path, vocab_from: str, *, seed: int = 0) -> Path:
    """The EAGLE-3 head whose drafts repeat the last token (module docstring)."""
    path = Path(path)
    rng = np.random.default_rng(seed)
    width, n_ff = 128, 32
    code = width - 1
    n_vocab = len(read_vocab(vocab_from))
    w = _writer(path, "eagle3", vocab_from, width=width, n_head=1, n_head_kv=1, n_ff=n_ff, extract=EXTRACT,
                name="spectui tiny EAGLE-3 head (repeats the last token)", rope_base=10.0)
    w.add_uint32("eagle3.target_hidden_size", TARGET_HIDDEN)

    codes = rng.standard_normal((n_vocab, code))
    codes /= np.linalg.norm(codes, axis=1, keepdims=True)
    embd = np.concatenate([8 * codes, np.full((n_vocab, 1), 8.0)], axis=1)  # every row: norm 8 * sqrt(2), rms 1
    out = np.concatenate([4 * codes, np.zeros((n_vocab, 1))], axis=1)
    w.add_tensor("token_embd.weight", embd.astype(np.float16))
    w.add_tensor("output.weight", out.astype(np.float16))
    w.add_tensor("output_norm.weight", np.ones(width, dtype=np.float32))
    w.add_tensor("fc.weight", np.zeros((width, 3 * TARGET_HIDDEN), dtype=np.float32))

    # the attention input is concat(norm(token embedding), norm(g)): 2 * width columns
    q = np.zeros((width, 2 * width), dtype=np.float32)
    q[:, code] = 1.0  # every query and key dimension is the constant dimension (8 after the norm)
    v = np.zeros((width, 2 * width), dtype=np.float32)
    v[:code, :code] = np.eye(code)  # the token's code; the constant is left out
    p = "blk.0."
    w.add_tensor(p + "attn_norm.weight", np.ones(width, dtype=np.float32))
    w.add_tensor(p + "attn_norm_2.weight", np.ones(width, dtype=np.float32))
    w.add_tensor(p + "attn_q.weight", q)
    w.add_tensor(p + "attn_k.weight", q.copy())
    w.add_tensor(p + "attn_v.weight", v)
    w.add_tensor(p + "attn_output.weight", np.eye(width, dtype=np.float32))
    w.add_tensor(p + "ffn_norm.weight", np.ones(width, dtype=np.float32))
    w.add_tensor(p + "ffn_gate.weight", np.zeros((n_ff, width), dtype=np.float32))
    w.add_tensor(p + "ffn_up.weight", np.zeros((n_ff, width), dtype=np.float32))
    w.add_tensor(p + "ffn_down.weight", np.zeros((width, n_ff), dtype=np.float32))
    _finish(w)
    return path


def write_dflash(path: str | Path, vocab_from: str, *, dspark: bool = False, width: int = TARGET_HIDDEN,
                 extract_layers: Sequence[int] = EXTRACT, seed: int = 0) -> Path:
    """A random DFlash head (block size 4, the target's embeddings and output head); with
    ``dspark`` the DSpark Markov head and a confidence head are added (rank 8)."""
    path = Path(path)
    rng = np.random.default_rng(seed)
    n_head, n_kv = (9, 3) if width % 9 == 0 else (8, 4)
    head_dim = width // n_head
    w = _writer(path, "dflash", vocab_from, width=width, n_head=n_head, n_head_kv=n_kv, n_ff=N_FF, extract=extract_layers,
                name="spectui tiny DSpark head" if dspark else "spectui tiny DFlash head")
    w.add_uint32("dflash.block_size", BLOCK_SIZE)
    w.add_uint32("tokenizer.ggml.mask_token_id", MASK_TOKEN)

    def rand(*shape: int, std: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    ones = np.ones(width, dtype=np.float32)
    w.add_tensor("fc.weight", rand(width, len(extract_layers) * width))
    w.add_tensor("enc.output_norm.weight", ones)
    w.add_tensor("output_norm.weight", ones)
    p = "blk.0."
    w.add_tensor(p + "attn_norm.weight", ones)
    w.add_tensor(p + "attn_q.weight", rand(head_dim * n_head, width))
    w.add_tensor(p + "attn_k.weight", rand(head_dim * n_kv, width))
    w.add_tensor(p + "attn_v.weight", rand(head_dim * n_kv, width))
    w.add_tensor(p + "attn_output.weight", rand(width, head_dim * n_head))
    w.add_tensor(p + "attn_q_norm.weight", np.ones(head_dim, dtype=np.float32))
    w.add_tensor(p + "attn_k_norm.weight", np.ones(head_dim, dtype=np.float32))
    w.add_tensor(p + "ffn_norm.weight", ones)
    w.add_tensor(p + "ffn_gate.weight", rand(N_FF, width))
    w.add_tensor(p + "ffn_up.weight", rand(N_FF, width))
    w.add_tensor(p + "ffn_down.weight", rand(width, N_FF))
    if dspark:
        n_vocab = len(read_vocab(vocab_from))
        w.add_bool("dflash.has_confidence_head", True)
        w.add_tensor("markov_w1.weight", rand(n_vocab, MARKOV_RANK))
        w.add_tensor("markov_w2.weight", rand(n_vocab, MARKOV_RANK))
        w.add_tensor("conf_proj.weight", rand(1, width + MARKOV_RANK))
    _finish(w)
    return path


def read_vocab(path: str) -> list[str]:
    from spectui.models.gguf import read_gguf

    return list(read_gguf(path).metadata["tokenizer.ggml.tokens"])


def write_all(folder: str | Path, vocab_from: str) -> dict[str, Path]:
    """Every head the tests use, by name, written into ``folder``."""
    folder = Path(folder)
    return {
        "eagle3": write_eagle3(folder / "eagle3.gguf", vocab_from),
        "eagle3-d2t": write_eagle3(folder / "eagle3-d2t.gguf", vocab_from, d2t=True, seed=1),
        "eagle3-keep": write_keep_eagle3(folder / "eagle3-keep.gguf", vocab_from),
        "dflash": write_dflash(folder / "dflash.gguf", vocab_from),
        "dspark": write_dflash(folder / "dspark.gguf", vocab_from, dspark=True, seed=2),
        "eagle3-hidden-512": write_eagle3(folder / "eagle3-hidden-512.gguf", vocab_from, target_hidden_size=512),
        "eagle3-layer-31": write_eagle3(folder / "eagle3-layer-31.gguf", vocab_from, extract_layers=(2, 15, 31)),
        "dflash-512": write_dflash(folder / "dflash-512.gguf", vocab_from, width=512),
    }
