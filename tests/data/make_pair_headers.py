"""Make the real-header fixtures: each GGUF's metadata and tensor table, without its weights.

    python tests/data/make_pair_headers.py MODEL.gguf [...]   # writes headers/<name>.header.gguf.gz

The catalogue decides pairing from a file's header alone (architecture, vocabulary, BOS/EOS,
tensor shapes for the parameter count), so a header is a faithful stand-in for the model in
the catalogue's tests: the Qwen2.5-Coder pair (benchmarks/real_pair.py) is 1.6 GB, its headers
are a few MB. The bytes are the file's own, cut at the end of the tensor table; only the BPE
merges are left out (the pairing rule never reads them; they would double the size).
"""

from __future__ import annotations

import gzip
import struct
import sys
from pathlib import Path

DROP = {"tokenizer.ggml.merges"}
_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


def _skip_value(buf: bytes, pos: int, vtype: int) -> int:
    if vtype == _STRING:
        (n,) = struct.unpack_from("<Q", buf, pos)
        return pos + 8 + n
    if vtype == _ARRAY:
        etype, count = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        if etype in _SIZES:
            return pos + _SIZES[etype] * count
        for _ in range(count):
            pos = _skip_value(buf, pos, etype)
        return pos
    return pos + _SIZES[vtype]


def header_only(buf: bytes) -> bytes:
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    assert magic == b"GGUF", "not a GGUF file"
    pos = 24
    kept: list[bytes] = []
    for _ in range(n_kv):
        start = pos
        (n,) = struct.unpack_from("<Q", buf, pos)
        key = buf[pos + 8 : pos + 8 + n].decode()
        pos += 8 + n
        (vtype,) = struct.unpack_from("<I", buf, pos)
        pos = _skip_value(buf, pos + 4, vtype)
        if key not in DROP:
            kept.append(buf[start:pos])
    tensors_start = pos
    for _ in range(n_tensors):
        (n,) = struct.unpack_from("<Q", buf, pos)
        pos += 8 + n
        (n_dims,) = struct.unpack_from("<I", buf, pos)
        pos += 4 + 8 * n_dims + 12
    head = struct.pack("<4sIQQ", magic, version, n_tensors, len(kept))
    return head + b"".join(kept) + buf[tensors_start:pos]


def main(paths: list[str]) -> None:
    out = Path(__file__).parent / "headers"
    out.mkdir(exist_ok=True)
    for path in paths:
        with open(path, "rb") as f:
            buf = f.read(64 << 20)  # every header here ends well inside the first 64 MB
        dest = out / (Path(path).stem + ".header.gguf.gz")
        with gzip.GzipFile(dest, "wb", compresslevel=9, mtime=0) as z:
            z.write(header_only(buf))
        print(dest, dest.stat().st_size)


if __name__ == "__main__":
    main(sys.argv[1:])
