"""The streaming recording reader (format: see ``spectui.recording.writer``).

Truncation versus corruption:

* A frame whose declared length runs past end of file is a torn tail: the writer was killed
  mid-write. It is reported (``truncated``/``truncated_at``), never raised: every complete
  record before it is good.
* A *complete* frame with a bad CRC or an undecodable payload is corruption, even when it is
  the last frame: the writer emits a frame with one ``write`` call, so a kill leaves a short
  file, never a full-length frame with wrong bytes. Wrong bytes mean something else damaged
  the file, and the user should hear so rather than silently lose data.
* One exception: if everything from a bad frame's CRC field (or from a zero length byte) to
  end of file is zero bytes, it is reported as truncation at that frame. That is what a
  power loss leaves on filesystems that extend the file size before the data lands (ext4,
  XFS): spectui never writes a zero length, and a real CRC of 0 is a 1-in-2^32 chance.
* A declared length over ``MAX_FRAME_BYTES`` is corruption, so one damaged length byte
  cannot turn the rest of a file into a "truncated" tail.

Decoding: the schema's ``Event`` union mixes ``array_like`` structs (``Step``,
``MemorySample``) with map structs, which msgspec refuses to decode as one union
("Type unions may not contain Struct types with array_like=True and array_like=False").
So two reused decoders share the work: arrays (nearly every record) are tried first, maps
after a failed try. Both check the record's tag.
"""

from __future__ import annotations

import gc
import os
import zlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import msgspec

from spectui.drafting import migrate_config
from spectui.errors import SpectuiError
from spectui.recording.schema import (
    MAJOR,
    End,
    Event,
    Header,
    MemorySample,
    PolicyChange,
    Prefill,
    Step,
    WatchReading,
    older_major,
)
from spectui.recording.writer import CRC_SEED, MAGIC, MAX_FRAME_BYTES

#: Read size: large enough that per-read and per-check overhead vanish, small enough to stream.
CHUNK_BYTES = 4 << 20

ArrayEvent = Step | MemorySample
MapEvent = Header | Prefill | PolicyChange | End | WatchReading  # a watch's readings: spectui.watch
_decode_array = msgspec.msgpack.Decoder(ArrayEvent).decode
_decode_map = msgspec.msgpack.Decoder(MapEvent).decode


class _HeaderProbe(msgspec.Struct, tag=1, kw_only=True):
    """Just the version of a header, so a newer-major file is refused with the right
    message even when the rest of its header no longer fits this schema."""

    schema_version: str = ""


_probe_header = msgspec.msgpack.Decoder(_HeaderProbe).decode


class RecordingError(SpectuiError):
    """A file that is not a readable spectui recording."""


@dataclass(slots=True)
class Recording:
    header: Header
    events: list[Event]  # every record, the header included
    truncated: bool  # the file ends inside a frame (torn tail); every event before it is good
    truncated_at: int | None  # byte offset of that incomplete tail
    complete: bool  # has an End record
    path: Path = field(default_factory=Path)


class _Corrupt(Exception):
    def __init__(self, pos: int, why: str, zeros_from: int | None = None, frame_end: int | None = None) -> None:
        self.pos = pos  # start of the bad frame, as an offset in the current buffer
        #: If the buffer and the file are all zero bytes from here on, the damage is a
        #: zero-filled tail (see the module docstring): truncation, not corruption.
        self.zeros_from = zeros_from
        self.frame_end = frame_end  # end of the bad frame when it is complete
        self.why = why


class _Tail:
    __slots__ = ("at",)

    def __init__(self) -> None:
        self.at: int | None = None


def _frame_span(buf: bytes, pos: int) -> tuple[int, int] | None:
    """(payload start, payload end) of the frame at ``pos``; None if it runs past ``buf``."""
    n = len(buf)
    length = 0
    for i in range(4):
        if pos + i >= n:
            return None
        b = buf[pos + i]
        length |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            break
    else:
        raise _Corrupt(pos, "bad length")  # a 5th length byte: never written
    if not 0 < length <= MAX_FRAME_BYTES:
        raise _Corrupt(pos, "bad length", pos if length == 0 else None)
    start = pos + i + 1
    if start + length + 4 > n:
        return None
    return start, start + length


def _walk(buf: bytes, pos: int, out: list[Event]) -> int:
    """Decode the complete frames from ``pos`` (CRCs unchecked: ``_scan`` checks the whole
    run at once); return where the first incomplete frame starts, or ``len(buf)``.

    This loop is the read cost (~1 µs a record, most of it in msgspec): the common one-byte
    length is handled inline, and arrays are decoded first, maps only after a failed try
    (``try`` is free in 3.11 until something raises)."""
    decode_array, decode_map, append = _decode_array, _decode_map, out.append
    n = len(buf)
    while pos < n:
        length = buf[pos]
        if 0 < length < 0x80:
            start = pos + 1
            end = start + length
            if end + 4 > n:
                return pos
        else:
            span = _frame_span(buf, pos)
            if span is None:
                return pos
            start, end = span
        payload = buf[start:end]
        try:
            append(decode_array(payload))
        except msgspec.DecodeError:
            try:
                append(decode_map(payload))
            except msgspec.DecodeError as e:
                raise _Corrupt(pos, f"undecodable: {e}", frame_end=end + 4) from None
        pos = end + 4
    return pos


def _check_frames(buf: bytes, pos: int, stop: int) -> None:
    """Check the CRC of each whole frame in ``buf[pos:stop]``; raise for the first bad one."""
    while pos < stop:
        span = _frame_span(buf, pos)
        assert span is not None  # the frames up to ``stop`` were walked complete
        end = span[1] + 4
        if zlib.crc32(buf[pos:end], CRC_SEED) != CRC_SEED:
            raise _Corrupt(pos, "checksum mismatch", zeros_from=end - 4, frame_end=end)
        pos = end


def _scan(buf: bytes, pos: int, out: list[Event]) -> int:
    """Append the events of the complete, verified frames from ``pos``; return where the
    first incomplete frame starts. On damage, raise with ``out`` holding only the events
    before the damaged frame.

    The cyclic GC is paused meanwhile: decoding allocates four tracked lists per ``Step``, and
    collections every 700 allocations would triple the time. No cycles are made here."""
    start, n_before = pos, len(out)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            pos = _walk(buf, pos, out)
            # One C call checks every frame walked (see CRC_SEED in the writer).
            if zlib.crc32(memoryview(buf)[start:pos], CRC_SEED) == CRC_SEED:
                return pos
            failure, stop = None, pos
        except _Corrupt as e:
            failure, stop = e, e.frame_end or e.pos
        # Locate the damage. A bad CRC before (or at) an undecodable frame or a nonsense
        # length is the better explanation: the CRC covers the length bytes.
        try:
            _check_frames(buf, start, stop)
        except _Corrupt as bad:
            failure = bad
        assert failure is not None  # a run fails its CRC only if one of its frames does
        frames_before, p = 0, start
        while p < failure.pos:
            span = _frame_span(buf, p)
            assert span is not None
            p = span[1] + 4
            frames_before += 1
        del out[n_before + frames_before :]
        raise failure
    finally:
        if gc_was_enabled:
            gc.enable()


def _check_header(payload: bytes, path: Path) -> Header:
    try:
        probe: _HeaderProbe | None = _probe_header(payload)
    except msgspec.DecodeError:
        probe = None
    if probe is not None:
        version = probe.schema_version
        major, _, minor = version.partition(".")
        if not (major.isdigit() and minor.isdigit()):
            raise RecordingError(f"{path} has an unreadable schema version {version!r}")
        if int(major) > MAJOR:
            raise RecordingError(
                f"{path} was written with schema {version}; this spectui reads {MAJOR}.x — upgrade spectui"
            )
    # Either decoder's union (msgspec types a Decoder by the union it decodes) is part of the
    # recording's one Event union: the first record is any event until it is checked below.
    event: Event
    try:
        event = _migrated(payload) if probe is not None and older_major(probe.schema_version) else _decode_map(payload)
    except msgspec.DecodeError:
        try:
            event = _decode_array(payload)
        except msgspec.DecodeError:
            if probe is not None:  # a header, but not one this schema can read
                raise RecordingError(f"{path} has a header this spectui cannot read") from None
            raise _Corrupt(0, "undecodable header") from None
    if type(event) is not Header:
        raise RecordingError(f"{path} does not start with a header record (found a {type(event).__name__} record)")
    return event


def _migrated(payload: bytes) -> Header:
    """A 1.x header as this schema reads it: its draft settings typed, what its plan measured
    moved to ``pricing`` (``drafting.migrate_v1``). Read as plain data first: typed, the old
    draft map would be ignored field by field and read as the default drafter."""
    raw = msgspec.msgpack.decode(payload)
    if not isinstance(raw, dict):
        raise msgspec.DecodeError("a header is a map")
    pricing = migrate_config(raw.get("config"))
    if pricing is not None:
        raw["pricing"] = pricing
    return msgspec.convert(raw, Header)


def _zeros_to_eof(buf: bytes, pos: int, f: BinaryIO) -> bool:
    """True if buf[pos:] and the rest of the file are all zero bytes."""
    if buf.count(0, pos) != len(buf) - pos:
        return False
    while chunk := f.read(CHUNK_BYTES):
        if chunk.count(0) != len(chunk):
            return False
    return True


def _batches(path: Path, tail: _Tail) -> Iterator[list[Event]]:
    """Events in file order, a chunk's worth at a time (a generator step per event would
    be a noticeable share of the read time). Sets ``tail.at`` on a torn tail."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise RecordingError(f"no such recording: {path}") from None
    except OSError as e:
        raise RecordingError(f"cannot read {path}: {e.strerror or e}") from None
    with f:
        magic = f.read(len(MAGIC))
        if magic != MAGIC:
            if not magic:
                raise RecordingError(f"{path} is empty")
            if MAGIC.startswith(magic):
                raise RecordingError(f"{path} was cut off before its header record (at byte {len(magic)})")
            raise RecordingError(f"not a spectui recording: {path}")
        buf = b""
        base = len(MAGIC)  # file offset of buf[0]
        pos = 0
        have_header = False
        while chunk := f.read(CHUNK_BYTES):
            base += pos
            buf = buf[pos:] + chunk if pos < len(buf) else chunk
            pos = 0
            out: list[Event] = []
            try:
                if not have_header:
                    span = _frame_span(buf, 0)
                    if span is None:
                        continue  # a header larger than what was read so far
                    end = span[1] + 4
                    _check_frames(buf, 0, end)  # a damaged header must not pass as a version
                    out.append(_check_header(buf[span[0] : span[1]], path))
                    have_header = True
                    pos = end
                pos = _scan(buf, pos, out)
            except _Corrupt as c:
                if out:
                    yield out
                if c.zeros_from is not None and _zeros_to_eof(buf, c.zeros_from, f):
                    tail.at = base + c.pos
                    break
                raise RecordingError(f"corrupt record at byte {base + c.pos} of {path} ({c.why})") from None
            if out:
                yield out
        else:
            if pos < len(buf):
                tail.at = base + pos
        if not have_header:
            at = tail.at if tail.at is not None else base
            raise RecordingError(f"{path} was cut off before its header record was complete (at byte {at})")


def iter_events(path: str | os.PathLike[str]) -> Generator[Event, None, None]:
    """Stream the events of a recording, header first; stops quietly at a torn tail
    (``read_recording`` reports it). Raises ``RecordingError`` for anything unreadable,
    after yielding every good event before the damage."""
    for batch in _batches(Path(path), _Tail()):
        yield from batch


def read_header(path: str | os.PathLike[str]) -> Header:
    """The recording's header alone: the rest of the file is not read. Raises
    ``RecordingError`` as ``iter_events`` does."""
    events = iter_events(path)
    try:
        header = next(events)
    finally:
        events.close()
    assert type(header) is Header  # _batches starts with a checked header or raises
    return header


def read_recording(path: str | os.PathLike[str]) -> Recording:
    """The whole recording in memory. Raises ``RecordingError`` (a one-line message)."""
    p = Path(path)
    tail = _Tail()
    events: list[Event] = []
    # The GC stays paused for the whole read, not just per chunk (see ``_scan``):
    # re-enabling it between chunks lets collections rescan every event read so far.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for batch in _batches(p, tail):
            events.extend(batch)
    finally:
        if gc_was_enabled:
            gc.enable()
    header = events[0]
    assert type(header) is Header  # _batches starts with a checked header or raises
    complete = any(type(e) is End for e in reversed(events))
    return Recording(header, events, tail.at is not None, tail.at, complete, p)
