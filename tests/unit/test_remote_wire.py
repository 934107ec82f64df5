"""The node channel's framing (``spectui.remote.wire``): the recorder's frames, read as they arrive."""

from __future__ import annotations

import os
import threading

import pytest

from spectui.recording.reader import read_recording
from spectui.recording.schema import End, Header, MemorySample, Prefill, Step
from spectui.recording.writer import MAGIC, RecordingWriter
from spectui.remote.wire import BrokenStream, FrameReader, Hello, Reply, frame

EVENTS = [
    Header(prompt_text="hi", prompt_tokens=[1, 2, 3], node="mini"),
    Prefill(n_tokens=3, t_start_us=1, t_end_us=900),
    Step([7, 8], [1, 3], [b"a", b"\xe2\x82"], [1000, 1001], k=4, drafted=4, accepted=1),
    MemorySample(1200, 1 << 20, 2 << 30, 1 << 30),
    Step([9], [0], [b"\xac" * 300], [1500]),  # a piece longer than a one-byte length
    End(t_us=1600, reason="length", n_tokens=3),
]


def test_the_stream_is_a_recording_byte_for_byte(tmp_path):
    """What the node sends for a run is what the recorder writes: the same reader reads it."""
    streamed = MAGIC + b"".join(frame(e) for e in EVENTS)
    path = tmp_path / "streamed.spectui"
    path.write_bytes(streamed)
    assert read_recording(path).events == EVENTS
    written = tmp_path / "written.spectui"
    with RecordingWriter(written) as w:
        for e in EVENTS:
            w.write(e)
    assert written.read_bytes() == streamed


def test_records_arrive_as_their_frames_complete():
    r, w = os.pipe()
    reader = FrameReader(r)
    data = MAGIC + b"".join(frame(e) for e in [Hello(spectui_version="x"), *EVENTS, Reply(ok=False, error="no")])
    got = []
    # byte by byte: every record is read exactly when its last byte lands, never before
    writer = threading.Thread(target=lambda: [os.write(w, data[i : i + 1]) for i in range(len(data))] and os.close(w))
    writer.start()
    while (record := reader.next(timeout=10)) is not None:
        got.append(record)
    writer.join()
    os.close(r)
    assert got[0] == Hello(spectui_version="x") and got[1:-1] == EVENTS and got[-1] == Reply(ok=False, error="no")


def test_a_stream_cut_inside_a_frame_ends_and_a_damaged_one_is_refused():
    whole = MAGIC + frame(EVENTS[0]) + frame(EVENTS[1])
    r, w = os.pipe()
    os.write(w, whole[:-3])
    os.close(w)
    reader = FrameReader(r)
    assert reader.next(timeout=5) == EVENTS[0] and reader.next(timeout=5) is None  # the torn tail: the end
    os.close(r)
    damaged = bytearray(whole)
    damaged[-6] ^= 0xFF
    r, w = os.pipe()
    os.write(w, bytes(damaged))
    os.close(w)
    reader = FrameReader(r)
    assert reader.next(timeout=5) == EVENTS[0]
    with pytest.raises(BrokenStream):
        reader.next(timeout=5)
    os.close(r)


def test_something_else_on_the_channel_is_not_a_stream():
    r, w = os.pipe()
    os.write(w, b"Welcome to the node!\n")
    os.close(w)
    with pytest.raises(BrokenStream):
        FrameReader(r).next(timeout=5)
    os.close(r)
