"""GGUF metadata: header, key/values and tensor shapes, never tensor data; vocabulary digests.

Both backends need the same facts before they load anything heavy: is this file GGUF at
all, what quantisation and size is it, which chat template and vocabulary does it carry.
Reading them here gives one answer for llama.cpp and MLX and a one-line error for a file that
is not GGUF.

The file is memory-mapped and read front to back as far as the tensor index, so a 20 GB model
costs what its metadata costs: about 0.15 s for SmolLM2's 49k-token vocabulary, 0.5 s for a
Llama 3 sized one (128k tokens, 280k merges). llama.cpp's own Python reader (``gguf.GGUFReader``,
a dependency) reads the same bytes and is the reference the tests hold this one to, but it
builds a numpy view per array element: 3 s and 13 s for those two files. The value types are
the GGUF spec's; the names of ``general.file_type`` come from the ``gguf`` package, so a
quantisation llama.cpp adds is named without a change here.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from spectui.errors import SpectuiError

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)

# the value types of the GGUF spec (gguf.GGUFValueType): scalars by code, then string and array
_SCALARS = {
    0: struct.Struct("<B"),  # UINT8
    1: struct.Struct("<b"),  # INT8
    2: struct.Struct("<H"),  # UINT16
    3: struct.Struct("<h"),  # INT16
    4: struct.Struct("<I"),  # UINT32
    5: struct.Struct("<i"),  # INT32
    6: struct.Struct("<f"),  # FLOAT32
    7: struct.Struct("<?"),  # BOOL
    10: struct.Struct("<Q"),  # UINT64
    11: struct.Struct("<q"),  # INT64
    12: struct.Struct("<d"),  # FLOAT64
}
_STRING, _ARRAY = 8, 9
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


@lru_cache(maxsize=64)
def file_type_name(ftype: int) -> str:
    """llama.cpp's name of a ``general.file_type`` value (``llama_ftype``): 15 is ``Q4_K_M``."""
    from gguf import LlamaFileType  # the package's import costs ~0.25 s: only when a name is asked

    try:
        name = LlamaFileType(ftype).name
    except ValueError:
        return f"ftype {ftype}"
    return name.removeprefix("MOSTLY_").removeprefix("ALL_")


def vocab_digest(tokens: Iterable[str], types: Iterable[int]) -> str:
    """sha256 of a vocabulary: every token's text, NUL-terminated, then every token type as a
    little-endian u32. A GGUF (``GGUFInfo.vocab_sha256``) and the tokenizer rebuilt from it
    (``TextTokenizer.vocab_sha256``) hash to the same digest."""
    h = hashlib.sha256()
    for tok in tokens:
        h.update(tok.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    for kind in types:
        h.update(_U32.pack(kind & 0xFFFFFFFF))
    return h.hexdigest()


def first_token_difference(a: Sequence[str], b: Sequence[str], a_name: str = "the target", b_name: str = "the draft") -> str | None:
    """The first token id whose text differs between two vocabularies, described; None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"token id {i} is {x!r} in {a_name} but {y!r} in {b_name}"
    if len(a) != len(b):
        return f"vocabulary sizes differ ({len(a)} vs {len(b)}): token id {min(len(a), len(b))} exists in only one"
    return None


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
        return file_type_name(int(ftype)) if ftype is not None else "unknown"

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
        return vocab_digest(self.tokens, self.metadata.get("tokenizer.ggml.token_type", []))

    def chat_template_sha256(self) -> str:
        tpl = self.chat_template
        return hashlib.sha256(tpl.encode()).hexdigest() if tpl else ""


class _Reader:
    """Values at a moving position in the mapped file; ``ValueError`` past its end."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: mmap.mmap, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos

    def take(self, n: int) -> int:
        """Advance over ``n`` bytes; their start."""
        start = self.pos
        if n < 0 or start + n > len(self.buf):
            raise ValueError("the file ends inside its metadata (truncated?)")
        self.pos = start + n
        return start

    def unpack(self, s: struct.Struct) -> Any:
        return s.unpack_from(self.buf, self.take(s.size))[0]

    def string(self) -> str:
        n = self.unpack(_U64)
        start = self.take(n)
        return self.buf[start : start + n].decode("utf-8", "surrogateescape")

    def value(self, vtype: int) -> Any:
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype = self.unpack(_U32)
            count = self.unpack(_U64)
            if etype in _SCALARS:
                s = _SCALARS[etype]
                fmt = "<" + str(count) + s.format[1:]
                return list(struct.unpack_from(fmt, self.buf, self.take(s.size * count)))
            if count > len(self.buf):
                raise ValueError(f"implausible array length {count}")
            return [self.value(etype) for _ in range(count)]
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype])
        raise ValueError(f"unknown GGUF value type {vtype}")


def read_gguf(path: str | os.PathLike[str]) -> GGUFInfo:
    """Read a GGUF file's metadata and tensor shapes; ``SpectuiError`` (one line) if it is not one."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise SpectuiError(f"model file not found: {path}")
    if os.path.isdir(path):
        raise SpectuiError(f"expected a GGUF file, got a directory: {path}")
    try:
        with open(path, "rb") as f:
            if f.read(4) != GGUF_MAGIC:
                raise SpectuiError(f"not a GGUF file (no GGUF magic bytes): {path}")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _parse(path, _Reader(buf, 4))
    except SpectuiError:
        raise
    except (ValueError, struct.error, OSError, UnicodeDecodeError, MemoryError, OverflowError) as exc:
        raise SpectuiError(f"corrupt GGUF file {path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None


def _parse(path: str, r: _Reader) -> GGUFInfo:
    version = r.unpack(_U32)
    if version not in SUPPORTED_VERSIONS:
        raise SpectuiError(f"unsupported GGUF version {version} in {path}")
    n_tensors = r.unpack(_U64)
    n_kv = r.unpack(_U64)
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = r.string()
        metadata[key] = r.value(r.unpack(_U32))
    shapes: dict[str, tuple[int, ...]] = {}
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.unpack(_U32)
        shapes[name] = struct.unpack_from(f"<{n_dims}Q", r.buf, r.take(8 * n_dims))
        r.take(12)  # ggml type (u32) + data offset (u64)
    return GGUFInfo(path=path, version=version, metadata=metadata, tensor_shapes=shapes)


def first_vocab_difference(a: GGUFInfo, b: GGUFInfo) -> str | None:
    """Describe the first token id whose text differs between two GGUF vocabularies, or None."""
    return first_token_difference(a.tokens, b.tokens, os.path.basename(a.path), os.path.basename(b.path))
