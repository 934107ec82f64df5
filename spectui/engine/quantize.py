"""Requantize a GGUF with llama.cpp's own quantize API (``llama_model_quantize``).

Used by ``spectui tune --weights`` on a small probe model it owns (cached in the user cache
directory) and by ``tune --write-quant`` on the user's model only when asked for. On a CPU
the weight format decides whether verifying a block of tokens is cheap (DESIGN.md: ggml
batches Q4_0, Q8_0 and F16 rows, not Q4_1), so a requantized copy is what lets a user see it.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import llama_cpp as ll

from spectui.engine.llamacpp import default_threads
from spectui.errors import SpectuiError
from spectui.models.artifacts import cache_dir, file_sha256

#: the weight types tune probes, by the names GGUF files and llama.cpp's tools use
PROBE_TYPES = ("Q4_0", "Q4_1", "Q8_0", "Q4_K_M", "F16")


_PREFIXES = ("LLAMA_FTYPE_MOSTLY_", "LLAMA_FTYPE_ALL_")  # F32 is the one "ALL_" type


def ftype(type_name: str) -> int:
    """llama.cpp's file type for a name such as ``Q4_0`` or ``q8_0``; one line if unknown."""
    for prefix in _PREFIXES:
        value = getattr(ll, prefix + type_name.upper(), None)
        if value is not None:
            return int(value)
    known = sorted(n.split("_", 3)[3] for n in dir(ll) if n.startswith(_PREFIXES))
    raise SpectuiError(f"unknown weight type {type_name!r}; llama.cpp knows {', '.join(known)}")


def cached_copy(src: str | os.PathLike[str], type_name: str) -> Path:
    """``src`` requantized to ``type_name``, made once and kept in the user cache directory
    (keyed by the source's sha256: a changed source makes a new copy)."""
    dst = cache_dir() / "quant" / f"{file_sha256(os.fspath(src))[:16]}.{type_name.upper()}.gguf"
    if not dst.is_file():
        dst.parent.mkdir(parents=True, exist_ok=True)
        quantize(src, dst, type_name)
    return dst


def quantize(src: str | os.PathLike[str], dst: str | os.PathLike[str], type_name: str) -> Path:
    """Write ``src`` requantized to ``type_name`` at ``dst`` (atomically: a half-written
    file never takes the name). Requantizing an already quantized model is allowed: a probe
    of the kernels, not a model to ship."""
    dst = Path(dst)
    params = ll.llama_model_quantize_default_params()
    params.ftype = ftype(type_name)
    params.allow_requantize = True
    params.nthread = default_threads()
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    try:
        rc = ll.llama_model_quantize(os.fsencode(src), os.fsencode(tmp), ctypes.byref(params))
        if rc != 0 or not tmp.is_file():
            raise SpectuiError(f"llama.cpp could not quantize {src} to {type_name} (code {rc})")
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)
    return dst
