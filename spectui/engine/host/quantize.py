"""Requantize a GGUF with llama.cpp's own quantize API (``llama_model_quantize``).

Used by the weight probe (``engine.weights``: ``spectui tune --weights`` and the embedded
default's first run) on copies it owns in the user cache directory, and by ``tune --write-quant``
on the user's model only when asked for. On a CPU the weight format decides whether verifying a
block of tokens is cheap (ARCHITECTURE.md, "Weight types"), so a requantized copy is what lets a
user see it, and what the embedded default runs in.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
from pathlib import Path

import llama_cpp as ll

from spectui import file_kinds, storage
from spectui.engine.backends.llamacpp import _init_llama, default_threads, last_error
from spectui.errors import SpectuiError
from spectui.models.artifacts import file_sha256
from spectui.paths import cache_dir

#: the weight types tune probes, by the names GGUF files and llama.cpp's tools use
PROBE_TYPES = ("Q4_0", "Q4_1", "Q8_0", "Q4_K_M", "F16")


_PREFIXES = ("LLAMA_FTYPE_MOSTLY_", "LLAMA_FTYPE_ALL_")  # F32 is the one "ALL_" type


def known_types() -> list[str]:
    """The weight type names llama.cpp's quantize API takes (``Q4_0``, ``Q8_0``, ``F16``...)."""
    return sorted(n.split("_", 3)[3] for n in dir(ll) if n.startswith(_PREFIXES))


def ftype(type_name: str) -> int:
    """llama.cpp's file type for a name such as ``Q4_0`` or ``q8_0``; one line if unknown."""
    for prefix in _PREFIXES:
        value = getattr(ll, prefix + type_name.upper(), None)
        if value is not None:
            return int(value)
    raise SpectuiError(f"unknown weight type {type_name!r}; llama.cpp knows {', '.join(known_types())}")


GGUF_KIND = file_kinds.magic_kind("a GGUF model", b"GGUF")


def cached_copy(src: str | os.PathLike[str], type_name: str) -> Path:
    """``src`` requantized to ``type_name``, made once and kept in the user cache directory
    (keyed by the source's sha256: a changed source makes a new copy)."""
    dst = copy_path(src, type_name)
    if not (dst.is_file() and storage.claim(dst, GGUF_KIND)):  # a torn one is moved aside
        quantize(src, dst, type_name, replace=True)
    return dst


def copy_path(src: str | os.PathLike[str], type_name: str) -> Path:
    """Where ``cached_copy`` keeps ``src`` in ``type_name`` (whether or not it is there yet)."""
    return cache_dir() / "quant" / file_sha256(os.fspath(src))[:16] / copy_name(src, type_name)


def copy_name(src: str | os.PathLike[str], type_name: str) -> str:
    """The copy's file name: the source's, its weight type swapped for ``type_name``
    (``SmolLM2-135M-Instruct.Q4_1.gguf`` -> ``SmolLM2-135M-Instruct.Q4_0.gguf``), so every screen
    names the copy as it names the source; a name without a known type gets ``.TYPE`` added."""
    stem = Path(src).name.removesuffix(".gguf")
    known = "|".join(sorted(known_types(), key=len, reverse=True))  # the longest first: Q4_K_M before Q4_K
    swapped, n = re.subn(rf"(?i)([._-])({known})$", rf"\g<1>{type_name.upper()}", stem)
    return (swapped if n else f"{stem}.{type_name.upper()}") + ".gguf"


def quantize(src: str | os.PathLike[str], dst: str | os.PathLike[str], type_name: str, *, replace: bool = False) -> Path:
    """Write ``src`` requantized to ``type_name`` at ``dst``, atomically: llama.cpp writes a
    temporary file beside it, which takes the name only when complete, so a kill or a full
    disk leaves no half model under the name. ``replace``: ``dst`` is spectui's own cache file;
    otherwise (a user's path, ``tune --write-quant``) a file that exists is never replaced,
    even one that appears while the model is written. Requantizing an already quantized
    model is allowed: a probe of the kernels, not a model to ship."""
    dst = Path(dst)
    _init_llama()  # llama.cpp's log goes to a buffer, not the terminal: a failure is one line
    params = ll.llama_model_quantize_default_params()
    params.ftype = ftype(type_name)
    params.allow_requantize = True
    params.nthread = default_threads()
    try:
        storage.prepare_dir(dst.parent, own=replace)
        storage.remove_stale_temps(dst)
        fd, tmp_name = storage.temp_file(dst)
        os.close(fd)
    except OSError as exc:
        raise storage.disk_error(dst, exc) from None
    tmp = Path(tmp_name)
    try:
        rc = ll.llama_model_quantize(os.fsencode(src), os.fsencode(tmp), ctypes.byref(params))
        if rc != 0 or not tmp.is_file() or not tmp.stat().st_size:
            free = _free_space(dst.parent)
            raise SpectuiError(f"llama.cpp could not quantize {src} to {type_name} (code {rc}{free}): {last_error()}")
        os.chmod(tmp, 0o666 & ~storage.current_umask())  # a model, no user text: the usual modes
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        storage.fault_point(f"write:{dst.name}")
        if replace:
            os.replace(tmp, dst)
        else:
            storage.publish_new(tmp, dst)
    except OSError as exc:
        raise storage.disk_error(dst, exc) from None
    finally:
        tmp.unlink(missing_ok=True)
    return dst


def _free_space(folder: Path) -> str:
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return ""
    return f"; {free / 2**20:.0f} MiB free in {folder}"
