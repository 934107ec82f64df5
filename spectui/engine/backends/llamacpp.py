"""The llama.cpp backend, on llama-cpp-python's low-level C API.

Why the low-level API: the speculative loop needs logits for chosen rows of a batch, KV-cache
truncation to any position, and no Python-side copies of the vocabulary-sized logits. The
high-level ``Llama`` class copies every row into a NumPy score matrix and owns its own
sampling; here a batch is reused, only the flagged rows produce logits, and callers get a
zero-copy NumPy view of llama.cpp's own output buffer.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections import deque
from collections.abc import Sequence

import llama_cpp as ll
import msgspec
import numpy as np

from spectui.config import BackendConfig
from spectui.engine.protocol import CacheRebuilt
from spectui.errors import SpectuiError
from spectui.models.artifacts import model_artifacts, package_version
from spectui.models.gguf import GGUFInfo, read_gguf
from spectui.recording.schema import ModelArtifacts

_init_lock = threading.Lock()
_initialised = False
#: llama.cpp's recent log lines, so a failed load can say why without flooding stderr
_log_lines: deque[str] = deque(maxlen=32)


def _keep_log_line(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
    if text:
        _log_lines.append(text.decode("utf-8", "replace").rstrip())


#: the C callback (kept referenced here for as long as llama.cpp may call it)
_log_callback = ll.llama_log_callback(_keep_log_line)


def _init_llama() -> None:
    global _initialised
    with _init_lock:
        if not _initialised:
            ll.llama_log_set(_log_callback, ctypes.c_void_p(0))
            ll.llama_backend_init()
            _initialised = True


def last_error() -> str:
    for line in reversed(_log_lines):
        if "error" in line.lower() or "failed" in line.lower():
            return line.strip()
    return _log_lines[-1].strip() if _log_lines else "no details"


#: llama_flash_attn_type: AUTO -1, DISABLED 0, ENABLED 1
_FLASH_ATTN = {"auto": -1, "off": 0, "on": 1}


def default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def deterministic_guarantee(config: BackendConfig) -> str:
    """What ``--deterministic`` guarantees on this build and device, in one line; a
    ``SpectuiError`` where it cannot hold. On the CPU one thread and flash attention make a
    block's logits equal one-token-at-a-time logits bit for bit for most weight types, not all:
    K-quants measured otherwise (``spectui.engine.host.noise`` measures it for each model before
    its first run, and ``noise.require_invariant`` refuses the run there). A GPU backend (Metal,
    CUDA) picks its matrix kernels by the number of tokens in the batch, so a block and single
    tokens take different reductions there."""
    _init_llama()
    if config.n_gpu_layers != 0 and ll.llama_supports_gpu_offload():
        raise SpectuiError(
            "--deterministic cannot hold with GPU offload (Metal/CUDA choose kernels by block size); "
            "add --gpu-layers 0 to run on the CPU, or drop --deterministic"
        )
    return (
        "llama.cpp CPU, 1 thread, flash attention on: a block's logits equal one-token-at-a-time logits bit for bit"
        " (measured before the first run of each model; refused for weights whose kernels are not batch-invariant)"
    )


def context_params(config: BackendConfig, model: LlamaModel, n_threads: int, *, n_ctx: int, n_seq_max: int) -> ll.llama_context_params:
    """The settings of every context spectui opens over ``model`` (a run's, or the slots that
    measure what a neighbour moves: the same kernels either way): ``n_ctx`` cells for
    ``n_seq_max`` sequences, ``config``'s batch and flash attention, ``n_threads``."""
    params: ll.llama_context_params = ll.llama_context_default_params()
    params.n_ctx = n_ctx
    params.n_batch = params.n_ubatch = config.n_batch
    params.n_seq_max = n_seq_max
    # a sliding-window cache of window + batch cells reuses the cells that slid out of the
    # window; a rollback would then find the tokens it needs overwritten. The full cache keeps
    # them (llama-server's --swa-full).
    params.swa_full = bool(model.n_swa)
    params.n_threads = params.n_threads_batch = n_threads
    params.no_perf = True
    params.flash_attn_type = _FLASH_ATTN[config.flash_attn]
    return params


def free_context(ctx: ll.llama_context_p, batch: ll.llama_batch, model: LlamaModel) -> None:
    """Free a context and its batch, and give back its reference to the weights."""
    ll.llama_batch_free(batch)
    ll.llama_free(ctx)
    model.release()


class LlamaModel:
    """Loaded weights, shareable by several contexts (a model drafting for itself)."""

    def __init__(self, info: GGUFInfo, config: BackendConfig) -> None:
        _init_llama()
        self.info = info
        self.n_gpu_layers = config.n_gpu_layers
        params = ll.llama_model_default_params()
        params.n_gpu_layers = config.n_gpu_layers if config.n_gpu_layers >= 0 else 2**30
        self.ptr = ll.llama_model_load_from_file(info.path.encode(), params)
        if not self.ptr:
            raise SpectuiError(f"llama.cpp could not load {info.path}: {last_error()}")
        self.vocab = ll.llama_model_get_vocab(self.ptr)
        self.n_vocab = ll.llama_vocab_n_tokens(self.vocab)
        self.eog_tokens = frozenset(t for t in range(self.n_vocab) if ll.llama_vocab_is_eog(self.vocab, t))
        #: recurrent or hybrid layers (Mamba, RWKV, LFM2, Granite-H, Qwen3-Next...): their state
        #: holds every token it has seen and cannot be partly erased, so a rollback needs a
        #: checkpoint (``LlamaCppBackend.checkpoint``)
        self.recurrent = bool(ll.llama_model_is_recurrent(self.ptr) or ll.llama_model_is_hybrid(self.ptr))
        #: sliding-window attention layers (Gemma 3, gpt-oss): their window's width, 0 for none
        self.n_swa = int(ll.llama_model_n_swa(self.ptr))
        self._pieces: dict[int, bytes] = {}
        self._piece_buf = ctypes.create_string_buffer(256)
        self._artifacts: ModelArtifacts | None = None
        self.refs = 0

    def piece(self, token: int) -> bytes:
        cached = self._pieces.get(token)
        if cached is None:
            n = ll.llama_token_to_piece(self.vocab, token, self._piece_buf, len(self._piece_buf), 0, True)
            cached = self._piece_buf.raw[: max(n, 0)]
            self._pieces[token] = cached
        return cached

    def special_text(self, token: int) -> str:
        return self.piece(token).decode("utf-8", "replace") if 0 <= token < self.n_vocab else ""

    def artifacts(self) -> ModelArtifacts:
        if self._artifacts is None:
            self._artifacts = model_artifacts(self.info)
        return self._artifacts

    def release(self) -> None:
        self.refs -= 1
        if self.refs <= 0 and self.ptr:
            ll.llama_model_free(self.ptr)
            self.ptr = None


class LlamaCppBackend:
    """One llama.cpp context (one KV cache, one sequence) over a ``LlamaModel``."""

    name = "llamacpp"

    def __init__(self, model: LlamaModel, config: BackendConfig) -> None:
        self.model = model
        model.refs += 1
        self.config = config
        self.n_threads = config.n_threads or default_threads()
        self.flash_attn = config.flash_attn
        #: how a rollback is done: "kv" drops cache cells; "checkpoint" (recurrent or hybrid
        #: layers) restores the state copied to a spare sequence before the block and
        #: re-evaluates the kept tokens after it
        self.rollback = "checkpoint" if model.recurrent else "kv"
        # a recurrent model's sequence 1 holds the checkpoint, in one KV stream with sequence 0
        # so that the context is not halved
        params = context_params(config, model, self.n_threads, n_ctx=config.n_ctx, n_seq_max=2 if model.recurrent else 1)
        params.kv_unified = model.recurrent
        self.ctx = ll.llama_init_from_model(model.ptr, params)
        if not self.ctx:
            model.release()
            raise SpectuiError(f"llama.cpp could not create a context of {config.n_ctx} tokens: {last_error()}")
        self.memory = ll.llama_get_memory(self.ctx)
        # llama.cpp pads the context and clamps the batch to the requested context: use its numbers
        self.n_ctx = min(config.n_ctx, ll.llama_n_ctx(self.ctx))
        self.n_batch = ll.llama_n_batch(self.ctx)
        self.n_vocab = model.n_vocab
        self.eog_tokens = model.eog_tokens
        self.chat_template = model.info.chat_template
        meta = model.info.metadata
        self.bos_token = model.special_text(meta.get("tokenizer.ggml.bos_token_id", -1))
        self.eos_token = model.special_text(meta.get("tokenizer.ggml.eos_token_id", -1))
        self.n_past = 0
        self.cached: list[int] = []
        #: the position whose state sequence 1 holds (-1: none)
        self._checkpoint = -1
        # One batch, allocated once; sequence ids never change, so they are set here once.
        self._batch = ll.llama_batch_init(self.n_batch, 0, 1)
        b = self._batch
        for i in range(self.n_batch):
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
        self._token = b.token
        self._pos = b.pos
        self._flags = b.logits

    @classmethod
    def open(cls, path: str, config: BackendConfig, *, share_with: LlamaCppBackend | None = None) -> LlamaCppBackend:
        """Load ``path``; reuse ``share_with``'s weights when it is the same file."""
        if share_with is not None and os.path.samefile(share_with.model.info.path, path):
            return cls(share_with.model, config)
        return cls(LlamaModel(read_gguf(path), config), config)

    def second_context(self, settings: BackendConfig) -> LlamaCppBackend:
        """Another context over these weights with ``settings`` (the caller closes it)."""
        return LlamaCppBackend.open(self.model.info.path, settings, share_with=self)

    def batch_invariant_settings(self) -> BackendConfig:
        """This backend's settings under which a block's logits equal one-token-at-a-time
        logits (``--deterministic``: one thread, flash attention on)."""
        return msgspec.structs.replace(self.config, n_threads=1, flash_attn="on", deterministic=True)

    # -- protocol -----------------------------------------------------------------------

    def tokenize(self, text: str, *, special: bool = True, add_bos: bool = False) -> list[int]:
        raw = text.encode("utf-8")
        cap = len(raw) + 16
        buf = (ll.llama_token * cap)()
        n = ll.llama_tokenize(self.model.vocab, raw, len(raw), buf, cap, add_bos, special)
        if n < 0:
            cap = -n
            buf = (ll.llama_token * cap)()
            n = ll.llama_tokenize(self.model.vocab, raw, len(raw), buf, cap, add_bos, special)
        return list(buf[:n])

    def piece(self, token: int) -> bytes:
        return self.model.piece(token)

    def eval(self, tokens: Sequence[int], *, all_logits: bool) -> np.ndarray:
        n = len(tokens)
        if n == 0:
            raise ValueError("eval of an empty token list")
        if self.n_past + n > self.n_ctx:
            raise SpectuiError(f"context full: {self.n_past} + {n} tokens exceed the context of {self.n_ctx}")
        if all_logits and n > self.n_batch:
            raise ValueError(f"all_logits for {n} tokens exceeds the batch size {self.n_batch}")
        if all_logits and self.rollback == "checkpoint":
            self.checkpoint()  # a verification block: the next truncate lands inside it
        token, pos, flags, batch = self._token, self._pos, self._flags, self._batch
        start = 0
        while start < n:
            chunk = min(self.n_batch, n - start)
            last_chunk = start + chunk == n
            base = self.n_past
            for i in range(chunk):
                token[i] = tokens[start + i]
                pos[i] = base + i
                flags[i] = all_logits
            if last_chunk:
                flags[chunk - 1] = True
            batch.n_tokens = chunk
            rc = ll.llama_decode(self.ctx, batch)
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc} at position {base}: {last_error()}")
            self.n_past += chunk
            self.cached.extend(tokens[start:start + chunk])
            start += chunk
        rows = chunk if all_logits else 1
        ptr = ll.llama_get_logits(self.ctx)
        return np.ctypeslib.as_array(ptr, shape=(rows, self.n_vocab))

    def checkpoint(self) -> None:
        """Remember the state at the current position, so that a truncate to any later
        position is exact. Only a recurrent cache needs it (a KV cache drops cells): the
        state is shared into sequence 1, and llama.cpp copies it on the next write."""
        if self.rollback != "checkpoint" or self._checkpoint == self.n_past:
            return
        ll.llama_memory_seq_rm(self.memory, 1, -1, -1)
        ll.llama_memory_seq_cp(self.memory, 0, 1, -1, -1)
        self._checkpoint = self.n_past

    def truncate(self, n: int) -> None:
        n = max(n, 0)
        if n >= self.n_past:
            return
        dropped = self.n_past - n
        kept = self.cached[:n]
        if self.rollback == "kv" or n == 0:
            # removing a whole sequence never fails; a partial removal may, and then the cache
            # still holds the dropped tokens: never go on from there
            if ll.llama_memory_seq_rm(self.memory, 0, n, -1):
                self._moved_to(n)
                return
        elif 0 <= self._checkpoint <= n:
            ll.llama_memory_seq_rm(self.memory, 0, -1, -1)
            ll.llama_memory_seq_cp(self.memory, 1, 0, -1, -1)
            self._moved_to(self._checkpoint)
            if n > self.n_past:
                self.eval(kept[self.n_past:], all_logits=False)
            return
        # no way back in place: empty the cache and evaluate the kept tokens again, removing
        # each sequence whole (with seq_id -1 a recurrent cache keeps stale tails and then
        # fails to decode); _moved_to drops the checkpoint's sequence
        self._moved_to(0)
        ll.llama_memory_seq_rm(self.memory, 0, -1, -1)
        if kept:
            self.eval(kept, all_logits=False)
        raise CacheRebuilt(f"llama.cpp could not roll back {dropped} tokens in place; the {n} kept tokens were evaluated again")

    def _moved_to(self, n: int) -> None:
        self.n_past = n
        del self.cached[n:]
        if self._checkpoint > n:
            # a checkpoint past the cache's end is of no use; its cells would crowd the context
            ll.llama_memory_seq_rm(self.memory, 1, -1, -1)
            self._checkpoint = -1

    def artifacts(self) -> ModelArtifacts:
        return self.model.artifacts()

    def runtime_info(self) -> dict[str, str]:
        version = ll.llama_version() if hasattr(ll, "llama_version") else b""
        return {
            "backend": "llamacpp",
            "llama-cpp-python": package_version("llama-cpp-python"),
            "llama.cpp": version.decode() if isinstance(version, bytes) else str(version),
            "gpu_offload_supported": str(bool(ll.llama_supports_gpu_offload())).lower(),
            "n_gpu_layers": str(self.model.n_gpu_layers),
            "n_threads": str(self.n_threads),
            "flash_attn": self.flash_attn,
            "n_ctx": str(self.n_ctx),
            "n_batch": str(self.n_batch),
            "rollback": self.rollback,
            **({"deterministic": self._deterministic()} if self.config.deterministic else {}),
            "swa_full": str(bool(self.model.n_swa)).lower(),
            "system_info": ll.llama_print_system_info().decode(errors="replace").strip(),
        }

    def _deterministic(self) -> str:
        try:
            return deterministic_guarantee(self.config)
        except SpectuiError as exc:
            return f"not guaranteed: {exc}"

    def close(self) -> None:
        if self.ctx:
            free_context(self.ctx, self._batch, self.model)
            self.ctx = None

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:  # noqa: BLE001 - a finalizer may not raise, and at exit anything may be gone
            pass
