"""The suffix drafter's memory: earlier outputs of one model, indexed, bounded and kept on disk.

Agents, self-refinement and this project's own prompt suites ask a model the same things
again; what it answered last time is the best draft for this time. ``SuffixMemory`` holds the
outputs of earlier requests (each after the last tokens of its prompt) in one suffix index
(``MemoryIndex``), so the drafter matches the history against all of them at once.

Bounded: at most ``max_tokens`` stored tokens, whatever is fed. Whole sequences leave oldest
first: their counts are taken back out of the index, and the states they leave at count 0
read as absent until a rebuild, which comes once more tokens were evicted than are stored, so
there are never more than four states per stored token. The default cap, 200,000 tokens
(some 400 answers of 500 tokens), holds about 150 bytes per token (30 MB) and loads in about
a second on this project's 2-core CPU (``benchmarks/suffix_memory.py``): the load (a rebuild)
is paid by every process that opens the memory, and recent answers are the useful ones.

Persisted per vocabulary (token ids mean nothing under another one) in
``draft-memory/<vocab sha256>.msgpack`` in the user cache directory (``spectui.paths``;
``~/.cache/spectui`` on Linux): the stored sequences, not the index, which is rebuilt on load, so the file
format does not depend on the index's layout. Written through ``spectui.storage``: atomically
(a kill leaves the old file or the new one), private (0600 in a 0700 folder: it holds earlier
outputs), under a lock: a save re-reads the file and adds this process's new sequences to
what is there, so two processes sharing one memory (two dashboards, a dashboard and a sweep)
keep each other's outputs. It is a cache: safe to delete; a file of its kind that cannot be
used (corrupt, truncated, another vocabulary's, another format version's) is moved aside
(``NAME.corrupt-<time>``) with one ``DraftMemoryWarning`` and the memory starts empty (``note``
keeps the same line for a UI); a file of another kind at the path is refused (exit 2).
"""

from __future__ import annotations

import hashlib
import re
import sys
import warnings
from array import array
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, TypeVar

import msgspec

from spectui import file_kinds, storage
from spectui.engine.drafters.suffix_index import DEFAULT_MAX_DEPTH, SuffixIndex
from spectui.paths import cache_dir

FORMAT = "spectui-draft-memory"
#: bump when the file's layout or meaning changes: an older file is then ignored, not misread
FORMAT_VERSION = 1
DEFAULT_MAX_TOKENS = 200_000

_Token = Annotated[int, msgspec.Meta(ge=0, lt=2**31)]
_Seq = TypeVar("_Seq", bound=Sequence[int])  # token sequences, given back as the caller's own type
_SAFE_NAME = re.compile(r"[0-9A-Za-z_-]{1,128}")


class DraftMemoryWarning(UserWarning):
    """A draft-memory file was ignored (the memory starts empty); the message is one line."""


class _Header(msgspec.Struct):
    """What a file says it is: readable even when the rest is another version's."""

    format: str = ""
    version: int = 0
    vocab_hash: str = ""


class _File(msgspec.Struct):
    format: str
    version: int
    vocab_hash: str
    #: oldest first, each an output with the tail of its prompt before it
    sequences: list[list[_Token]]


@dataclass(frozen=True)
class MemoryStats:
    sequences: int
    tokens: int
    #: index states, including dead ones awaiting a rebuild
    nodes: int
    #: approximate bytes held by the index and the stored sequences
    bytes: int
    max_tokens: int


def memory_path(vocab_hash: str, cache: Path | None = None) -> Path:
    """Where the memory of a vocabulary lives (a hash that is no safe file name is hashed)."""
    name = vocab_hash if _SAFE_NAME.fullmatch(vocab_hash) else hashlib.sha256(vocab_hash.encode()).hexdigest()
    return (cache or cache_dir()) / "draft-memory" / f"{name}.msgpack"


class MemoryIndex(SuffixIndex):
    """The memory's index: a ``SuffixIndex`` that is also built in bulk and can forget."""

    @classmethod
    def build(cls, sequences: Iterable[Sequence[int]], max_depth: int = DEFAULT_MAX_DEPTH) -> MemoryIndex:
        """An index of closed ``sequences``, built in bulk (a memory loaded or rebuilt).

        Keeping every context's best continuation current while building doubled the cost
        of a load, and most contexts are never asked for: here each is found by its first
        ``choices`` (one scan of its continuations) and kept current from then on.
        """
        index = cls(max_depth)
        index._bulk = True
        for seq in sequences:
            index.extend(seq)
            index.end_sequence()
        index._bulk = False
        index._best_n = array("i", [-1]) * len(index._len)
        return index

    def remove(self, tokens: Sequence[int]) -> None:
        """Take back the occurrences of a closed sequence added earlier: the walk ``append``
        made for each of its tokens, counting down. States left at 0 stay until a rebuild."""
        link, ln, count = self._link, self._len, self._count
        best, best_n, total = self._best, self._best_n, self._total
        w, n = 0, 0
        for t in tokens:
            v, _ = self._cap(w, n)  # the contexts t continued lose that continuation
            while v >= 0:
                total[v] -= 1
                if best[v] == t:
                    best_n[v] = -1  # its count went down: find the best again when asked
                v = link[v]
            w = self._get(w, t)
            if not w:
                raise ValueError("remove() of a sequence that was never added")
            n += 1
            if n > self._depth:
                n = self._depth
                while ln[link[w]] >= n:
                    w = link[w]
            v = w
            while v > 0:  # the suffixes it ended lose an occurrence
                count[v] -= 1
                v = link[v]

    def nbytes(self) -> int:
        """Approximate bytes held: the arrays, the transition dicts and their int objects."""
        arrays = (self._link, self._len, self._count, self._recent, self._tok, self._dst, self._best, self._best_n, self._total)
        held = sum(sys.getsizeof(a) for a in arrays) + sys.getsizeof(self._many)
        for d in self._many.values():
            held += sys.getsizeof(d) + 56 * len(d)  # keys and values past the small-int cache
        return held


class SuffixMemory:
    """Earlier outputs of one model (one vocabulary), at most ``max_tokens`` tokens of them.

    ``SuffixMemory.open(vocab_hash)`` loads the saved memory (or starts an empty one);
    ``SuffixMemory()`` is an unsaved one (tests, benchmarks). Callers that want no memory
    pass None to the drafter instead.
    """

    def __init__(
        self,
        vocab_hash: str = "",
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_depth: int = DEFAULT_MAX_DEPTH,
        path: Path | None = None,
    ) -> None:
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        self.vocab_hash = vocab_hash
        self.max_tokens = max_tokens
        self.max_depth = max_depth
        #: the file it loads from and saves to; None: kept in this process only
        self.path = path
        #: the line a UI can show once: why a file was ignored (None: nothing to say)
        self.note: str | None = None
        self.index = MemoryIndex(max_depth)
        #: bumped by every change, so a drafter knows its cursor into ``index`` went stale
        self.version = 0
        self._seqs: deque[array[int]] = deque()
        self._tokens = 0
        self._evicted = 0  # tokens taken out since the last rebuild: their states are dead
        self._dirty = False
        #: sequences added since the last load or save: what a save adds to the file
        self._fresh: deque[array[int]] = deque()
        self._fresh_tokens = 0
        self._cleared = False  # clear() since the last save: the file's sequences go too

    @classmethod
    def open(
        cls,
        vocab_hash: str,
        *,
        cache: Path | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> SuffixMemory:
        """The saved memory of ``vocab_hash`` under the user cache (empty if there is none)."""
        if not vocab_hash:
            raise ValueError("a draft memory needs the model's vocabulary hash")
        memory = cls(vocab_hash, max_tokens=max_tokens, max_depth=max_depth, path=memory_path(vocab_hash, cache))
        memory._load()
        return memory

    # -- contents ---------------------------------------------------------------------

    @property
    def sequences(self) -> int:
        return len(self._seqs)

    @property
    def tokens(self) -> int:
        return self._tokens

    @property
    def nodes(self) -> int:
        return self.index.nodes

    def contents(self) -> list[list[int]]:
        """The stored sequences, oldest first (what the file holds)."""
        return [seq.tolist() for seq in self._seqs]

    def stats(self) -> MemoryStats:
        held = self.index.nbytes() + sys.getsizeof(self._seqs) + sum(sys.getsizeof(s) for s in self._seqs)
        return MemoryStats(len(self._seqs), self._tokens, self.index.nodes, held, self.max_tokens)

    def add(self, tokens: Sequence[int]) -> None:
        """Remember one finished sequence; forget the oldest ones past ``max_tokens``."""
        seq = self._add(tokens)
        if seq is not None:
            self._fresh.append(seq)
            self._fresh_tokens += len(seq)
            while self._fresh_tokens > self.max_tokens:  # older ones would be cut from the file anyway
                self._fresh_tokens -= len(self._fresh.popleft())
        self._dirty = True

    def _add(self, tokens: Sequence[int]) -> array[int] | None:
        seq = array("i", tokens[-self.max_tokens:])  # a sequence longer than the cap: its end
        if len(seq) < 2:
            return None  # nothing followed anything
        self.version += 1
        self._seqs.append(seq)
        self._tokens += len(seq)
        self.index.extend(seq)
        self.index.end_sequence()
        while self._tokens > self.max_tokens:
            old = self._seqs.popleft()
            self.index.remove(old)
            self._tokens -= len(old)
            self._evicted += len(old)
        # rebuild once dead states could outnumber live ones: a rebuild costs what the stored
        # tokens cost to add, and comes after at least as many were evicted (amortised O(1))
        if self._evicted > self._tokens:
            self._rebuild()
        return seq

    def _rebuild(self) -> None:
        self.index = MemoryIndex.build(self._seqs, self.max_depth)
        self._evicted = 0
        self.version += 1

    def clear(self) -> None:
        self._seqs.clear()
        self._tokens = 0
        self._rebuild()
        self._fresh.clear()
        self._fresh_tokens = 0
        self._cleared = True
        self._dirty = True

    # -- the file ---------------------------------------------------------------------

    def _ignore(self, reason: str) -> None:
        assert self.path is not None
        try:
            aside = storage.move_aside(self.path, reason, say=False).name
        except Exception as exc:  # noqa: BLE001 - a file that cannot be moved is still only ignored
            aside = None
            reason = f"{reason}; cannot move it aside: {exc}"
        where = f"moved it aside to {aside}" if aside else "ignored it"
        self.note = f"spectui: the draft memory {self.path} {reason}; {where} and started an empty one"
        warnings.warn(self.note, DraftMemoryWarning, stacklevel=4)  # at open()'s caller

    def _read_file(self) -> list[list[int]] | None:
        """The sequences the file holds (None: no file); a file of this kind that cannot be
        used is moved aside (None), one of another kind refused (SpectuiError)."""
        assert self.path is not None
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.note = f"spectui: ignored the draft memory {self.path} (unreadable: {exc.strerror or exc})"
            warnings.warn(self.note, DraftMemoryWarning, stacklevel=4)
            return None
        if not data:
            return None
        if FORMAT.encode() not in data[:64]:
            if file_kinds.recognisable(data[:64]):  # a recording, a model, text: not ours to move
                raise file_kinds.refuse(self.path, _KIND, data[:64])
            self._ignore("is not a readable draft memory")  # bytes that say nothing: damage
            return None
        try:
            saved = msgspec.msgpack.decode(data, type=_File)
        except (msgspec.DecodeError, msgspec.ValidationError):
            try:  # another version's layout still says what it is
                head = msgspec.msgpack.decode(data, type=_Header)
            except (msgspec.DecodeError, msgspec.ValidationError):
                head = None
            if head is not None and head.format == FORMAT and head.version != FORMAT_VERSION:
                self._ignore(f"has format version {head.version}, this spectui reads {FORMAT_VERSION}")
            else:
                self._ignore("is corrupt or truncated")
            return None
        if saved.format != FORMAT:
            self._ignore("is not a draft memory")
            return None
        if saved.version != FORMAT_VERSION:
            self._ignore(f"has format version {saved.version}, this spectui reads {FORMAT_VERSION}")
            return None
        if saved.vocab_hash != self.vocab_hash:
            self._ignore(f"was written for vocabulary {saved.vocab_hash[:16]}, not {self.vocab_hash[:16]}")
            return None
        return saved.sequences

    def _newest(self, sequences: Sequence[_Seq]) -> list[_Seq]:
        """The newest of ``sequences`` that fit under this memory's cap, oldest first."""
        keep, total = 0, 0
        for seq in reversed(sequences):
            if total + len(seq) > self.max_tokens:
                break
            total += len(seq)
            keep += 1
        return [seq for seq in sequences[len(sequences) - keep:] if len(seq) >= 2]

    def _load(self) -> None:
        for seq in self._newest(self._read_file() or []):
            self._seqs.append(array("i", seq))
            self._tokens += len(seq)
        self._rebuild()

    def save(self) -> bool:
        """Add this process's new sequences to the file (or empty it after ``clear``); False if
        nothing was written (unchanged, no path, or the cache is not writable: it is a cache).

        Under a lock beside the file: the file is read again and this process's sequences
        since its last load or save are appended to what is there, so two processes sharing
        the memory take turns and neither drops the other's outputs."""
        if not self._dirty or self.path is None:
            return False
        try:
            storage.prepare_dir(self.path.parent, private=True, own=True)
            with storage.locked(self.path):
                base = [] if self._cleared else (self._read_file() or [])
                merged = self._newest([*base, *(seq.tolist() for seq in self._fresh)])
                payload = msgspec.msgpack.encode(_File(FORMAT, FORMAT_VERSION, self.vocab_hash, merged))
                storage.write_atomic(self.path, payload, _KIND, claimed=True)
        except OSError:
            return False
        self._fresh.clear()
        self._fresh_tokens = 0
        self._dirty = self._cleared = False
        return True


#: what may be at a memory's path (the file's own checks, in ``_read_file``, decide)
_KIND = file_kinds.Kind("a spectui draft memory", lambda path, head: file_kinds.MINE, private=True)
