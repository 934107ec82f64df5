"""The chunked transfer coding, decoded from reads split anywhere: the body comes back whole,
and bytes that are not the coding are refused in one line, never buffered without end."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spectui.server.chunked import MAX_SIZE_LINE, ChunkingError, Dechunker


def _encode(parts: list[bytes], ext: bool) -> bytes:
    out = b"".join(f"{len(p):x}{';x=1' if ext else ''}\r\n".encode() + p + b"\r\n" for p in parts if p)
    return out + b"0\r\n\r\n"


def _feed(wire: bytes, cuts: list[int]) -> tuple[bytes, bool]:
    d, out, at = Dechunker(), [], 0
    for cut in sorted({c % (len(wire) + 1) for c in cuts}) + [len(wire)]:
        out.append(d.feed(wire[at:cut]))
        at = cut
    return b"".join(out), d.done


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=8), st.lists(st.integers(0, 10_000), max_size=12), st.booleans())
def test_a_body_read_in_any_pieces_comes_back_whole(parts, cuts, ext):
    body, done = _feed(_encode(parts, ext), cuts)
    assert body == b"".join(parts) and done


def test_what_follows_the_last_chunk_is_not_body():
    d = Dechunker()
    assert d.feed(b"3\r\nabc\r\n0\r\nTrailer: x\r\n\r\nmore") == b"abc" and d.done
    assert d.feed(b"after") == b""


@pytest.mark.parametrize("wire, why", [
    (b"zz\r\nab\r\n", "not hexadecimal"),
    (b"0x3\r\nabc\r\n", "not hexadecimal"),
    (b"1_0\r\n", "not hexadecimal"),
    (b"2\r\nabc\r\n", "runs past its size"),
    (b"a" * (MAX_SIZE_LINE + 1), "longer than"),
])
def test_bytes_that_are_not_the_coding_are_refused(wire, why):
    with pytest.raises(ChunkingError, match=why):
        Dechunker().feed(wire)


def test_an_unfinished_size_line_is_held_and_nothing_more():
    d = Dechunker()
    assert d.feed(b"1") == b"" and d.feed(b"0\r\n" + b"x" * 16) == b"x" * 16 and not d.done
