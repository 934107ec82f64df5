"""Weight formats for the peer benchmark: the target GGUF it measures, and copies of it
requantized with llama.cpp's own quantize API, so each format's rows sit side by side.

On a CPU the weight format decides what verifying a block of tokens costs (docs/guide/tune.md:
ggml batches Q4_0, Q8_0 and F16 token rows, not Q4_1), so the shipped Q4_1
alone understates what speculation can do on the same model. Requantized copies live in the
user cache folder (never in the repository), named by the source's sha256 and the type, and
are reused once written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from spectui.engine.host.quantize import cached_copy, ftype
from spectui.models.gguf import read_gguf
from spectui.models.registry import embedded_model_path

#: GGUF types spectui's MLX backend takes: ``mx.load`` keeps the three block types quantized
#: and reads the float types as they are; K-quants and IQ types are not supported there
MLX_TYPES = ("Q4_0", "Q4_1", "Q8_0", "F16", "BF16", "F32")


@dataclass(frozen=True)
class Weights:
    """One weight format of the target: a GGUF file and where it came from."""

    path: str
    #: the file's type as llama.cpp names it (``general.file_type``): ``Q4_1``
    quant: str
    architecture: str
    #: "embedded", "given" or "requantized from <file>"
    origin: str

    @property
    def file_name(self) -> str:
        return os.path.basename(self.path)


def open_weights(path: str | None, origin: str = "given") -> Weights:
    """The GGUF at ``path`` (the embedded model when None); ``SpectuiError``, one line, when
    the file is missing or not GGUF."""
    if path is None:
        path, origin = embedded_model_path(), "embedded"
    info = read_gguf(path)
    return Weights(os.path.abspath(path), info.quant, info.architecture, origin)


def parse_types(spec: str) -> list[str]:
    """``"Q4_0,q8_0"`` -> ``["Q4_0", "Q8_0"]``, each checked against llama.cpp's names."""
    types = list(dict.fromkeys(t.strip().upper() for t in spec.split(",") if t.strip()))
    for t in types:
        ftype(t)
    return types


def requantized(src: Weights, type_name: str, *, log=print) -> Weights:
    """``src`` as ``type_name``, from the cache when an earlier run wrote it."""
    log(f"{src.file_name} as {type_name} (requantized once, then cached)")
    return open_weights(str(cached_copy(src.path, type_name)), origin=f"requantized from {src.file_name}")


def weight_formats(target: str | None, also: str = "", *, log=print) -> list[Weights]:
    """The target (the embedded model when None), then a requantized copy of it for each type
    in the comma list ``also``, leaving out the target's own type."""
    first = open_weights(target)
    types = parse_types(also)
    if first.quant in types:
        log(f"the target is already {first.quant}: no copy of that type")
    return [first, *(requantized(first, t, log=log) for t in types if t != first.quant)]


def mlx_skip_reason(weights: Weights) -> str | None:
    """Why spectui's MLX backend cannot load this GGUF, or None when it can."""
    from spectui.engine.backends.mlx_gguf import ARCHITECTURES

    if weights.quant not in MLX_TYPES:
        return f"{weights.quant} weights: spectui's MLX backend reads {', '.join(MLX_TYPES)} GGUFs only"
    if weights.architecture not in ARCHITECTURES:
        return f"architecture {weights.architecture!r} has no MLX mapping (have {', '.join(ARCHITECTURES)})"
    return None
