"""HTTP/1.1's chunked transfer coding (RFC 9112, section 7.1), decoded from whatever bytes
have arrived: a streaming server writes each token as one chunk, and decoding a read's worth
at once costs a fraction of ``http.client``'s chunk-by-chunk reading (a client under load
reads a token per stream, so that cost is most of what it spends). Bounded: it holds at most
an unfinished size line; the data passes through."""

from __future__ import annotations

import re

#: a chunk-size line (hex size, extensions) longer than this is no server's
MAX_SIZE_LINE = 1024
_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")


class ChunkingError(ValueError):
    """Bytes that are not the chunked coding."""


class Dechunker:
    def __init__(self) -> None:
        self._held = b""  # an unfinished size line, or part of the CRLF after a chunk's data
        self._left = 0  # data bytes of the current chunk still to come
        self._crlf = False  # the CRLF that ends a chunk's data still to come
        #: the last chunk (size 0) came: the body is whole (trailers, if any, are not read)
        self.done = False

    def feed(self, raw: bytes) -> bytes:
        """The body bytes in ``raw`` (what arrived), in order; raises ``ChunkingError``."""
        buf = self._held + raw if self._held else raw
        out: list[bytes] = []
        i, n = 0, len(buf)
        while i < n and not self.done:
            if self._left:
                take = min(self._left, n - i)
                out.append(buf[i : i + take])
                i += take
                self._left -= take
                self._crlf = not self._left
            elif self._crlf:
                if n - i < 2:
                    break
                if buf[i : i + 2] != b"\r\n":
                    raise ChunkingError("a chunk's data runs past its size")
                i += 2
                self._crlf = False
            else:
                end = buf.find(b"\r\n", i, i + MAX_SIZE_LINE)
                if end < 0:
                    if n - i >= MAX_SIZE_LINE:
                        raise ChunkingError(f"a chunk-size line longer than {MAX_SIZE_LINE} bytes")
                    break
                size = buf[i:end].split(b";", 1)[0].strip(b" \t")
                if not _SIZE.fullmatch(size):
                    raise ChunkingError(f"a chunk size that is not hexadecimal: {bytes(size[:20])!r}")
                self._left = int(size, 16)
                self.done = not self._left
                i = end + 2
        self._held = buf[i:] if not self.done else b""
        return b"".join(out)
