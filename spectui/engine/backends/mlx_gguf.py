"""GGUF files as mlx-lm models: tensor names, hyperparameters and quantisation mapped over.

One GGUF should feed both backends, so the MLX backend reads the file llama.cpp reads.
``mx.load`` parses GGUF itself: Q4_0, Q4_1 and Q8_0 tensors come back as MLX affine
quantisation triples (packed ``uint32`` weight, ``scales``, ``biases``; group size 32), which
is what ``nn.QuantizedLinear`` / ``nn.QuantizedEmbedding`` hold, so those weights are used
without requantising or dequantising; every other GGUF type comes back as float16.

Two conversions are needed on top of the renaming:

* llama.cpp's converter permutes the rows of the Q and K projections of ``llama`` models so
  that its interleaved RoPE sees the pairs Hugging Face's half-split RoPE uses. mlx-lm
  models use the Hugging Face layout, so the permutation is undone here. It only moves whole
  output rows, and quantisation groups run along a row, so the packed weights, scales and
  biases are reordered exactly, with no requantisation. (``qwen2`` GGUFs use NeoX RoPE and
  are not permuted.)
* hyperparameters move from ``{arch}.*`` metadata keys to an mlx-lm ``config.json``.

``export_mlx_model`` writes the result as an mlx-lm model directory that ``mlx_lm.load``
reads, tokenizer and chat template included.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spectui.errors import SpectuiError
from spectui.models.gguf import GGUFInfo, read_gguf
from spectui.models.tokenizer import TextTokenizer

#: GGUF architecture -> (mlx-lm model module, Q/K rows permuted for llama.cpp's RoPE)
ARCHITECTURES = {"llama": ("llama", True), "qwen2": ("qwen2", False)}

_LAYER_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
_TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


@dataclass
class MLXLoaded:
    """A built model and what describes it."""

    model: Any  # mlx.nn.Module
    config: dict[str, Any]
    tokenizer: TextTokenizer
    #: the file's quantisation name (e.g. Q4_1)
    quant: str
    #: how MLX holds it (e.g. "4-bit g32, 8-bit g32": Q4_1 layers, a Q8_0 embedding)
    mlx_quant: str = ""
    gguf: GGUFInfo | None = None


def gguf_config(metadata: Mapping[str, Any], tensor_names: set[str]) -> dict[str, Any]:
    """The mlx-lm ``config.json`` a GGUF's metadata (``read_gguf``'s, plain Python values)
    describes (llama and qwen2 families)."""
    arch = metadata.get("general.architecture", "")
    if arch not in ARCHITECTURES:
        raise SpectuiError(
            f"the MLX backend imports GGUF architectures {sorted(ARCHITECTURES)}, not {arch!r}; use --backend llamacpp"
        )
    module, _ = ARCHITECTURES[arch]

    def get(key: str, default: Any = None) -> Any:
        value = metadata.get(f"{arch}.{key}", default)
        if value is None:
            raise SpectuiError(f"GGUF metadata lacks {arch}.{key}")
        return value

    n_head = int(get("attention.head_count"))
    n_kv = get("attention.head_count_kv", n_head)
    if isinstance(n_kv, list):  # per-layer counts: only uniform ones map onto mlx-lm's llama
        if len(set(n_kv)) != 1:
            raise SpectuiError("per-layer KV head counts are not supported by the MLX GGUF import")
        n_kv = n_kv[0]
    hidden = int(get("embedding_length"))
    head_dim = int(metadata.get(f"{arch}.attention.key_length", hidden // n_head))
    rope_dims = int(metadata.get(f"{arch}.rope.dimension_count", head_dim))
    if rope_dims != head_dim:
        raise SpectuiError(f"partial rotary embeddings ({rope_dims} of {head_dim} dims) are not supported by the MLX GGUF import")
    if "rope_freqs.weight" in tensor_names:
        raise SpectuiError("GGUF rope frequency factors (Llama 3.1 style rope scaling) are not supported by the MLX import yet")
    n_vocab = len(metadata.get("tokenizer.ggml.tokens", [])) or int(get("vocab_size"))
    config: dict[str, Any] = {
        "model_type": module,
        "architectures": ["LlamaForCausalLM" if module == "llama" else "Qwen2ForCausalLM"],
        "hidden_size": hidden,
        "num_hidden_layers": int(get("block_count")),
        "intermediate_size": int(get("feed_forward_length")),
        "num_attention_heads": n_head,
        "num_key_value_heads": int(n_kv),
        "head_dim": head_dim,
        "rms_norm_eps": float(get("attention.layer_norm_rms_epsilon")),
        "vocab_size": n_vocab,
        "max_position_embeddings": int(get("context_length")),
        "rope_theta": float(metadata.get(f"{arch}.rope.freq_base", 1000000.0 if arch == "qwen2" else 10000.0)),
        "tie_word_embeddings": "output.weight" not in tensor_names,
    }
    scaling = metadata.get(f"{arch}.rope.scaling.type", "none")
    if scaling == "linear":
        config["rope_scaling"] = {"type": "linear", "factor": float(get("rope.scaling.factor"))}
    elif scaling not in ("none", None):
        raise SpectuiError(f"GGUF rope scaling {scaling!r} is not supported by the MLX GGUF import")
    if module == "llama":
        has_bias = {n.split(".", 2)[2] for n in tensor_names if n.startswith("blk.0.") and n.endswith(".bias")}
        attn = {f"{t}.bias" for t in ("attn_q", "attn_k", "attn_v", "attn_output")}
        if has_bias & attn:
            if not attn <= has_bias:
                raise SpectuiError("a llama GGUF with biases on only some attention projections is not supported by the MLX import")
            config["attention_bias"] = True
        if any(b.startswith("ffn_") for b in has_bias):
            config["mlp_bias"] = True
    return config


def _unpermute(x: Any, n_head: int) -> Any:
    """Undo llama.cpp's Q/K row permutation (interleaved RoPE pairs -> half-split layout).

    The converter wrote ``w.reshape(n_head, 2, d/2, ...).swapaxes(1, 2)``; the inverse
    reads the rows as ``(n_head, d/2, 2)`` and swaps back. Works on weights, scales, biases
    and bias vectors alike: only the first axis (output rows) moves.
    """
    rows = x.shape[0]
    return x.reshape(n_head, rows // n_head // 2, 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)


def gguf_weights(weights: Mapping[str, Any], config: Mapping[str, Any], arch: str) -> dict[str, Any]:
    """GGUF tensor names -> mlx-lm parameter names, Q/K rows unpermuted where needed."""
    _, permuted = ARCHITECTURES[arch]
    out: dict[str, Any] = {}
    for name, value in weights.items():
        parts = name.split(".")
        if parts[0] == "blk":
            layer, kind, suffix = parts[1], parts[2], ".".join(parts[3:])
            if kind not in _LAYER_NAMES:
                raise SpectuiError(f"GGUF tensor {name} has no counterpart in mlx-lm's {config['model_type']} model")
            if permuted and kind == "attn_q":
                value = _unpermute(value, config["num_attention_heads"])
            elif permuted and kind == "attn_k":
                value = _unpermute(value, config["num_key_value_heads"])
            out[f"model.layers.{layer}.{_LAYER_NAMES[kind]}.{suffix}"] = value
        elif parts[0] in _TOP_NAMES:
            out[f"{_TOP_NAMES[parts[0]]}.{'.'.join(parts[1:])}"] = value
        else:
            raise SpectuiError(f"GGUF tensor {name} has no counterpart in mlx-lm's {config['model_type']} model")
    return out


def quant_params(weights: Mapping[str, Any], path: str, in_dims: int) -> dict[str, Any] | None:
    """Group size and bits of a quantised tensor, read from the shapes of its triple."""
    scales = weights.get(f"{path}.scales")
    if scales is None:
        return None
    packed = weights[f"{path}.weight"]
    return {"group_size": in_dims // scales.shape[-1], "bits": packed.shape[-1] * 32 // in_dims, "mode": "affine"}


def build_model(config: Mapping[str, Any], weights: Mapping[str, Any], *, dtype: Any = None) -> Any:
    """An mlx-lm model class instantiated from ``config`` and loaded with ``weights``.

    Quantised tensors become ``QuantizedLinear`` / ``QuantizedEmbedding`` with the group
    size and bits their triples were packed with; ``dtype`` casts every floating parameter
    (norms, scales, biases), e.g. float32 on a CPU whose float16 kernels are slow.
    """
    import mlx.core as mx
    import mlx.nn as nn

    module = importlib.import_module(f"mlx_lm.models.{config['model_type']}")
    model = module.Model(module.ModelArgs.from_dict(dict(config)))

    def predicate(path: str, m: Any) -> bool | dict[str, Any]:
        if not hasattr(m, "to_quantized"):
            return False
        return quant_params(weights, path, m.weight.shape[-1]) or False

    nn.quantize(model, class_predicate=predicate)
    model.load_weights(list(weights.items()), strict=True)
    if dtype is not None:
        model.set_dtype(dtype)
    model.eval()
    mx.eval(model.parameters())
    return model


def _quantized(weights: Mapping[str, Any], config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``quant_params`` of every quantised tensor (each one with a ``.scales`` tensor)."""
    out = []
    for name in weights:
        if name.endswith(".scales"):
            path = name[: -len(".scales")]
            q = quant_params(weights, path, _in_dims(path, config))
            if q is not None:
                out.append(q)
    return out


def describe_quant(weights: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    """'4-bit g32' style summary of the quantised tensors (most common first)."""
    counts: dict[str, int] = {}
    for q in _quantized(weights, config):
        key = f"{q['bits']}-bit g{q['group_size']}"
        counts[key] = counts.get(key, 0) + 1
    if not counts:
        return "unquantized"
    return ", ".join(k for k, _ in sorted(counts.items(), key=lambda kv: -kv[1]))


def _read(path: str, info: GGUFInfo | None = None) -> tuple[GGUFInfo, dict[str, Any], dict[str, Any], TextTokenizer]:
    """Metadata, mlx-lm config, renamed weights and tokenizer of a GGUF file: the metadata as
    ``read_gguf`` read it (the one reading both backends use), the tensors from ``mx.load``."""
    import mlx.core as mx

    info = info or read_gguf(path)
    try:
        raw = mx.load(path)
    except (RuntimeError, ValueError) as exc:
        raise SpectuiError(f"MLX could not read {path}: {exc}") from None
    if not isinstance(raw, dict):  # a .gguf loads as a dict of tensors; mx.load's type allows more
        raise SpectuiError(f"MLX read {path} as something other than named tensors")
    config = gguf_config(info.metadata, set(raw))
    weights = gguf_weights(raw, config, info.architecture)
    return info, config, weights, TextTokenizer.from_gguf(info.metadata)


def load_gguf(path: str, *, dtype: Any = None, info: GGUFInfo | None = None) -> MLXLoaded:
    """Build an mlx-lm model and tokenizer from a GGUF file."""
    info, config, weights, tokenizer = _read(path, info)
    model = build_model(config, weights, dtype=dtype)
    return MLXLoaded(model, config, tokenizer, info.quant, describe_quant(weights, config), info)


def export_mlx_model(gguf_path: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> str:
    """Write ``gguf_path`` as an mlx-lm model directory ``out_dir``; return its path.

    The directory holds ``config.json`` (with a ``quantization`` entry, so ``mlx_lm.load``
    builds quantised layers), ``model.safetensors`` (the GGUF's tensors renamed, Q/K
    unpermuted, quantisation triples and dtypes as the file had them), ``tokenizer.json``
    and ``tokenizer_config.json`` (chat template included).
    """
    import mlx.core as mx

    gguf_path, out_dir = os.fspath(gguf_path), os.fspath(out_dir)
    info, config, weights, tokenizer = _read(gguf_path)
    os.makedirs(out_dir, exist_ok=True)
    quantized = _quantized(weights, config)
    if quantized:
        # the top-level entry only switches quantisation on: mlx-lm reads each layer's group
        # size and bits from its own tensors' shapes
        pairs = [(q["group_size"], q["bits"]) for q in quantized]
        group_size, bits = max(set(pairs), key=pairs.count)
        config["quantization"] = {"group_size": group_size, "bits": bits}
        config["quantization_config"] = {"group_size": group_size, "bits": bits}
    config["eos_token_id"] = sorted(tokenizer.eog_tokens)
    if tokenizer.bos_id is not None:
        config["bos_token_id"] = tokenizer.bos_id
    config["spectui"] = {"source_gguf": os.path.basename(gguf_path), "gguf_quant": info.quant, "gguf_name": info.name}
    mx.save_safetensors(os.path.join(out_dir, "model.safetensors"), weights, metadata={"format": "mlx"})
    with open(os.path.join(out_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    tokenizer.save(out_dir)
    return out_dir


def _in_dims(path: str, config: Mapping[str, Any]) -> int:
    """Input width of the layer at ``path`` (what a quantised row unpacks to)."""
    if path.endswith("mlp.down_proj"):
        return int(config["intermediate_size"])
    if path.endswith("self_attn.o_proj"):
        return int(config["num_attention_heads"]) * int(config["head_dim"])
    return int(config["hidden_size"])


__all__ = ["MLXLoaded", "build_model", "export_mlx_model", "gguf_config", "gguf_weights", "load_gguf"]
