"""What ``spectui node serve`` and the local side say to each other over the SSH channel.

Node to local (the remote command's stdout): the recording format of
``spectui.recording.writer`` byte for byte, the magic and then one frame per record, so a run's
events arrive as the very records the recorder writes and are written locally unchanged. Besides
the schema's events the node sends two records of its own: ``Hello`` first (the handshake), and
``Reply``, the answer to a request that runs nothing, or to a run refused before its header.

Local to node (the remote command's stdin): one ``Request`` as a JSON line. Prompts and settings
travel here, inside the ``RunConfig``, never on the remote command line (which is fixed and
quoted with ``shlex``). ``stop`` ends the current run after its step; end of file ends the node
process (see ``spectui.remote.node``).
"""

from __future__ import annotations

import os
import select
import time
import zlib
from typing import Literal

import msgspec

from spectui.config import RunConfig
from spectui.recording.schema import BatchNoise, End, Header, HostInfo, MemorySample, PolicyChange, Prefill, Step
from spectui.recording.watch_records import WatchReading
from spectui.recording.writer import CRC_SEED, MAGIC, MAX_FRAME_BYTES, encode_varint

#: Bumped when the requests or the node's own records change shape; the handshake compares it
#: besides the spectui version, so a mismatch names what to install where.
PROTOCOL_VERSION = 1


class Hello(msgspec.Struct, tag=40, kw_only=True):
    """The node's first record: who it is and what it can run."""

    protocol: int = PROTOCOL_VERSION
    spectui_version: str = ""
    schema_version: str = ""
    host: HostInfo = msgspec.field(default_factory=HostInfo)
    #: importable engine runtimes and their versions ("llama-cpp-python": "0.3.16", "mlx": ...)
    backends: dict[str, str] = msgspec.field(default_factory=dict)
    #: what ``--target`` / ``--draft`` accept there (``spectui models`` on the node)
    models: list[str] = msgspec.field(default_factory=list)


class Reply(msgspec.Struct, tag=41, kw_only=True):
    """The answer to ``open``, ``check``, ``fits`` and ``calibrate``, or a run refused before it began."""

    ok: bool = True
    error: str = ""  # the node's one-line message when not ok
    fits: bool = False
    batch_noise: BatchNoise | None = None


Op = Literal["open", "run", "check", "fits", "calibrate", "stop"]


class Request(msgspec.Struct, kw_only=True, omit_defaults=True):
    op: Op
    config: RunConfig | None = None


#: a watch on the node (``spectui node watch``) streams a ``Header`` and its ``WatchReading`` s
NodeRecord = Header | Prefill | PolicyChange | End | Hello | Reply | WatchReading
_decode_array = msgspec.msgpack.Decoder(Step | MemorySample).decode
_decode_map = msgspec.msgpack.Decoder(NodeRecord).decode
_encode = msgspec.msgpack.Encoder().encode
encode_request = msgspec.json.Encoder().encode
decode_request = msgspec.json.Decoder(Request).decode


def frame(record: object) -> bytes:
    """One record as the recording writer frames it: varint length, msgpack, CRC."""
    payload = _encode(record)
    if len(payload) > MAX_FRAME_BYTES:
        raise ValueError(f"a {type(record).__name__} record of {len(payload)} bytes is too large to send")
    body = encode_varint(len(payload)) + payload
    return body + zlib.crc32(body, CRC_SEED).to_bytes(4, "little")


class BrokenStream(Exception):
    """The node's stream is not a spectui stream (a damaged frame, or something else printed)."""


class FrameReader:
    """Reads the node's records from a pipe as they arrive (``os.read`` returns what is there,
    so each record is seen as soon as its frame is complete, not when a buffer fills)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buf = bytearray()
        self._magic = False

    def _fill(self, deadline: float | None) -> bool:
        """Read more; False at end of stream. Raises ``TimeoutError`` past ``deadline``."""
        if deadline is not None:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._fd], [], [], max(left, 0.0))
            if not ready:
                raise TimeoutError
        chunk = os.read(self._fd, 1 << 16)
        if not chunk:
            return False
        self._buf += chunk
        return True

    def next(self, timeout: float | None = None) -> object | None:
        """The next record; None when the stream ended (cleanly or inside a frame)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._magic:
            if len(self._buf) >= len(MAGIC):
                if bytes(self._buf[: len(MAGIC)]) != MAGIC:
                    raise BrokenStream("the node's output is not a spectui stream")
                del self._buf[: len(MAGIC)]
                self._magic = True
            elif not self._fill(deadline):
                return None
        while True:
            record = self._take()
            if record is not None:
                return record
            if not self._fill(deadline):
                return None

    def _take(self) -> object | None:
        buf = self._buf
        length, i = 0, 0
        while True:
            if i >= len(buf):
                return None
            b = buf[i]
            length |= (b & 0x7F) << (7 * i)
            i += 1
            if not b & 0x80:
                break
            if i == 4:
                raise BrokenStream("a damaged frame length")
        if not 0 < length <= MAX_FRAME_BYTES:
            raise BrokenStream("a damaged frame length")
        end = i + length + 4
        if len(buf) < end:
            return None
        whole = bytes(buf[:end])
        del buf[:end]
        if zlib.crc32(whole, CRC_SEED) != CRC_SEED:
            raise BrokenStream("a frame failed its checksum")
        payload = whole[i : i + length]
        try:
            return _decode_array(payload)
        except msgspec.DecodeError:
            try:
                return _decode_map(payload)
            except msgspec.DecodeError as e:
                raise BrokenStream(f"an unreadable record ({e})") from None
