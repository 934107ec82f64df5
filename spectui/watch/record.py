"""A watch in the recording format: a ``Header`` whose ``watch`` names the server, one
``WatchReading`` per ``/metrics`` read, an ``End`` when the watch ends.

The writer is ``spectui.recording.writer``'s: every reading is flushed as it is written, so a
watch killed at any instant keeps every complete reading (its file then has no ``End``, and
reads as incomplete, not damaged). The readings hold the counters as the server printed them;
reading a recording back folds them through the same ``WatchCore`` as the live watch, so a
replay, ``spectui report`` and ``spectui history`` give the live watch's figures.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spectui.errors import SpectuiError
from spectui.metrics.prometheus import FAMILIES, CounterReading, MetricFamilies
from spectui.metrics.watch_rates import WatchTotals
from spectui.recording.reader import Recording
from spectui.recording.schema import End, FinishReason, Header
from spectui.recording.watch_records import WatchInfo, WatchReading, WatchSlots
from spectui.recording.writer import RecordingWriter, free_path, recordings_dir
from spectui.watch.sampler import WatchCore, WatchSample
from spectui.watch.source import LiveSlots, Poll, WatchTarget

#: the counters a reading records, by ``CounterReading`` field (the same names in ``WatchReading``)
COUNTER_FIELDS = (
    "generated_tokens", "prompt_tokens", "requests_running", "requests_waiting", "requests_finished", "drafts",
    "draft_tokens", "accepted_tokens", "accept_rate_gauge", "accept_length_gauge", "verify_calls", "decode_calls",
    "started_at",
)  # fmt: skip


def watch_info(target: WatchTarget, interval_s: float, *, process: str = "", process_note: str = "", energy: str = "") -> WatchInfo:
    fam = target.families
    return WatchInfo(
        url=target.url, server=fam.server, identity=dict(target.identity), interval_s=interval_s, metric_source=fam.source,
        counts_at_request_end=fam.counts_at_request_end, not_reported=dict(fam.not_reported), process=process,
        process_note=process_note, energy=energy,
    )  # fmt: skip


def watch_header(info: WatchInfo, *, node: str = "") -> Header:
    """The header of a watch's recording: the server, this machine (the watcher), the time."""
    from spectui import __version__
    from spectui.models.artifacts import host_info

    header = Header(spectui_version=__version__, started_at=dt.datetime.now(dt.timezone.utc).isoformat(), node=node, watch=info)
    header.artifacts.host = host_info()
    return header


def reading_record(sample: WatchSample) -> WatchReading:
    """One sample as its record: the raw counters, the slots, the process."""
    joules = None if sample.joules is None else round(sample.joules, 3)
    record = WatchReading(t_us=round(sample.t_s * 1e6), error=sample.error, process=sample.process, joules=joules)
    r = sample.reading
    if r is not None:
        for name in COUNTER_FIELDS:
            setattr(record, name, getattr(r, name))
        record.accepted_per_position = list(r.accepted_per_position)
    live = sample.live
    if live is not None:
        record.slots = WatchSlots(slots=live.slots, processing=live.processing, speculative=live.speculative,
                                  decoded_in_flight=live.decoded_in_flight)  # fmt: skip
    return record


def poll_of(record: WatchReading, server: str) -> Poll:
    """A recorded (or streamed) reading as the poll it was."""
    live = None
    if record.slots is not None:
        s = record.slots
        live = LiveSlots(slots=s.slots, processing=s.processing, speculative=s.speculative, decoded_in_flight=s.decoded_in_flight)
    if record.error:  # a failed read: no counters
        return Poll(None, live, record.error)
    values = {name: getattr(record, name) for name in COUNTER_FIELDS}
    reading = CounterReading(server=server, t_s=record.t_us / 1e6, accepted_per_position=tuple(record.accepted_per_position), **values)
    return Poll(reading, live, record.error)


@dataclass
class WatchRecording:
    """A watch read back: the server, every sample as the live watch had it, the totals."""

    path: str
    info: WatchInfo
    header: Header
    samples: list[WatchSample]
    totals: WatchTotals
    end: End | None
    truncated: bool

    @property
    def failed(self) -> int:
        return sum(1 for s in self.samples if s.error)


def families_of(info: WatchInfo) -> MetricFamilies:
    """The metric families a recorded watch was read with (by the server's name)."""
    found = next((f for f in FAMILIES if f.server == info.server), None)
    if found is None:
        raise SpectuiError(f"a watch of {info.server!r}, a server this spectui does not read")
    return found


def target_of(info: WatchInfo) -> WatchTarget:
    """The server a recorded (or streamed) watch names, as ``open_watch`` found it."""
    return WatchTarget(url=info.url, families=families_of(info), identity=dict(info.identity))


def is_watch(header: Header) -> bool:
    return header.watch is not None


def replay_samples(records: Sequence[WatchReading], server: str) -> tuple[list[WatchSample], WatchTotals]:
    """The recorded readings folded as the live watch folded them."""
    core = WatchCore(0.0)
    samples = [core.take(poll_of(r, server), r.t_us / 1e6, r.process, r.joules) for r in records]
    return samples, core.fold.totals


def read_watch(rec: Recording) -> WatchRecording:
    """A recording that is a watch, as samples; ``SpectuiError`` for a session's."""
    info = rec.header.watch
    if info is None:
        raise SpectuiError(f"{rec.path} is a session's recording, not a watch's")
    records = [e for e in rec.events if type(e) is WatchReading]
    samples, totals = replay_samples(records, info.server)
    end = next((e for e in reversed(rec.events) if type(e) is End), None)
    return WatchRecording(str(rec.path), info, rec.header, samples, totals, end, rec.truncated)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-.")[:40] or "x"


def default_watch_path(info: WatchInfo, directory: str | os.PathLike[str] | None = None) -> Path:
    """``recordings/2026-11-21T11-30-02_watch-llama-server_127.0.0.1-8080.spectui``: local time,
    never an existing file's name."""
    from urllib.parse import urlsplit

    parts = urlsplit(info.url)
    where = f"{parts.hostname or 'server'}-{parts.port or ''}".rstrip("-")
    stamp = dt.datetime.now().strftime("%Y-%m-%dT%H-%M-%S")
    folder = Path(directory) if directory is not None else recordings_dir()
    return free_path(folder, f"{stamp}_watch-{_slug(info.server)}_{_slug(where)}")


class WatchRecorder:
    """Writes a watch as it goes: the header at once, a record per sample (called on the
    sampler's thread: the disk write never waits on a screen), the ``End`` at ``close``."""

    def __init__(self, path: str | os.PathLike[str], header: Header) -> None:
        self.writer = RecordingWriter(path)
        self.path = self.writer.path
        self.writer.write(header)
        self.samples = 0
        self._last_t_us = 0
        self.error = ""  # why writing stopped (a full disk): the watch goes on, unrecorded

    def write(self, sample: WatchSample) -> None:
        if self.error:
            return
        record = reading_record(sample)
        try:
            self.writer.write(record)
        except SpectuiError as exc:
            self.error = str(exc)
            return
        self.samples += 1
        self._last_t_us = record.t_us

    def close(self, totals: WatchTotals | None = None, reason: FinishReason = "interrupted") -> None:
        """The ``End`` (its ``n_tokens``: the tokens the server generated during the watch), then
        the file closed and synced. Safe to call twice."""
        if self.writer.closed:
            return
        if not self.error:
            generated = int(totals.generated_tokens or 0) if totals is not None else 0
            try:
                self.writer.write(End(t_us=self._last_t_us, reason=reason, n_tokens=generated))
            except SpectuiError as exc:
                self.error = str(exc)
        self.writer.close()
