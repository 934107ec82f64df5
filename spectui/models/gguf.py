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
import time
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

# Bounds on what a file may make this reader build. The counts in a GGUF are the file's to
# write, and a Python object costs far more than its bytes (a u8 array element is 1 byte in
# the file, 8-30 in a list), so a small crafted file could otherwise ask for gigabytes.
#: Metadata and tensor index together: a 256k-token vocabulary with its merges and a MoE
#: model's tensor index take some tens of MB; past this it is not a model's metadata.
MAX_METADATA_BYTES = 256 << 20
#: Array elements over the whole file: the largest vocabularies carry about 1.3 million
#: (tokens, scores, types, merges); four million leaves room and caps the lists at ~200 MB.
MAX_ARRAY_ELEMENTS = 1 << 22
#: Arrays of arrays: the spec allows them, no model nests them deeper than one level.
MAX_ARRAY_DEPTH = 4
#: Key/value pairs (models carry 20-60) and tensors (a large MoE model lists some thousands;
#: 65,536 is ten times the largest): the tensor count is the header's first number, so a file
#: that declares more is refused before anything of it is read.
MAX_KEYS = 1 << 16
MAX_TENSORS = 1 << 16
#: ggml tensors have at most four dimensions (GGML_MAX_DIMS): llama.cpp refuses a file with more.
MAX_DIMS = 4
#: The fewest bytes a key/value pair (a key's length, its type, a one-byte value) and a tensor's
#: index entry (a name's length, its dimension count, its type and offset) take in the file:
#: a count is held to the bytes left before anything is built for it, so no count a file
#: declares makes this reader allocate past the file's own size.
_MIN_KEY_BYTES = 8 + 4 + 1
_MIN_TENSOR_BYTES = 8 + 4 + 4 + 8
#: The fewest bytes one array element takes, by element type: a scalar its size, a string its
#: length, an array its element type and count.
_MIN_ELEMENT_BYTES = {**{code: s.size for code, s in _SCALARS.items()}, _STRING: 8, _ARRAY: 12}

_TEXT, _INT, _NUMBER, _BOOL = (str,), (int,), (int, float), (bool,)
#: The type of each value spectui reads, where the spec gives one (``int`` excludes ``bool``):
#: a file that says otherwise is refused in one line rather than failing later where it is used.
_EXPECTED: dict[str, tuple[type, ...]] = {
    "general.architecture": _TEXT, "general.name": _TEXT, "general.file_type": _INT,
    "tokenizer.chat_template": _TEXT, "tokenizer.ggml.model": _TEXT, "tokenizer.ggml.pre": _TEXT,
    "tokenizer.ggml.bos_token_id": _INT, "tokenizer.ggml.eos_token_id": _INT, "tokenizer.ggml.eot_token_id": _INT,
    "tokenizer.ggml.eom_token_id": _INT, "tokenizer.ggml.add_bos_token": _BOOL, "tokenizer.ggml.add_eos_token": _BOOL,
}  # fmt: skip
#: Lists of one element type.
_EXPECTED_LISTS: dict[str, tuple[type, ...]] = {
    "tokenizer.ggml.tokens": _TEXT, "tokenizer.ggml.merges": _TEXT, "tokenizer.ggml.token_type": _INT,
    "tokenizer.ggml.scores": _NUMBER,
}  # fmt: skip
#: Under the architecture's prefix (``llama.context_length``).
_EXPECTED_PER_ARCH: dict[str, tuple[type, ...]] = {
    "context_length": _INT, "block_count": _INT, "embedding_length": _INT, "vocab_size": _INT,
    "nextn_predict_layers": _INT, "rope.dimension_count": _INT, "attention.key_length": _INT,
    "rope.freq_base": _NUMBER, "rope.scaling.factor": _NUMBER, "attention.layer_norm_rms_epsilon": _NUMBER,
    "rope.scaling.type": _TEXT,
}  # fmt: skip


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
    """Values at a moving position in the mapped file; ``ValueError`` past its end or past
    the bounds above."""

    __slots__ = ("buf", "pos", "elements")

    def __init__(self, buf: mmap.mmap, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos
        self.elements = 0  # array elements read so far

    def take(self, n: int) -> int:
        """Advance over ``n`` bytes; their start."""
        start = self.pos
        if n < 0 or start + n > len(self.buf):
            raise ValueError("the file ends inside its metadata (truncated?)")
        if start + n > MAX_METADATA_BYTES:
            raise ValueError(f"its metadata runs past {MAX_METADATA_BYTES >> 20} MiB, more than any model's")
        self.pos = start + n
        return start

    def count(self, n: int, limit: int, what: str, each: int = 0) -> int:
        """``n`` as declared, refused past ``limit`` or past what the bytes left can hold at
        ``each`` bytes apiece (checked before anything is built for them)."""
        if n > limit:
            raise ValueError(f"it declares {n} {what}, more than the {limit} any model has")
        left = min(len(self.buf), MAX_METADATA_BYTES) - self.pos
        if each and n * each > left:
            raise ValueError(f"it declares {n} {what}, more than its {left} bytes left can hold (truncated?)")
        return n

    def unpack(self, s: struct.Struct) -> Any:
        return s.unpack_from(self.buf, self.take(s.size))[0]

    def string(self) -> str:
        n = self.unpack(_U64)
        start = self.take(n)
        return self.buf[start : start + n].decode("utf-8", "surrogateescape")

    def array_header(self, depth: int) -> tuple[int, int]:
        """An array's element type and count, each held to its bound before any element is read."""
        if depth >= MAX_ARRAY_DEPTH:
            raise ValueError(f"arrays nested deeper than {MAX_ARRAY_DEPTH} levels")
        etype = self.unpack(_U32)
        count = self.unpack(_U64)
        if etype not in _MIN_ELEMENT_BYTES:
            raise ValueError(f"unknown GGUF value type {etype}")
        self.elements = self.count(self.elements + count, MAX_ARRAY_ELEMENTS, "array elements in all")
        self.count(count, MAX_ARRAY_ELEMENTS, "elements in one array", _MIN_ELEMENT_BYTES[etype])
        return etype, count

    def value(self, vtype: int, depth: int = 0) -> Any:
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype, count = self.array_header(depth)
            if etype in _SCALARS:
                s = _SCALARS[etype]
                fmt = "<" + str(count) + s.format[1:]
                return list(struct.unpack_from(fmt, self.buf, self.take(s.size * count)))
            if etype not in (_STRING, _ARRAY):
                raise ValueError(f"unknown GGUF value type {etype}")
            return [self.value(etype, depth + 1) for _ in range(count)]
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype])
        raise ValueError(f"unknown GGUF value type {vtype}")


def read_gguf(path: str | os.PathLike[str]) -> GGUFInfo:
    """Read a GGUF file's metadata and tensor shapes; ``SpectuiError`` (one line) if it is not one.

    A file read before and unchanged since (same inode, size and modification time) is not
    parsed again: a model's vocabulary is ~400,000 values (1.4 s of Python for SmolLM2), and a
    tune starts one server per candidate, each reading its model two or three times. The
    ``GGUFInfo`` returned is then shared: callers read it, never change it."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise SpectuiError(f"model file not found: {path}")
    if os.path.isdir(path):
        raise SpectuiError(f"expected a GGUF file, got a directory: {path}")
    try:
        st = os.stat(path)
    except OSError as exc:
        raise SpectuiError(f"cannot read {path}: {exc.strerror or exc}") from None
    if time.time_ns() - st.st_mtime_ns < RACY_NS:
        return _read(path)  # written a moment ago: a change within the clock's grain would not show
    return _read_unchanged(path, st.st_ino, st.st_size, st.st_mtime_ns)


#: a file modified this recently is read again, not taken from the cache (git's "racily clean"
#: rule): a rewrite of the same size within the file system's timestamp grain keeps its stat
RACY_NS = 2_000_000_000


@lru_cache(maxsize=8)
def _read_unchanged(path: str, _inode: int, _size: int, _mtime_ns: int) -> GGUFInfo:
    return _read(path)


def _read(path: str) -> GGUFInfo:
    try:
        with open(path, "rb") as f:
            if f.read(4) != GGUF_MAGIC:
                raise SpectuiError(f"not a GGUF file (no GGUF magic bytes): {path}")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                _scan(_Reader(buf, 4))  # the whole header's shape, checked before anything is built
                return _parse(path, _Reader(buf, 4))
    except SpectuiError:
        raise
    except (ValueError, struct.error, OSError, UnicodeDecodeError, MemoryError, OverflowError) as exc:
        raise SpectuiError(f"corrupt GGUF file {path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None


def _scan(r: _Reader) -> None:
    """Walk the whole header (keys, arrays, the tensor index with its dimensions) without
    building any of it: every count against its bound and the bytes left, every length against
    the file. A hostile header is refused here, before the parse allocates a list for it; a
    numeric array costs one step, whatever its length."""
    if r.unpack(_U32) not in SUPPORTED_VERSIONS:
        return  # another layout: ``_parse`` refuses the version in one line
    n_tensors = r.count(r.unpack(_U64), MAX_TENSORS, "tensors")
    n_kv = r.count(r.unpack(_U64), MAX_KEYS, "metadata keys", _MIN_KEY_BYTES)
    left = min(len(r.buf), MAX_METADATA_BYTES) - r.pos
    if n_kv * _MIN_KEY_BYTES + n_tensors * _MIN_TENSOR_BYTES > left:
        raise ValueError(f"it declares {n_kv} metadata keys and {n_tensors} tensors, more than its {left} bytes left can hold")
    for _ in range(n_kv):
        r.take(r.unpack(_U64))
        _skip(r, r.unpack(_U32), 0)
    r.count(n_tensors, MAX_TENSORS, "tensors", _MIN_TENSOR_BYTES)
    for _ in range(n_tensors):
        r.take(r.unpack(_U64))
        n_dims = r.count(r.unpack(_U32), MAX_DIMS, "dimensions for a tensor")
        r.take(8 * n_dims + 12)


def _skip(r: _Reader, vtype: int, depth: int) -> None:
    """Step over one value as ``_Reader.value`` would read it, with the same bounds."""
    if vtype == _STRING:
        r.take(r.unpack(_U64))
    elif vtype == _ARRAY:
        etype, count = r.array_header(depth)
        if etype in _SCALARS:
            r.take(_SCALARS[etype].size * count)
        elif etype == _STRING:
            for _ in range(count):
                r.take(r.unpack(_U64))
        else:
            for _ in range(count):
                _skip(r, etype, depth + 1)
    elif vtype in _SCALARS:
        r.take(_SCALARS[vtype].size)
    else:
        raise ValueError(f"unknown GGUF value type {vtype}")


def _parse(path: str, r: _Reader) -> GGUFInfo:
    version = r.unpack(_U32)
    if version not in SUPPORTED_VERSIONS:
        raise SpectuiError(f"unsupported GGUF version {version} in {path}")
    n_tensors = r.count(r.unpack(_U64), MAX_TENSORS, "tensors")  # bounded by ``_scan`` already, as is all below
    n_kv = r.count(r.unpack(_U64), MAX_KEYS, "metadata keys")
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = r.string()
        metadata[key] = r.value(r.unpack(_U32))
    _check_types(metadata)
    shapes: dict[str, tuple[int, ...]] = {}
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.count(r.unpack(_U32), MAX_DIMS, "dimensions for a tensor")
        shapes[name] = struct.unpack_from(f"<{n_dims}Q", r.buf, r.take(8 * n_dims))
        r.take(12)  # ggml type (u32) + data offset (u64)
    return GGUFInfo(path=path, version=version, metadata=metadata, tensor_shapes=shapes)


def _is(value: Any, types: tuple[type, ...]) -> bool:
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def _check_types(metadata: dict[str, Any]) -> None:
    """``ValueError`` naming the first value spectui reads whose type is not the spec's."""
    arch = metadata.get("general.architecture")
    expected = dict(_EXPECTED)
    if isinstance(arch, str):
        expected.update({f"{arch}.{key}": types for key, types in _EXPECTED_PER_ARCH.items()})
    for key, types in expected.items():
        if key in metadata and not _is(metadata[key], types):
            raise ValueError(f"{key} is a {_type_name(metadata[key])}, not a {types[-1].__name__}")
    for key, types in _EXPECTED_LISTS.items():
        value = metadata.get(key)
        if value is not None and not (isinstance(value, list) and all(_is(v, types) for v in value)):
            raise ValueError(f"{key} is not a list of {types[-1].__name__} values")


def _type_name(value: Any) -> str:
    return {str: "string", list: "array", bool: "bool", int: "integer", float: "float"}.get(type(value), type(value).__name__)


def first_vocab_difference(a: GGUFInfo, b: GGUFInfo) -> str | None:
    """Describe the first token id whose text differs between two GGUF vocabularies, or None."""
    return first_token_difference(a.tokens, b.tokens, os.path.basename(a.path), os.path.basename(b.path))
