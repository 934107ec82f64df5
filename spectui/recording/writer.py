"""The crash-safe recording writer.

File format::

    b"SPECTUI\x01"                8-byte magic (the last byte is the format version)
    frame*                         one per event, in emission order
    frame = varint(len(payload)) payload crc
      varint  : unsigned LEB128, 1..4 bytes, 1 <= len <= MAX_FRAME_BYTES
      payload : msgpack of one schema event, tag included (``msgspec.msgpack.Encoder``)
      crc     : zlib.crc32(varint + payload, CRC_SEED), 4 bytes little-endian

Why this framing: a one-token AR ``Step`` encodes to ~29 bytes, so the frame costs 5 bytes
(1 length byte + 4 CRC bytes), ~34 bytes a token in all. The length prefix lets the reader
step to the next record without parsing msgpack, and tells a torn tail (the declared length
runs past end of file: the writer was killed mid-write) from damage inside the file (a
complete frame whose CRC does not match). The CRC covers the length too, so a damaged length
is caught at its own frame instead of derailing the frames after it.

Why the seed: it is CRC-32's residue (``crc32(m + crc32(m, s) as 4 LE bytes, s)`` is this
constant for every ``m`` and ``s``). Seeding every frame with it makes any run of whole
frames check in one call: ``crc32(run, CRC_SEED) == CRC_SEED``. The reader verifies a 4 MiB
chunk in one C call and falls back to frame-by-frame checks only to locate damage, which
takes a fifth off the per-record read cost; each frame still checks on its own.

Durability: every record but ``MemorySample`` is flushed to the OS as it is written, so a
process killed at any instant (SIGKILL included) leaves every complete record in the file;
a memory sample may wait in the buffer for the next record. ``close`` also fsyncs, which is
what survives a power loss.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import threading
import zlib
from pathlib import Path
from types import TracebackType

import msgspec

from spectui import paths, storage
from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.format import model_name
from spectui.recording.schema import SCHEMA_VERSION, Event, Header, MemorySample, older_major

MAGIC = b"SPECTUI\x01"
#: Larger frames are refused by the writer and read as corruption (not truncation) by the
#: reader, so one damaged length byte cannot make the reader swallow the rest of a file.
MAX_FRAME_BYTES = 64 << 20
SUFFIX = ".spectui"
#: CRC-32's residue; see the module docstring.
CRC_SEED = 0x2144DF1C

_ONE_BYTE = [bytes((i,)) for i in range(128)]  # most frames: no varint loop, no allocation


def encode_varint(n: int) -> bytes:
    if n < 128:
        return _ONE_BYTE[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class RecordingWriter:
    """Appends framed events to a new recording file. Thread-safe (the memory sampler
    thread may write while the engine thread does)."""

    def __init__(self, path: str | os.PathLike[str], *, sync_folder: bool = True) -> None:
        """``sync_folder``: fsync the folder once the file exists; a caller that writes many
        recordings into one folder at once (a workload's level) syncs the folder itself after."""
        self.path = Path(path)
        self._encode = msgspec.msgpack.Encoder().encode
        self._lock = threading.Lock()
        #: Why a write failed (the file is then closed, and later writes fail the same way).
        self._failed: str | None = None
        try:
            _prepare_folder(self.path.parent)
            try:
                # O_EXCL: never clobber (or interleave with) another recording; an empty
                # placeholder (mktemp, touch) is fine to fill. 0600 whatever the umask: it
                # holds the prompt and every token.
                fd = storage.create_new(self.path, private=True)
            except FileExistsError:
                raise SpectuiError(f"recording {self.path} already exists; choose another file name") from None
            try:
                self._file = os.fdopen(fd, "ab")
            except BaseException:
                os.close(fd)
                raise
            # the file's own fsyncs keep its bytes, not its name: without this a crash can
            # lose the whole recording's entry in its folder
            if sync_folder:
                storage.fsync_dir(self.path.parent)
        except OSError as e:
            raise SpectuiError(f"cannot write recording {self.path}: {e.strerror or e}") from None
        with self._lock:
            self._append(MAGIC, flush=True)
        #: Bytes written so far (buffered ones included): the file size after ``close``.
        self.size = len(MAGIC)

    def write(self, event: Event) -> None:
        if type(event) is Header and older_major(event.schema_version):
            # a header read from an older recording is written in this schema's shapes now: a
            # reader would otherwise migrate it again (spectui.recording.reader._migrated)
            event = msgspec.structs.replace(event, schema_version=SCHEMA_VERSION)
        payload = self._encode(event)  # tagged structs always carry their tag
        n = len(payload)
        if n > MAX_FRAME_BYTES:
            raise SpectuiError(f"a {type(event).__name__} record of {n} bytes is too large to record")
        body = (_ONE_BYTE[n] if n < 128 else encode_varint(n)) + payload
        frame = body + zlib.crc32(body, CRC_SEED).to_bytes(4, "little")
        with self._lock:
            # One write call per frame: frames from two threads never interleave.
            self._append(frame, flush=type(event) is not MemorySample)
            self.size += len(frame)

    def _append(self, data: bytes, *, flush: bool) -> None:
        """Write ``data`` (under the lock). A failed write (a full disk) closes the file at once,
        dropping what is still buffered: every complete record already flushed stays, the cut
        one reads as a torn tail, and nothing is left for Python to flush again at exit."""
        if self._failed is not None:
            raise SpectuiError(self._failed)  # the memory sampler's thread, after the engine's write failed
        try:
            self._file.write(data)
            if flush:
                self._file.flush()
        except OSError as e:
            self._failed = f"cannot write recording {self.path}: {e.strerror or e}"
            storage.discard(self._file)
            raise SpectuiError(self._failed) from None

    def close(self) -> None:
        """Flush, fsync and close. After a failed write it only returns: that write raised the
        error already, and the file is closed."""
        with self._lock:
            if self._file.closed:
                return
            try:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()
            except OSError as e:
                storage.discard(self._file)  # a flush that failed would fail again in close
                raise SpectuiError(f"cannot write recording {self.path}: {e.strerror or e}") from None

    @property
    def closed(self) -> bool:
        return self._file.closed

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


# -- file names ---------------------------------------------------------------------------


def _prepare_folder(folder: Path) -> None:
    """The recording's folder: one spectui creates is 0700; the default recordings folder and
    run folders in it are spectui's own and are tightened if others can read them; a folder
    the user named keeps its modes (the file itself is 0600 in any case)."""
    home = recordings_dir().absolute()
    where = folder.absolute()
    if where == home or where.parent == home:
        storage.prepare_dir(home, private=True, own=True)
    storage.prepare_dir(folder, private=True, own=where == home or where.parent == home)


def recordings_dir() -> Path:
    """$SPECTUI_RECORDINGS, else ``recordings/`` in the user data directory (``spectui.paths``):
    never the current directory's ``recordings/``, which in a checkout holds tracked samples."""
    return paths.recordings_dir()


def _slug(text: str, limit: int = 40) -> str:
    # Keep names shell- and filesystem-friendly everywhere (no spaces, colons, slashes).
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-.")[:limit] or "x"


def _model_label(spec: str) -> str:
    return _slug(model_name(spec))  # the name every screen and report gives the model


def default_recording_path(
    config: RunConfig, directory: str | os.PathLike[str] | None = None, *, now: dt.datetime | None = None
) -> Path:
    """A new, readable file name, e.g. ``recordings/2026-11-21T11-30-02_spec-ngram-k4_SmolLM2-135M-Instruct.Q4_1.spectui``.

    Local time (the name is for people; the header has the UTC start). An existing file is
    never reused: ``-2``, ``-3``... are appended. The file is not created here; the writer
    opens it exclusively, so a lost race fails loudly instead of overwriting.
    """
    folder = Path(directory) if directory is not None else recordings_dir()
    stamp = (now or dt.datetime.now()).strftime("%Y-%m-%dT%H-%M-%S")
    return free_path(folder, f"{stamp}_{mode_slug(config)}_{_model_label(config.target)}")


def mode_slug(config: RunConfig) -> str:
    """``ar``, ``spec-ngram-k4``, ``spec-ngram-k1-16`` (cost-aware), ``spec-<draft>-k4``,
    ``spec-ngram-mod-kdefault`` (a runtime's method at its own K): a run in a file name."""
    if config.mode == "ar":
        return "ar"
    d = config.draft
    source = _model_label(d.flag) if d.has_model else d.runtime_method or d.flag
    if d.fixed_k is not None:
        return f"spec-{source}-k{d.fixed_k}"
    k_min, k_max = d.k_range
    return f"spec-{source}-k{k_min}-{k_max}" if d.cost_aware else f"spec-{source}-kdefault"


def free_path(folder: Path, stem: str) -> Path:
    """``folder/stem.spectui``, or with ``-2``, ``-3``... appended where that exists."""
    path = folder / (stem + SUFFIX)
    n = 2
    while path.exists():
        path = folder / f"{stem}-{n}{SUFFIX}"
        n += 1
    return path


def new_run_folder(kind: str) -> Path:
    """``recordings/<kind>-<local time>/`` (``-2``, ``-3``... if taken): one folder per sweep,
    soak, quality set or conversation, whose recordings are analysed together."""
    return new_folder_in(recordings_dir(), kind)


def new_folder_in(parent: Path, kind: str) -> Path:
    """``parent/<kind>-<local time>/``, or with ``-2``, ``-3``... where that is taken (not created)."""
    base = parent / f"{kind}-{dt.datetime.now().strftime('%Y-%m-%dT%H-%M-%S')}"
    path, n = base, 2
    while path.exists():
        path = base.with_name(f"{base.name}-{n}")
        n += 1
    return path


def check_run_folder(folder: Path, kind: str) -> None:
    """Refuse a folder that already holds recordings: two sets in one folder would be analysed as one."""
    if folder.exists() and not folder.is_dir():
        raise SpectuiError(f"{folder} is not a folder")
    if folder.is_dir() and any(folder.glob("*" + SUFFIX)):
        raise SpectuiError(f"{folder} already holds recordings; give the {kind} a new folder")
