"""A small GGUF metadata reader: header, key/values and tensor shapes, never tensor data.

Both backends need the same facts before they load anything heavy: is this file GGUF at
all, what quantisation and size is it, which chat template and vocabulary does it carry.
Reading them here (a front-to-back read of the header, a fraction of a second even for large files) gives one
answer for llama.cpp and MLX and a clean error for a file that is not GGUF.
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from spectui.errors import SpectuiError

GGUF_MAGIC = b"GGUF"

# value types of the GGUF spec
_SCALARS = {
    0: struct.Struct("<B"),
    1: struct.Struct("<b"),
    2: struct.Struct("<H"),
    3: struct.Struct("<h"),
    4: struct.Struct("<I"),
    5: struct.Struct("<i"),
    6: struct.Struct("<f"),
    7: struct.Struct("<?"),
    10: struct.Struct("<Q"),
    11: struct.Struct("<q"),
    12: struct.Struct("<d"),
}
_STRING, _ARRAY = 8, 9
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

#: llama.cpp's ``llama_ftype`` values, as written to ``general.file_type``.
FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
    10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
    16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S",
    22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M",
    28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
    37: "TQ2_0", 38: "MXFP4_MOE",
}


@dataclass
class GGUFInfo:
    path: str
    version: int
    metadata: dict[str, Any]
    tensor_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    @property
    def name(self) -> str:
        return str(self.metadata.get("general.name", os.path.basename(self.path)))

    @property
    def quant(self) -> str:
        ftype = self.metadata.get("general.file_type")
        return FILE_TYPES.get(ftype, f"ftype {ftype}") if ftype is not None else "unknown"

    @property
    def n_params(self) -> int:
        total = 0
        for shape in self.tensor_shapes.values():
            n = 1
            for d in shape:
                n *= d
            total += n
        return total

    @property
    def n_ctx_train(self) -> int:
        return int(self.metadata.get(f"{self.architecture}.context_length", 0))

    @property
    def tokens(self) -> list[str]:
        return self.metadata.get("tokenizer.ggml.tokens", [])

    @property
    def chat_template(self) -> str | None:
        return self.metadata.get("tokenizer.chat_template")

    def vocab_sha256(self) -> str:
        h = hashlib.sha256()
        for tok in self.tokens:
            h.update(tok.encode("utf-8", "surrogatepass"))
            h.update(b"\0")
        for kind in self.metadata.get("tokenizer.ggml.token_type", []):
            h.update(_U32.pack(kind & 0xFFFFFFFF))
        return h.hexdigest()

    def chat_template_sha256(self) -> str:
        tpl = self.chat_template
        return hashlib.sha256(tpl.encode()).hexdigest() if tpl else ""


class _Cursor:
    """Reads the file front to back, loading more of it only as parsing needs it."""

    __slots__ = ("f", "buf", "pos")

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.buf = b""
        self.pos = 0

    def _need(self, n: int) -> None:
        missing = self.pos + n - len(self.buf)
        if missing > 0:
            more = self.f.read(max(missing, 1 << 20))
            self.buf = self.buf[self.pos:] + more
            self.pos = 0
            if len(self.buf) < n:
                raise ValueError("the file ends inside its metadata (truncated?)")

    def unpack(self, s: struct.Struct) -> Any:
        self._need(s.size)
        value = s.unpack_from(self.buf, self.pos)[0]
        self.pos += s.size
        return value

    def raw(self, n: int) -> bytes:
        if n > 1 << 32:
            raise ValueError(f"implausible length {n}")
        self._need(n)
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def string(self) -> str:
        return self.raw(self.unpack(_U64)).decode("utf-8", "surrogateescape")

    def value(self, vtype: int) -> Any:
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype = self.unpack(_U32)
            count = self.unpack(_U64)
            if etype in _SCALARS:
                s = _SCALARS[etype]
                return [v[0] for v in s.iter_unpack(self.raw(s.size * count))]
            return [self.value(etype) for _ in range(count)]
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype])
        raise ValueError(f"unknown GGUF value type {vtype}")


def read_gguf(path: str | os.PathLike[str]) -> GGUFInfo:
    """Read a GGUF file's metadata and tensor shapes; ``SpectuiError`` if it is not one."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise SpectuiError(f"model file not found: {path}")
    if os.path.isdir(path):
        raise SpectuiError(f"expected a GGUF file, got a directory: {path}")
    try:
        with open(path, "rb") as f:
            if f.read(4) != GGUF_MAGIC:
                raise SpectuiError(f"not a GGUF file (no GGUF magic bytes): {path}")
            return _parse(path, _Cursor(f))
    except SpectuiError:
        raise
    except (ValueError, struct.error, OSError, UnicodeDecodeError, MemoryError) as exc:
        raise SpectuiError(f"corrupt GGUF file {path}: {exc}") from None


def _parse(path: str, cur: _Cursor) -> GGUFInfo:
    version = cur.unpack(_U32)
    if version not in (2, 3):
        raise SpectuiError(f"unsupported GGUF version {version} in {path}")
    n_tensors = cur.unpack(_U64)
    n_kv = cur.unpack(_U64)
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = cur.string()
        metadata[key] = cur.value(cur.unpack(_U32))
    shapes: dict[str, tuple[int, ...]] = {}
    for _ in range(n_tensors):
        name = cur.string()
        n_dims = cur.unpack(_U32)
        shapes[name] = tuple(cur.unpack(_U64) for _ in range(n_dims))
        cur.raw(12)  # ggml type (u32) + data offset (u64)
    return GGUFInfo(path=path, version=version, metadata=metadata, tensor_shapes=shapes)


def first_vocab_difference(a: GGUFInfo, b: GGUFInfo) -> str | None:
    """Describe the first token id whose text differs between two vocabularies, or None."""
    ta, tb = a.tokens, b.tokens
    for i, (x, y) in enumerate(zip(ta, tb)):
        if x != y:
            return f"token id {i} is {x!r} in {os.path.basename(a.path)} but {y!r} in {os.path.basename(b.path)}"
    if len(ta) != len(tb):
        i = min(len(ta), len(tb))
        return f"vocabulary sizes differ ({len(ta)} vs {len(tb)}): token id {i} exists in only one"
    return None
