"""The MLX backend: mlx-lm's model classes and KV caches behind the same ``Backend`` protocol.

The decode loop only needs ``eval`` (logits of the rows asked for) and ``truncate`` (drop
cached tokens), so mlx-lm's generator is not used: an ``MLXBackend`` calls the mlx-lm model
on its own prompt cache (``mlx_lm.models.cache.make_prompt_cache``) and rolls back with
``trim_prompt_cache`` where every layer can be trimmed, from a checkpoint where one cannot
(``spectui.engine.backends.mlx_cache``). mlx-lm's ``KVCache.trim`` only moves the offset; the rows past it are
overwritten by the next update, so a rollback costs nothing.

Logits stay on the device: for ``all_logits=False`` only the last position goes through the
output head at all (the head is the biggest matrix of a small model), and only the rows asked
for are converted to float32 and copied to host memory.

Two kinds of model load:

* a GGUF file, through ``spectui.engine.backends.mlx_gguf`` (``mx.load`` keeps Q4_0 / Q4_1 / Q8_0
  quantised; tokenizer, chat template and stop tokens from the file's metadata), so one file
  feeds both backends;
* an mlx-lm model directory (``config.json`` + ``model*.safetensors`` + ``tokenizer.json``),
  or a Hugging Face hub id that is already in the local cache. Nothing is ever downloaded.

Compute dtype: on a CPU every floating parameter (norms, quantisation scales and biases, an
F16 file's weights) is cast to float32; on a GPU the stored dtypes are kept. MLX's CPU
kernels are ~30x slower on float16 activations than on float32 (measured here: a 1536x576
4-bit matvec takes 2 ms in float32, 64 ms in float16), and float16 parameters put float16
into the activations (the embedding lookup of a Q4_1 file comes out float16). The cast is
exact (every float16 is a float32), so the weights are the file's; the pass then runs in
float32 end to end, which is what matches a float64 reference within 2e-4 logits
(``tests/backends/test_mlx.py``).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from spectui.config import BackendConfig
from spectui.engine.backends.mlx_cache import PromptCache
from spectui.engine.backends.mlx_device import device_info, memory_info, set_wired_limit, wired_limit
from spectui.engine.backends.mlx_device import mlx_core as _mx
from spectui.engine.backends.mlx_paths import is_gguf, resolve_mlx_model
from spectui.engine.protocol import CacheRebuilt
from spectui.errors import SpectuiError
from spectui.models.artifacts import file_sha256, model_artifacts, package_version
from spectui.models.gguf import read_gguf
from spectui.models.tokenizer import TextTokenizer
from spectui.models.vocab import VocabFacts, draft_incompatibility
from spectui.recording.schema import ModelArtifacts

#: mlx-lm model types whose ``Model.__call__`` is exactly ``head(self.model(...))``: for them
#: the head can be applied to the last position only (other types may post-process logits)
_SPLIT_HEAD_TYPES = frozenset({"llama", "qwen2", "mistral"})


def compute_dtype(dtype: str | None = "auto") -> Any:
    """The dtype floating parameters are cast to: ``"auto"`` is float32 on a CPU, else as stored."""
    mx = _mx()
    if dtype in (None, "", "stored"):
        return None
    if dtype == "auto":
        return mx.float32 if mx.default_device().type == mx.DeviceType.cpu else None
    try:
        return getattr(mx, dtype)
    except AttributeError:
        raise SpectuiError(f"unknown MLX dtype {dtype!r} (use auto, stored, float32, float16 or bfloat16)") from None


# -- locating a model ---------------------------------------------------------------------


# -- a loaded model, shareable by several backends -----------------------------------------


@dataclass
class MLXModel:
    """Loaded weights and tokenizer; a target and a self-drafter can share one."""

    path: str
    model: Any
    config: dict[str, Any]
    tokenizer: TextTokenizer
    quant: str
    dtype: Any
    #: how MLX holds the weights ("4-bit g32, 8-bit g32"), next to the file's own quant name
    mlx_quant: str = ""
    gguf: Any = None  # GGUFInfo when loaded from a GGUF
    refs: int = 0
    _artifacts: ModelArtifacts | None = field(default=None, repr=False)

    @classmethod
    def load(cls, path: str, *, dtype: str | None = "auto") -> MLXModel:
        path = os.path.abspath(os.fspath(path))
        cast = compute_dtype(dtype)
        if os.path.isdir(path):
            return cls._load_dir(path, cast)
        if not os.path.exists(path):
            raise SpectuiError(f"model not found: {path}")
        if not is_gguf(path):
            raise SpectuiError(f"not a GGUF file or an mlx-lm model directory: {path}")
        from spectui.engine.backends.mlx_gguf import load_gguf

        info = read_gguf(path)
        loaded = load_gguf(path, dtype=cast, info=info)
        return cls(path, loaded.model, loaded.config, loaded.tokenizer, loaded.quant, cast, loaded.mlx_quant, gguf=info)

    @classmethod
    def _load_dir(cls, path: str, cast: Any) -> MLXModel:
        from pathlib import Path

        if not os.path.isfile(os.path.join(path, "config.json")):
            raise SpectuiError(f"not an mlx-lm model directory (no config.json): {path}")
        from mlx_lm.utils import load_model

        try:
            model, config = load_model(Path(path))
        except (FileNotFoundError, ValueError, KeyError) as exc:
            raise SpectuiError(f"mlx-lm could not load {path}: {exc}") from None
        if cast is not None:
            model.set_dtype(cast)
            _mx().eval(model.parameters())
        tokenizer = TextTokenizer.from_dir(path, config)
        q = config.get("quantization")
        quant = f"mlx {q['bits']}-bit g{q['group_size']}" if isinstance(q, dict) and "bits" in q else "unquantized"
        source = config.get("spectui", {}).get("gguf_quant")
        if source:
            quant += f" (from GGUF {source})"
        return cls(path, model, config, tokenizer, quant, cast, _held_quant(model))

    @property
    def n_vocab(self) -> int:
        return int(self.config.get("vocab_size") or self.tokenizer.n_vocab)

    @property
    def name(self) -> str:
        if self.gguf is not None:
            return str(self.gguf.name)
        return str(self.config.get("spectui", {}).get("gguf_name") or os.path.basename(self.path.rstrip("/")))

    def artifacts(self) -> ModelArtifacts:
        if self._artifacts is None:
            self._artifacts = model_artifacts(self.gguf) if self.gguf is not None else self._dir_artifacts()
        return self._artifacts

    def _dir_artifacts(self) -> ModelArtifacts:
        files = sorted(f for f in os.listdir(self.path) if f.endswith(".safetensors"))
        digest = hashlib.sha256()
        for f in files:  # one digest over the weight files' digests, in name order
            digest.update(f"{f}:{file_sha256(os.path.join(self.path, f))}\n".encode())
        template = self.tokenizer.chat_template
        return ModelArtifacts(
            path=self.path,
            name=self.name,
            sha256=digest.hexdigest(),
            size_bytes=sum(os.path.getsize(os.path.join(self.path, f)) for f in files),
            architecture=str(self.config.get("model_type", "")),
            quant=self.quant,
            n_params=logical_parameter_count(self.model),
            n_ctx_train=int(self.config.get("max_position_embeddings") or 0),
            vocab_size=self.tokenizer.n_vocab,
            vocab_sha256=self.tokenizer.vocab_sha256(),
            chat_template_sha256=hashlib.sha256(template.encode()).hexdigest() if template else "",
        )

    def release(self) -> None:
        self.refs -= 1
        if self.refs <= 0:
            self.model = None


def _held_quant(model: Any) -> str:
    """'4-bit g32, 8-bit g32' from the quantised layers of a built model (most common first)."""
    counts: dict[str, int] = {}
    for _, module in model.named_modules():
        if getattr(module, "bits", None):
            key = f"{module.bits}-bit g{module.group_size}"
            counts[key] = counts.get(key, 0) + 1
    return ", ".join(sorted(counts, key=lambda k: -counts[k])) or "unquantized"


def logical_parameter_count(model: Any) -> int:
    """Parameters as the unquantised model counts them (packed 4-bit words count 8 each)."""
    from mlx.utils import tree_flatten

    total = 0
    for _, module in model.named_modules():
        bits = getattr(module, "bits", None)
        # a list of (name, array) without ``destination`` (mlx annotates the dict case too)
        for name, value in cast(list[tuple[str, Any]], tree_flatten(module.parameters())):
            if "." in name:
                continue  # a child module's own parameter: counted when that module is visited
            if bits and name == "weight":
                total += value.size * 32 // bits
            elif bits and name in ("scales", "biases"):
                continue
            else:
                total += value.size
    return total


# -- the backend ------------------------------------------------------------------------


class MLXBackend:
    """One mlx-lm prompt cache (one sequence) over an ``MLXModel``."""

    name = "mlx"

    def __init__(self, model: MLXModel, config: BackendConfig) -> None:
        if model.model is None:
            raise SpectuiError("this MLX model was closed")
        self.model = model
        model.refs += 1
        self._net = model.model
        self._cache = PromptCache(self._net)
        #: how a rollback is done: "trim" (every layer a KV cache), or "checkpoint" (a
        #: sliding-window or recurrent layer: ``spectui.engine.backends.mlx_cache``)
        self.rollback = self._cache.rollback
        self._split = _split_head(self._net, model.config)
        self.n_ctx = config.n_ctx
        self.n_batch = config.n_batch
        self.n_vocab = model.n_vocab
        tok = model.tokenizer
        self.eog_tokens = tok.eog_tokens
        self.chat_template = tok.chat_template
        self.bos_token = tok.special_text(tok.bos_id)
        self.eos_token = tok.special_text(tok.eos_id)
        self.n_past = 0
        self.cached: list[int] = []
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls,
        path: str,
        config: BackendConfig,
        *,
        share_with: MLXBackend | None = None,
        dtype: str | None = "auto",
    ) -> MLXBackend:
        """Load ``path`` (GGUF or mlx-lm directory); reuse ``share_with``'s weights for the same model."""
        if share_with is not None and share_with.model.model is not None and _same_path(share_with.model.path, path):
            return cls(share_with.model, config)
        return cls(MLXModel.load(path, dtype=dtype), config)

    def second_context(self, settings: BackendConfig) -> MLXBackend:
        """Another cache over these weights with ``settings`` (the caller closes it)."""
        return MLXBackend.open(self.model.path, settings, share_with=self)

    def batch_invariant_settings(self) -> BackendConfig | None:
        """None: no batch-invariant setting is known for MLX (its kernels are chosen by shape)."""
        return None

    # -- protocol -----------------------------------------------------------------------

    def tokenize(self, text: str, *, special: bool = True, add_bos: bool = False) -> list[int]:
        return self.model.tokenizer.tokenize(text, special=special, add_bos=add_bos)

    def piece(self, token: int) -> bytes:
        return self.model.tokenizer.piece(token)

    def eval(self, tokens: Sequence[int], *, all_logits: bool) -> np.ndarray:
        mx = _mx()
        n = len(tokens)
        if n == 0:
            raise ValueError("eval of an empty token list")
        if self.n_past + n > self.n_ctx:
            raise SpectuiError(f"context full: {self.n_past} + {n} tokens exceed the context of {self.n_ctx}")
        if all_logits and n > self.n_batch:
            raise ValueError(f"all_logits for {n} tokens exceeds the batch size {self.n_batch}")
        if self._net is None:
            raise SpectuiError("this MLX backend was closed")
        if all_logits and self.rollback == "checkpoint":
            self.checkpoint()  # a verification block: the next truncate lands inside it
        ids = list(tokens)
        with self._lock:
            start = 0
            while n - start > self.n_batch:
                # a long prompt in n_batch chunks: only the cache is needed from them, and
                # evaluating it per chunk keeps the lazy graph (and peak memory) bounded
                chunk = mx.array(ids[start:start + self.n_batch], dtype=mx.uint32)[None]
                if self._split is not None:
                    self._split[0](chunk, cache=self._cache.layers)
                else:
                    self._net(chunk, cache=self._cache.layers)
                mx.eval([c.state for c in self._cache.layers])
                start += self.n_batch
                self.n_past += self.n_batch
                self.cached.extend(ids[start - self.n_batch:start])
            x = mx.array(ids[start:], dtype=mx.uint32)[None]
            if self._split is not None:
                body, head = self._split
                hidden = body(x, cache=self._cache.layers)
                rows = head(hidden[0] if all_logits else hidden[0, -1:])
            else:
                out = self._net(x, cache=self._cache.layers)
                rows = out[0] if all_logits else out[0, -1:]
            rows = rows.astype(mx.float32)
            mx.eval(rows)
            self.n_past += n - start
            self.cached.extend(ids[start:])
        return np.asarray(rows)

    def checkpoint(self) -> None:
        with self._lock:
            self._cache.checkpoint(self.n_past)

    def truncate(self, n: int) -> None:
        n = max(n, 0)
        if n >= self.n_past:
            return
        with self._lock:
            at = 0 if n == 0 else self._cache.roll_back(self.n_past, n)
            rebuilt = at is None
            if at is None or at == 0:
                self._cache.reset()  # a new cache: nothing of the old one can leak into it
                at = 0
            kept = self.cached[:n]
            dropped = self.n_past - n
            self.n_past = at
            del self.cached[at:]
        if n > at:
            self.eval(kept[at:], all_logits=False)
        if rebuilt:
            raise CacheRebuilt(f"the MLX cache could not drop {dropped} tokens in place; the {n} kept tokens were evaluated again")

    def artifacts(self) -> ModelArtifacts:
        return self.model.artifacts()

    def runtime_info(self) -> dict[str, str]:
        mx = _mx()
        device = mx.default_device()
        info = {
            "backend": "mlx",
            "mlx": package_version("mlx") or getattr(mx, "__version__", ""),
            "mlx-lm": package_version("mlx-lm"),
            "device": str(device),
            "gpu_offload_supported": str(device.type == mx.DeviceType.gpu).lower(),
            "dtype": str(self.model.dtype or "stored").replace("mlx.core.", ""),
            "mlx_quant": self.model.mlx_quant,
            "n_ctx": str(self.n_ctx),
            "n_batch": str(self.n_batch),
            "rollback": self.rollback + (f" ({self._cache.untrimmable})" if self._cache.untrimmable else ""),
            "wired_limit_bytes": str(wired_limit()),
        }
        info.update({k: str(v) for k, v in device_info().items()})
        info.update({k: str(v) for k, v in memory_info().items()})
        return info

    def close(self) -> None:
        if self._net is not None:
            self._net = None
            self._cache.close()
            self._split = None
            self.model.release()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:  # noqa: BLE001 - a finalizer may not raise, and at exit anything may be gone
            pass


def _split_head(net: Any, config: dict[str, Any]) -> tuple[Any, Any] | None:
    """(body, head) when the model is ``head(body(x))``, so the head can skip unneeded rows."""
    if config.get("model_type") not in _SPLIT_HEAD_TYPES or not hasattr(net, "model"):
        return None
    if hasattr(net, "lm_head"):
        return net.model, net.lm_head
    if getattr(getattr(net, "args", None), "tie_word_embeddings", False):
        return net.model, net.model.embed_tokens.as_linear
    return None


def _same_path(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


# -- the engine's entry point ---------------------------------------------------------------


def open_mlx_models(target: str, draft: str | None, config: BackendConfig) -> tuple[MLXBackend, MLXBackend | None]:
    """Target (and draft model) backends for ``Engine.load``; refuses mismatched vocabularies."""
    set_wired_limit()
    target_path = resolve_mlx_model(target)
    draft_path = resolve_mlx_model(draft) if draft is not None else None
    backend = MLXBackend.open(target_path, config)
    if draft_path is None:
        return backend, None
    try:
        drafter = MLXBackend.open(draft_path, config, share_with=backend)
        difference = draft_incompatibility(
            VocabFacts.from_tokenizer(backend.model.tokenizer), VocabFacts.from_tokenizer(drafter.model.tokenizer)
        )
        if difference:
            drafter.close()
            raise SpectuiError(f"draft and target vocabularies differ: {difference}")
    except BaseException:
        backend.close()
        raise
    return backend, drafter
