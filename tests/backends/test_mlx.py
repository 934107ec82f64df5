"""The MLX backend on the real model (SmolLM2-135M-Instruct Q4_1 GGUF, read by MLX directly).

MLX's CPU backend runs this model at about 4-6 tokens/s here (its CPU matmuls go through a
reference BLAS; llama.cpp does 125), so every test keeps its token count small: prompts
of a few dozen tokens and 16-24 generated tokens. The whole module takes a few minutes.

What is shown, and the numbers measured on this machine (Linux x86-64 CPU, mlx 0.32.4):

* greedy speculative decoding equals AR token for token on MLX, n-gram and model drafter,
  K in {1, 2, 4, 8}, with rejections in every configuration;
* a block of K rows equals K one-token evaluations exactly (max |difference| 0.0 for K up to
  8), and after a rollback the next logits equal a fresh evaluation exactly (0.0): on the
  MLX CPU backend, as on llama.cpp's, a greedy divergence would be a bug, not numerics;
* speculative sampling with an MLX draft model gives the target's next-token distribution
  (chi-square);
* the GGUF import is right: MLX's logits match an independent float64 NumPy forward pass
  over the same dequantised GGUF tensors (llama.cpp's layout and interleaved RoPE, no
  unpermutation) within 2e-4, while llama.cpp itself is up to ~1 logit away from that
  reference (it quantises activations to 8 bits for its quantised matmuls on CPU);
* so greedy output agrees with llama.cpp's for the first 16+ tokens on most prompts; where
  it diverges the margin at that position is printed (run with ``-rP`` to see it);
* the rebuilt tokenizer gives llama.cpp's ids, pieces and stop tokens; the exported mlx-lm
  directory loads in ``mlx_lm.load`` and gives the same logits.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from spectui.config import BackendConfig, RunConfig, SamplingConfig
from spectui.drafting import DraftConfig, Fixed, Model
from spectui.errors import SpectuiError
from spectui.models.chat import apply_chat_template
from spectui.recording.schema import Step
from tests.prompts import ALL

MLX = BackendConfig(name="mlx", n_ctx=512)
MAX_TOKENS = 16
#: one token, a short block and a long one (2 was here too: it exercised no path 1 and 4 do not,
#: and the grid is among the slowest of the suite)
K_VALUES = (1, 4, 8)
#: a copy-heavy raw prompt: both drafters get accepted and rejected tokens on it at every K
#: (checked on llama.cpp first; MLX and llama.cpp agree on its greedy continuation)
SPEC_PROMPT = "Fix the typos: The quick brwon fox jumpd over the lazy dog.\nFixed: The quick"
#: block rows and rollback: on this backend measured 0.0; the tolerance only leaves room for
#: GPU kernels whose reductions depend on the batch shape
ATOL = 1e-4


@pytest.fixture(scope="module")
def llama(model_path):
    from spectui.engine.backends.llamacpp import LlamaCppBackend

    # one thread: llama.cpp's worker threads spin at barriers, and on a shared 2-core machine
    # a descheduled worker turned 1 s of decoding into 60 s (measured); speed is not tested here
    backend = LlamaCppBackend.open(model_path, BackendConfig(n_ctx=512, n_threads=1))
    yield backend
    backend.close()


def generate(engine, prompt: str, **overrides) -> tuple[list[int], list[Step]]:
    config = RunConfig(
        target=engine.target.model.path, prompt=prompt, chat=False, max_tokens=MAX_TOKENS, backend=MLX, **overrides
    )
    steps = [ev for ev in engine.run(config, memory_interval_s=None) if isinstance(ev, Step)]
    return [t for s in steps for t in s.tokens], steps


def first_divergence(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def top2_margin(backend, prefix: list[int]) -> float:
    backend.truncate(0)
    row = np.array(backend.eval(prefix, all_logits=False)[-1])
    top2 = np.sort(row)[-2:]
    return float(top2[1] - top2[0])


# -- loading and describing ------------------------------------------------------------------


def test_engine_loads_mlx_target_and_draft(mlx_engine, llama):
    t, d = mlx_engine.target, mlx_engine.draft_model
    assert t.name == d.name == "mlx"
    assert t.model is d.model, "a self-drafter must share the target's weights"
    assert t._cache is not d._cache, "but not its KV cache"
    info = t.runtime_info()
    assert info["backend"] == "mlx" and info["mlx"] and info["mlx-lm"]
    assert info["device"].startswith("Device(")
    for key in ("active_memory_bytes", "peak_memory_bytes", "cache_memory_bytes"):
        assert int(info[key]) >= 0
    assert int(info["peak_memory_bytes"]) > 50_000_000, "the weights should show in MLX's peak memory"
    assert all(isinstance(v, str) for v in info.values())
    # one file, one identity: the recording header cannot tell the backends' models apart
    assert t.artifacts() == llama.artifacts()
    assert t.n_vocab == llama.n_vocab
    assert (t.bos_token, t.eos_token) == (llama.bos_token, llama.eos_token)
    assert t.chat_template == llama.chat_template


def test_tokenizer_matches_llamacpp(mlx_engine, llama):
    t = mlx_engine.target
    template = llama.chat_template
    texts = [
        *ALL,
        *(apply_chat_template(template, p, bos_token=llama.bos_token, eos_token=llama.eos_token) for p in ALL[:4]),
        SPEC_PROMPT,
        "numbers 1234567 and 3.14159, emoji \U0001f389 and \u00fcn\u00efc\u00f6d\u00e9 \u2014 \u201cquotes\u201d \u65e5\u672c\u8a9e",
        "  leading spaces, tabs\tand\n\nnewlines\r\n trailing   ",
        "don't I'll we've THEY'RE",
        "<|im_start|>user<|im_end|><file_sep>code<|endoftext|>",
    ]
    for text in texts:
        for special in (True, False):
            assert t.tokenize(text, special=special) == llama.tokenize(text, special=special), (text[:60], special)
        assert t.tokenize(text, add_bos=True) == llama.tokenize(text, add_bos=True)
    assert t.tokenize("<|im_start|>")[0] == 1 and len(t.tokenize("<|im_start|>", special=False)) > 1
    assert t.eog_tokens == llama.eog_tokens
    pieces = [t.piece(i) for i in range(t.n_vocab)]
    assert pieces == [llama.piece(i) for i in range(llama.n_vocab)]


def test_gguf_import_matches_float64_reference(mlx_engine, llama, model_path):
    """MLX's forward pass equals an independent float64 one on the same dequantised tensors.

    The reference uses the GGUF tensors as llama.cpp lays them out (Q/K rows permuted) with
    llama.cpp's interleaved RoPE, so it checks the unpermutation + half-split RoPE of the
    import without sharing any of its code. llama.cpp's own distance to the reference is
    reported beside it: that is where backend disagreement comes from.
    """
    import mlx.core as mx

    raw, meta = mx.load(model_path, return_metadata=True)
    g = lambda key: meta[key].item()  # noqa: E731

    def tensor(name: str) -> np.ndarray:
        if f"{name}.scales" in raw:
            packed, scales = raw[f"{name}.weight"], raw[f"{name}.scales"]
            bits = packed.shape[-1] // scales.shape[-1]  # 32-bit words per group of 32
            x = mx.dequantize(packed, scales.astype(mx.float32), raw[f"{name}.biases"].astype(mx.float32), group_size=32, bits=bits)
        else:
            x = raw[f"{name}.weight"].astype(mx.float32)
        return np.array(x).astype(np.float64)

    n_layer, n_head, n_kv = g("llama.block_count"), g("llama.attention.head_count"), g("llama.attention.head_count_kv")
    dim = g("llama.embedding_length")
    hd, eps, base = dim // n_head, g("llama.attention.layer_norm_rms_epsilon"), g("llama.rope.freq_base")
    names = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down", "attn_norm", "ffn_norm")
    layers = [{k: tensor(f"blk.{i}.{k}") for k in names} for i in range(n_layer)]
    emb, out_norm = tensor("token_embd"), tensor("output_norm")

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    def rope(x, pos):  # llama.cpp's "normal" RoPE rotates adjacent pairs (2i, 2i+1)
        theta = pos[:, None] * base ** (-2 * np.arange(hd // 2) / hd)
        c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
        out = np.empty_like(x)
        out[..., 0::2] = x[..., 0::2] * c - x[..., 1::2] * s
        out[..., 1::2] = x[..., 0::2] * s + x[..., 1::2] * c
        return out

    def forward(tokens):
        n = len(tokens)
        pos = np.arange(n, dtype=np.float64)
        h = emb[tokens]
        causal = np.triu(np.full((n, n), -np.inf), 1)
        for w in layers:
            x = rms(h, w["attn_norm"])
            q = rope((x @ w["attn_q"].T).reshape(n, n_head, hd), pos)
            k = np.repeat(rope((x @ w["attn_k"].T).reshape(n, n_kv, hd), pos), n_head // n_kv, axis=1)
            v = np.repeat((x @ w["attn_v"].T).reshape(n, n_kv, hd), n_head // n_kv, axis=1)
            a = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + causal
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            h = h + np.einsum("hts,shd->thd", a, v).reshape(n, dim) @ w["attn_output"].T
            x = rms(h, w["ffn_norm"])
            gate, up = x @ w["ffn_gate"].T, x @ w["ffn_up"].T
            h = h + (gate / (1 + np.exp(-gate)) * up) @ w["ffn_down"].T
        return rms(h, out_norm) @ emb.T

    # a short raw prompt: MLX on this CPU costs ~0.2 s a token, and the check is per position
    tokens = llama.tokenize("The sky is blue because")
    reference = forward(np.array(tokens))
    t = mlx_engine.target
    t.truncate(0)
    ours = np.array(t.eval(tokens, all_logits=True))
    llama.truncate(0)
    theirs = np.array(llama.eval(tokens, all_logits=True))
    mlx_diff = float(np.abs(ours - reference).max())
    llama_diff = float(np.abs(theirs - reference).max())
    print(f"max |logit - float64 reference| over {len(tokens)} positions: mlx {mlx_diff:.2e}, llama.cpp {llama_diff:.3f}")
    assert mlx_diff < 2e-3, f"MLX is {mlx_diff} away from the float64 reference (llama.cpp: {llama_diff})"
    assert (ours.argmax(1) == reference.argmax(1)).all()


# -- exactness of the cache ------------------------------------------------------------------


def test_block_rows_match_one_token_at_a_time(mlx_engine):
    """Row i of a K-token block equals the logits of feeding the K tokens one by one."""
    t = mlx_engine.target
    prompt = t.tokenize("Count from one to ten: one, two, three,")
    block = t.tokenize(" four, five, six, seven, eight", special=False)[:8]
    t.truncate(0)
    t.eval(prompt, all_logits=False)
    base = t.n_past
    single = np.stack([np.array(t.eval((tok,), all_logits=False)[-1]) for tok in block])
    diffs = {}
    for k in K_VALUES:
        t.truncate(base)
        batched = np.array(t.eval(block[:k], all_logits=True))
        assert batched.shape == (k, t.n_vocab)
        diffs[k] = float(np.abs(batched - single[:k]).max())
        assert (batched.argmax(1) == single[:k].argmax(1)).all()
    print(f"max |block row - single-token row| by K: {diffs}")
    assert max(diffs.values()) <= ATOL, diffs


def test_logits_after_rollback_match_fresh_evaluation(mlx_engine):
    t = mlx_engine.target
    prompt = t.tokenize("Name three rivers in Europe.")
    t.truncate(0)
    first = int(t.eval(prompt, all_logits=False)[-1].argmax())
    drafts = [1234, 4321, 777, 99]  # nonsense: keep `first` and drafts[0], reject the rest
    base = t.n_past
    rows = np.array(t.eval([first, *drafts], all_logits=True))
    assert rows.shape == (5, t.n_vocab)
    t.truncate(base + 2)
    assert t.n_past == base + 2
    after = np.array(t.eval((555,), all_logits=False)[-1])
    t.truncate(0)
    t.eval([*prompt, first, drafts[0]], all_logits=False)
    fresh = np.array(t.eval((555,), all_logits=False)[-1])
    diff = float(np.abs(after - fresh).max())
    print(f"max |logit difference| after rollback vs fresh: {diff}")
    assert diff <= ATOL
    assert int(after.argmax()) == int(fresh.argmax())


# -- greedy speculative == AR --------------------------------------------------------------


@pytest.fixture(scope="module")
def ar_tokens(mlx_engine):
    return generate(mlx_engine, SPEC_PROMPT, mode="ar")[0]


@pytest.mark.parametrize("drafter", ["ngram", "model-t1"])
@pytest.mark.parametrize("k", K_VALUES)
def test_greedy_speculative_equals_ar(mlx_engine, ar_tokens, drafter, k):
    path = mlx_engine.target.model.path
    draft = DraftConfig(length=Fixed(k=k)) if drafter == "ngram" else DraftConfig(drafter=Model(path=path, temperature=1.0), length=Fixed(k=k))
    spec, steps = generate(mlx_engine, SPEC_PROMPT, mode="spec", draft=draft, sampling=SamplingConfig(seed=k))
    i = first_divergence(ar_tokens, spec)
    if i is not None:
        prompt = mlx_engine.target.tokenize(SPEC_PROMPT)
        margin = top2_margin(mlx_engine.target, [*prompt, *ar_tokens[:i]])
        pytest.fail(f"{drafter} K={k} diverged from AR at index {i}: AR {ar_tokens[i:i+3]} vs spec {spec[i:i+3]}; "
                    f"top-2 logit margin there {margin:.6f}")
    rejected = sum(1 for s in steps if s.accepted < s.drafted)
    accepted = sum(s.accepted for s in steps)
    assert rejected > 0, f"{drafter} K={k}: no draft was ever rejected, the test proves nothing"
    assert accepted > 0, f"{drafter} K={k}: no draft was ever accepted"
    assert all(s.drafted <= k for s in steps)


# -- llama.cpp vs MLX on the same file ----------------------------------------------------------


#: A top-two margin below this (in logits) is a near tie: the backends' logits differ by ~1.
NEAR_TIE = 0.5


#: how much of each prompt the agreement test sends: its last characters (cut at a space), which
#: are each prompt's own (the quality prompts share their first lines) and hold its question
AGREEMENT_TAIL = 120


def prompt_tail(text: str, chars: int = AGREEMENT_TAIL) -> str:
    text = text.strip()
    if len(text) <= chars:
        return text
    cut = text[-chars:]
    return cut[cut.find(" ") + 1 :]


def test_greedy_output_agrees_with_llamacpp(mlx_engine, llama, model_path):
    """Every prompt in prompts/ (its last ~120 characters), chat template applied, 32 greedy
    tokens on both backends.

    How many prompts agree on all 32 tokens depends on the CPU's kernels: llama.cpp quantises
    activations to 8 bits for the quantised matmuls (with instruction-set-specific dot
    products), MLX computes in float32, and the two sets of logits stay ~1-1.5 apart. Measured
    on whole prompts: 13 of 20 on the machine that wrote this test; 10 of 20 on an AVX-512 VNNI
    Xeon with llama.cpp 0c1e570. On the prompts' tails, 11 of 22 on the 2-core x86 CI host.
    Every part seen was at a near tie: both backends' top-two margins under 0.28 logit at the
    parting token (e.g. short-greeting at token 17: 0.012 / 0.184). So the claim tested is that
    one: every divergence is a near tie on both sides, and a third of the prompts at least agree
    outright (a wrong model would part at once, with confident margins). The margins are
    printed (``-rP``).

    The tails, not the whole prompts: MLX's CPU backend costs ~0.11 s a token here whether the
    tokens come as a prefill or one by one, and the whole prompts (2,800 tokens) took 8
    minutes; the tails (~40 tokens each with the template) exercise the same import, kernels
    and comparison on the same 22 distinct texts.
    """
    from spectui.prompts import list_prompts
    from tests.backends.agreement import compare_backends

    prompts = list_prompts()
    assert all(p.text.strip() for p in prompts)
    # the whole prompts, templated, still tokenize alike (tokenizing is cheap; evaluating is the cost)
    for p in prompts:
        text = apply_chat_template(llama.chat_template, p.text, bos_token=llama.bos_token, eos_token=llama.eos_token)
        assert mlx_engine.target.tokenize(text, special=True) == llama.tokenize(text, special=True), p.name
    tails = [prompt_tail(p.text) for p in prompts]
    assert len(set(tails)) == len(tails), "every prompt's tail is its own"
    # half the MLX work in a second process: MLX's CPU backend computes on one core of two
    results = compare_backends(model_path, tails, 32, chat=True, llama=llama, mlx=mlx_engine.target, mlx_worker=True)
    for p, r in zip(prompts, results):
        print(f"{p.name}: {r.describe()}")
    assert all(r.tokenize_equal for r in results)
    agreeing = [r for r in results if r.divergence is None or r.divergence >= 32]
    assert len(agreeing) * 3 >= len(results), "\n".join(r.describe() for r in results)
    for r in results:
        if r.divergence is not None and r.llama_margin is not None:
            # a near tie broken differently, not a wrong model: each side's margin is small
            # next to the ~1-logit distance between the two backends' logits
            assert r.llama_margin < NEAR_TIE and r.mlx_margin < NEAR_TIE, r.describe()


def test_cross_backend_diff(model_path, tmp_path):
    """The same GGUF, prompt and settings recorded on llama.cpp and on MLX, then diffed as any
    two runs are: comparable (same weights, same prompt tokens), the backend and runtimes
    listed among the differences, token agreement, tok/s with its interval, and memory."""
    from spectui.compare.diff import diff_recordings
    from spectui.compare.diff_format import format_diff_text
    from spectui.engine.embedded import Engine
    from spectui.prompts import find_prompt
    from spectui.recording.reader import read_recording
    from spectui.recording.writer import RecordingWriter

    prompt = find_prompt("load-typo-fix")
    recordings = []
    for backend in (BackendConfig(n_threads=1), MLX):
        # a fixed K: the warm-up evaluates 2 block sizes on MLX, not the 17 of a cost-aware K
        config = RunConfig(target=model_path, prompt=prompt.text, prompt_tier=prompt.tier, max_tokens=32, backend=backend,
                           draft=DraftConfig(length=Fixed(k=4)))
        path = tmp_path / f"{backend.name}.spectui"
        with Engine.load(config) as engine, RecordingWriter(path) as writer:
            for ev in engine.run(config):
                writer.write(ev)
        recordings.append(read_recording(path))
    d = diff_recordings(*recordings)
    text = format_diff_text(d)
    print(text)
    assert d.comparable and not d.forced
    changed = {f.path for f in d.artifacts} | {f.path for f in d.configuration}
    assert "config.backend.name" in changed
    assert any(p.startswith("artifacts.runtime.mlx") for p in changed)
    assert d.outputs.common_length == 32
    # this prompt agrees on all 32 tokens (test above); a divergence would be reported with its index
    assert d.outputs.identical, text
    assert d.speedup.ci_low <= d.speedup.ratio <= d.speedup.ci_high
    assert d.baseline.summary.peak_rss_bytes > 0 and d.candidate.summary.peak_rss_bytes > 0


# -- mlx-lm directory export -----------------------------------------------------------------


def test_export_round_trip_through_mlx_lm(mlx_engine, model_path, tmp_path):
    import mlx.core as mx
    from mlx_lm import load as mlx_lm_load

    from spectui.engine.backends.mlx import MLXBackend, resolve_mlx_model
    from spectui.engine.backends.mlx_gguf import export_mlx_model

    # export into the layout of a Hugging Face cache, so the hub-id path is exercised offline
    repo = tmp_path / "hub" / "models--spectui--smollm2-mlx"
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    out = export_mlx_model(model_path, repo / "snapshots" / commit)
    assert os.path.samefile(resolve_mlx_model("spectui/smollm2-mlx", hub_cache=str(tmp_path / "hub")), out)
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= set(os.listdir(out))
    with open(os.path.join(out, "tokenizer_config.json")) as f:
        assert json.load(f)["chat_template"] == mlx_engine.target.chat_template

    model, tokenizer = mlx_lm_load(out)
    text = "<|im_start|>user\nHi!<|im_end|>"  # short: MLX on this CPU costs ~0.2 s a token
    tokens = mlx_engine.target.tokenize(text)
    assert tokenizer.encode(text, add_special_tokens=False) == tokens
    theirs = np.array(model(mx.array(tokens)[None])[0, -4:].astype(mx.float32))

    t = mlx_engine.target
    t.truncate(0)
    gguf_rows = np.array(t.eval(tokens, all_logits=True))[-4:]
    exported = MLXBackend.open(out, MLX)
    try:
        assert exported.tokenize(text) == tokens
        assert exported.eog_tokens == t.eog_tokens and exported.chat_template == t.chat_template
        assert exported.artifacts().vocab_sha256 == t.artifacts().vocab_sha256
        dir_rows = np.array(exported.eval(tokens, all_logits=True))[-4:]
    finally:
        exported.close()
    # same tensors, same float32 compute: identical
    assert float(np.abs(dir_rows - gguf_rows).max()) == 0.0
    # mlx_lm as loaded computes with the stored float16 scales (its embedding rows come out
    # float16): close, not equal. Cast to float32 as spectui does on a CPU, it is identical.
    diff = float(np.abs(theirs - gguf_rows).max())
    model.set_dtype(mx.float32)
    theirs_f32 = np.array(model(mx.array(tokens)[None])[0, -4:].astype(mx.float32))
    diff_f32 = float(np.abs(theirs_f32 - gguf_rows).max())
    print(f"max |mlx_lm.load(export) - spectui MLX| over the last 4 positions: {diff:.4f} as stored, "
          f"{diff_f32} with float32 parameters")
    assert diff < 0.25, diff
    assert (theirs.argmax(1) == gguf_rows.argmax(1)).all()
    assert diff_f32 <= ATOL, diff_f32


# -- the mapping on other architectures, and refusals -----------------------------------------


def _tiny_vocab_metadata() -> dict:
    from spectui.models.tokenizer import byte_decoder

    chars = sorted(byte_decoder(), key=byte_decoder().get)
    tokens = ["<|endoftext|>", *chars]
    return {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "smollm",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.merges": [],
        "tokenizer.ggml.token_type": np.array([3] + [1] * 256, dtype=np.int32),
        "tokenizer.ggml.eos_token_id": np.array(0, dtype=np.uint32),
    }


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_synthetic_gguf_matches_mlx_lm_model(arch, tmp_path):
    """A tiny random model written as llama.cpp writes GGUF (Q/K permuted for llama, biases for
    qwen2) comes back as the same mlx-lm model: same logits."""
    import importlib

    import mlx.core as mx
    from mlx.utils import tree_flatten

    from spectui.engine.backends.mlx import MLXBackend

    n_head, n_kv, dim = 4, 2, 64
    cfg = dict(model_type=arch, hidden_size=dim, num_hidden_layers=2, intermediate_size=96, num_attention_heads=n_head,
               num_key_value_heads=n_kv, rms_norm_eps=1e-5, vocab_size=257, rope_theta=10000.0,
               max_position_embeddings=256, tie_word_embeddings=False)
    module = importlib.import_module(f"mlx_lm.models.{arch}")
    mx.random.seed(0)
    ref = module.Model(module.ModelArgs.from_dict(cfg))
    params = dict(tree_flatten(ref.parameters()))

    def permute(w, heads):  # what llama.cpp's converter does to llama Q/K rows
        return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    names = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output", "gate_proj": "ffn_gate",
             "up_proj": "ffn_up", "down_proj": "ffn_down", "input_layernorm": "attn_norm",
             "post_attention_layernorm": "ffn_norm"}
    tensors = {}
    for name, value in params.items():
        parts = name.split(".")
        if parts[0] == "lm_head":
            tensors[f"output.{parts[-1]}"] = value
        elif parts[1] == "embed_tokens":
            tensors[f"token_embd.{parts[-1]}"] = value
        elif parts[1] == "norm":
            tensors[f"output_norm.{parts[-1]}"] = value
        else:
            layer, kind = parts[2], parts[-2]
            if arch == "llama" and kind in ("q_proj", "k_proj"):
                value = permute(value, n_head if kind == "q_proj" else n_kv)
            tensors[f"blk.{layer}.{names[kind]}.{parts[-1]}"] = value
    u32, f32 = (lambda v: mx.array(v, dtype=mx.uint32)), (lambda v: mx.array(v, dtype=mx.float32))
    meta = {k: (mx.array(v) if isinstance(v, np.ndarray) else v) for k, v in _tiny_vocab_metadata().items()}
    meta.update({
        "general.architecture": arch,
        f"{arch}.block_count": u32(2), f"{arch}.embedding_length": u32(dim), f"{arch}.feed_forward_length": u32(96),
        f"{arch}.attention.head_count": u32(n_head), f"{arch}.attention.head_count_kv": u32(n_kv),
        f"{arch}.attention.layer_norm_rms_epsilon": f32(1e-5), f"{arch}.rope.freq_base": f32(10000.0),
        f"{arch}.context_length": u32(256),
    })
    path = str(tmp_path / f"tiny-{arch}.gguf")
    mx.save_gguf(path, tensors, meta)

    backend = MLXBackend.open(path, BackendConfig(name="mlx", n_ctx=64))
    try:
        tokens = backend.tokenize("hello world, hello")
        ours = np.array(backend.eval(tokens, all_logits=True))
    finally:
        backend.close()
    theirs = np.array(ref(mx.array(tokens)[None])[0])
    assert float(np.abs(ours - theirs).max()) < 1e-4


def test_refusals_are_one_line(tmp_path):
    from spectui.engine.backends.mlx import MLXBackend, resolve_mlx_model

    with pytest.raises(SpectuiError, match="local Hugging Face cache"):
        resolve_mlx_model("nobody-here/not-a-cached-model")
    not_gguf = tmp_path / "x.bin"
    not_gguf.write_bytes(b"not a model")
    with pytest.raises(SpectuiError, match="not a GGUF file"):
        MLXBackend.open(str(not_gguf), MLX)
    with pytest.raises(SpectuiError, match="no config.json"):
        MLXBackend.open(str(tmp_path), MLX)
