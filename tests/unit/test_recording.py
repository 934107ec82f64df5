"""Recording writer and reader: round trips, torn tails, corruption, schema evolution, size,
and a writer killed with SIGKILL."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spectui.config import RunConfig
from spectui.drafting import CostAware, DraftConfig, Fixed, Model
from spectui.errors import SpectuiError
from spectui.paths import data_dir
from spectui.recording import reader
from spectui.recording.reader import RecordingError, iter_events, read_recording
from spectui.recording.schema import (
    Artifacts,
    End,
    Event,
    Header,
    HostInfo,
    MemorySample,
    ModelArtifacts,
    PolicyChange,
    Prefill,
    Step,
    TokenOrigin,
)
from spectui.recording.writer import MAGIC, RecordingWriter, default_recording_path

ROOT = Path(__file__).resolve().parents[2]


def _header(prompt_tokens: list[int] | None = None) -> Header:
    return Header(
        spectui_version="0.1.0",
        started_at="2026-11-21T11:30:02.123456Z",
        config=RunConfig(target="/models/t.gguf", mode="spec", prompt="Tell me a story", draft=DraftConfig(length=Fixed(k=6))),
        artifacts=Artifacts(
            target=ModelArtifacts(path="/models/t.gguf", name="t", sha256="a" * 64, size_bytes=10**8, quant="Q4_1"),
            draft=ModelArtifacts(path="/models/d.gguf", name="d"),
            runtime={"llama-cpp-python": "0.3.16"},
            offload={"n_threads": "2"},
            host=HostInfo(os="Linux", cpu_count=2, total_memory_bytes=32 * 2**30),
        ),
        prompt_text="<|im_start|>user\nTell me a story<|im_end|>\n",
        prompt_tokens=[1, 9690, 198, 42, 2] if prompt_tokens is None else prompt_tokens,
    )


def _every_kind() -> list[Event]:
    return [
        _header(),
        Prefill(n_tokens=5, t_start_us=10, t_end_us=15_000),
        Step([42], [TokenOrigin.AR], [b"Once"], [15_100], 0, 0, 0, 0, 9_000, 0),
        Step([7, 8, 9, 10], [1, 1, 1, 2], [b" upon", b" a", b"\xe2\x80", b"\x9c"], [30_000] * 4, 4, 4, 3, 2_000, 12_000, 4),
        MemorySample(1_000, 300 * 2**20, 20 * 2**30, 19 * 2**30, 0, 12_500, 0, 0.25, -1, -1, -1),
        PolicyChange(t_us=40_000, before="k=4", after="k=2", reason="acceptance fell below 40%"),
        End(t_us=50_000, reason="stop", n_tokens=5, error=""),
    ]


def _write(path: Path, events: list[Event]) -> list[int]:
    """Write ``events``; return the file offset where each frame ends."""
    ends = []
    with RecordingWriter(path) as w:
        for e in events:
            w.write(e)
            ends.append(w.size)
    return ends


# -- round trips ---------------------------------------------------------------------------


def test_round_trip_every_event_type(tmp_path: Path) -> None:
    events = _every_kind()
    ends = _write(tmp_path / "r.spectui", events)
    assert ends[-1] == (tmp_path / "r.spectui").stat().st_size
    rec = read_recording(tmp_path / "r.spectui")
    assert rec.events == events
    assert [type(e) for e in rec.events] == [type(e) for e in events]
    assert rec.header == events[0]
    assert rec.complete and not rec.truncated and rec.truncated_at is None
    assert list(iter_events(tmp_path / "r.spectui")) == events


def test_small_read_chunks_split_frames_and_the_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _every_kind() + [Step([i], [0], [b"x" * (i % 200)], [i], 0, 0, 0, 0, i, 0) for i in range(300)]
    _write(tmp_path / "r.spectui", events)
    for chunk in (1, 7, 64, 1000):
        monkeypatch.setattr(reader, "CHUNK_BYTES", chunk)
        assert read_recording(tmp_path / "r.spectui").events == events


def test_incomplete_recording_without_end(tmp_path: Path) -> None:
    events = _every_kind()[:-1]
    _write(tmp_path / "r.spectui", events)
    rec = read_recording(tmp_path / "r.spectui")
    assert rec.events == events and not rec.complete and not rec.truncated


# -- torn tails ----------------------------------------------------------------------------

_pieces = st.binary(min_size=0, max_size=8)


@st.composite
def _steps(draw: st.DrawFn) -> Step:
    n = draw(st.integers(1, 8))
    return Step(
        draw(st.lists(st.integers(0, 2**17), min_size=n, max_size=n)),
        draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)),
        draw(st.lists(_pieces, min_size=n, max_size=n)),
        draw(st.lists(st.integers(0, 2**40), min_size=n, max_size=n)),
        draw(st.integers(0, 64)),
        draw(st.integers(0, 64)),
        draw(st.integers(0, 64)),
        draw(st.integers(0, 10**7)),
        draw(st.integers(0, 10**7)),
        draw(st.integers(0, 64)),
    )


_memory = st.builds(
    MemorySample,
    st.integers(0, 2**40),
    st.integers(0, 2**40),
    st.integers(0, 2**40),
    st.integers(0, 2**40),
    st.integers(0, 2**40),
    st.integers(0, 2**30),
    st.integers(0, 2**30),
    st.floats(-1, 100),
)


@st.composite
def _recordings(draw: st.DrawFn) -> list[Event]:
    body = draw(st.lists(st.one_of(_steps(), _memory), min_size=1, max_size=12))
    tail: list[Event] = [End(t_us=draw(st.integers(0, 2**40)), reason="length", n_tokens=len(body))]
    if draw(st.booleans()):
        tail = []  # a run that was killed: the last records are steps or samples
    return [_header(prompt_tokens=draw(st.lists(st.integers(0, 2**17), max_size=300))), Prefill(n_tokens=3), *body, *tail]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_recordings())
def test_truncation_at_every_byte_of_the_last_two_records(events: list[Event]) -> None:
    with tempfile.TemporaryDirectory() as d:
        full, cut_path = Path(d) / "full.spectui", Path(d) / "cut.spectui"
        ends = _write(full, events)
        data = full.read_bytes()
        assert len(data) == ends[-1]
        for cut in range(ends[-3], len(data) + 1):
            cut_path.write_bytes(data[:cut])
            rec = read_recording(cut_path)
            n_complete = sum(1 for e in ends if e <= cut)
            assert rec.events == events[:n_complete]
            assert rec.truncated == (cut not in ends)
            assert rec.truncated_at == (None if cut in ends else ends[n_complete - 1])
            assert rec.complete == (type(events[-1]) is End and cut == len(data))
            assert list(iter_events(cut_path)) == events[:n_complete]


def test_cut_inside_the_header_is_an_error(tmp_path: Path) -> None:
    ends = _write(tmp_path / "r.spectui", _every_kind())
    data = (tmp_path / "r.spectui").read_bytes()
    for cut in (0, 3, len(MAGIC), len(MAGIC) + 1, ends[0] - 1):
        (tmp_path / "c.spectui").write_bytes(data[:cut])
        with pytest.raises(RecordingError, match="empty|cut off before its header"):
            read_recording(tmp_path / "c.spectui")


def test_zero_filled_tail_reads_as_truncation(tmp_path: Path) -> None:
    # What a power loss can leave: the size grew, the last data never landed.
    events = _every_kind()
    ends = _write(tmp_path / "r.spectui", events)
    data = (tmp_path / "r.spectui").read_bytes()
    (tmp_path / "z.spectui").write_bytes(data + bytes(100))
    rec = read_recording(tmp_path / "z.spectui")
    assert rec.events == events and rec.truncated_at == ends[-1]
    # ... or the last frame was half written before the zeros
    torn = data[: ends[-2] + 3] + bytes(ends[-1] - ends[-2] - 3 + 50)
    (tmp_path / "z.spectui").write_bytes(torn)
    rec = read_recording(tmp_path / "z.spectui")
    assert rec.events == events[:-1] and rec.truncated_at == ends[-2]


# -- corruption ----------------------------------------------------------------------------


def test_flipped_byte_in_a_middle_record_names_its_offset(tmp_path: Path) -> None:
    kinds = _every_kind()
    events = [kinds[0], *kinds[1:-1] * 5, kinds[-1]]
    ends = _write(tmp_path / "r.spectui", events)
    data = (tmp_path / "r.spectui").read_bytes()
    # Middle records, with more than 127 bytes after them: a damaged length byte that
    # reached past end of file would read as a torn tail, by the rule in reader.py.
    for index in range(2, len(events) // 2):
        start, end = ends[index - 1], ends[index]
        for offset in range(start, end):  # the length byte, payload and CRC alike
            bad = bytearray(data)
            bad[offset] ^= 0x55
            (tmp_path / "bad.spectui").write_bytes(bad)
            with pytest.raises(RecordingError, match=f"corrupt record at byte {start} of .*bad.spectui"):
                read_recording(tmp_path / "bad.spectui")
            # the events before the damage still stream
            got = []
            with pytest.raises(RecordingError):
                for e in iter_events(tmp_path / "bad.spectui"):
                    got.append(e)
            assert got == events[:index]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_recordings(), st.data())
def test_any_damage_is_a_recording_error_or_a_prefix(events: list[Event], data: st.DataObject) -> None:
    """One changed byte anywhere, maybe a cut too: never another exception, and what is
    read without an error is exactly a prefix of what was written."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r.spectui"
        _write(path, events)
        raw = bytearray(path.read_bytes())
        offset = data.draw(st.integers(0, len(raw) - 1))
        raw[offset] ^= data.draw(st.integers(1, 255))
        raw = raw[: data.draw(st.integers(offset + 1, len(raw)))]
        path.write_bytes(raw)
        try:
            rec = read_recording(path)
        except RecordingError:
            return
        assert rec.events == events[: len(rec.events)]


def test_bad_crc_on_the_last_record_is_corruption(tmp_path: Path) -> None:
    ends = _write(tmp_path / "r.spectui", _every_kind())
    bad = bytearray((tmp_path / "r.spectui").read_bytes())
    bad[-1] ^= 1
    (tmp_path / "bad.spectui").write_bytes(bad)
    with pytest.raises(RecordingError, match=f"corrupt record at byte {ends[-2]} "):
        read_recording(tmp_path / "bad.spectui")


def test_undecodable_record_with_a_good_crc_is_corruption(tmp_path: Path) -> None:
    class Unknown(msgspec.Struct, tag=9, array_like=True):
        x: int = 1

    events: list[Event] = _every_kind()
    ends = _write(tmp_path / "r.spectui", [*events[:3], Unknown(), *events[3:]])  # type: ignore[list-item]
    with pytest.raises(RecordingError, match=f"corrupt record at byte {ends[2]} of .* \\(undecodable: "):
        read_recording(tmp_path / "r.spectui")


def test_corrupt_header_is_not_mistaken_for_a_version(tmp_path: Path) -> None:
    _write(tmp_path / "r.spectui", _every_kind())
    bad = bytearray((tmp_path / "r.spectui").read_bytes())
    bad[len(MAGIC) + 30] ^= 0x55
    (tmp_path / "bad.spectui").write_bytes(bad)
    with pytest.raises(RecordingError, match=f"corrupt record at byte {len(MAGIC)} "):
        read_recording(tmp_path / "bad.spectui")


def test_not_a_recording(tmp_path: Path) -> None:
    (tmp_path / "x.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(100))
    with pytest.raises(RecordingError, match="not a spectui recording: .*x.gguf"):
        read_recording(tmp_path / "x.gguf")
    with pytest.raises(RecordingError, match="no such recording"):
        read_recording(tmp_path / "missing.spectui")
    (tmp_path / "empty.spectui").write_bytes(b"")
    with pytest.raises(RecordingError, match="is empty"):
        read_recording(tmp_path / "empty.spectui")
    assert issubclass(RecordingError, SpectuiError)


def test_first_record_must_be_a_header(tmp_path: Path) -> None:
    _write(tmp_path / "r.spectui", _every_kind()[1:])
    with pytest.raises(RecordingError, match="does not start with a header record .found a Prefill"):
        read_recording(tmp_path / "r.spectui")


# -- schema versions -----------------------------------------------------------------------


def test_newer_major_schema_is_refused(tmp_path: Path) -> None:
    _write(tmp_path / "r.spectui", [Header(schema_version="3.1"), End()])
    with pytest.raises(RecordingError, match=r"r.spectui was written with schema 3.1; this spectui reads 2.x — upgrade spectui"):
        read_recording(tmp_path / "r.spectui")

    class FutureHeader(msgspec.Struct, tag=1, kw_only=True):  # a header this schema cannot decode
        schema_version: str
        config: list[int]

    _write(tmp_path / "f.spectui", [FutureHeader(schema_version="3.0", config=[1]), End()])  # type: ignore[list-item]
    with pytest.raises(RecordingError, match="written with schema 3.0; .* upgrade spectui"):
        read_recording(tmp_path / "f.spectui")


def test_newer_minor_schema_with_extra_fields_loads(tmp_path: Path) -> None:
    class NewerHeader(msgspec.Struct, tag=1, kw_only=True):
        schema_version: str = "1.5"
        prompt_text: str = "hi"
        new_field: dict[str, int] = msgspec.field(default_factory=lambda: {"a": 1})

    class NewerStep(msgspec.Struct, tag=3, array_like=True):
        tokens: list[int]
        origins: list[int]
        pieces: list[bytes]
        t_us: list[int]
        k: int = 0
        drafted: int = 0
        accepted: int = 0
        draft_us: int = 0
        verify_us: int = 0
        draft_forwards: int = 0
        margins_milli: list[int] | None = None
        runner_up: list[int] | None = None
        new_count: int = 99

    _write(tmp_path / "r.spectui", [NewerHeader(), NewerStep([5], [0], [b"a"], [7], verify_us=3)])  # type: ignore[list-item]
    rec = read_recording(tmp_path / "r.spectui")
    assert rec.header.schema_version == "1.5" and rec.header.prompt_text == "hi"
    assert rec.events[1] == Step([5], [0], [b"a"], [7], verify_us=3)


def test_older_records_fill_in_defaults(tmp_path: Path) -> None:
    # Files written before a field existed: Step without its last field, a Header without
    # prompt_tokens. The current schema must read them, defaults filling in.
    class OldHeader(msgspec.Struct, tag=1, kw_only=True):
        schema_version: str = "1.0"
        spectui_version: str = "0.0.1"
        prompt_text: str = "old"

    class OldStep(msgspec.Struct, tag=3, array_like=True):
        tokens: list[int]
        origins: list[int]
        pieces: list[bytes]
        t_us: list[int]
        k: int = 0
        drafted: int = 0
        accepted: int = 0
        draft_us: int = 0
        verify_us: int = 0

    old = [OldHeader(), OldStep([1, 2], [1, 3], [b"a", b"b"], [10, 10], 1, 1, 1, 50, 60)]
    _write(tmp_path / "old.spectui", old)  # type: ignore[arg-type]
    rec = read_recording(tmp_path / "old.spectui")
    assert rec.header == Header(schema_version="1.0", spectui_version="0.0.1", prompt_text="old")
    assert rec.header.prompt_tokens == []
    assert rec.events[1] == Step([1, 2], [1, 3], [b"a", b"b"], [10, 10], 1, 1, 1, 50, 60, 0)


# -- size ----------------------------------------------------------------------------------


def test_bytes_per_token_of_a_realistic_ar_run(tmp_path: Path) -> None:
    """A 512-token greedy AR run (one token per step) at 50 tok/s, SmolLM2-135M on a laptop
    CPU: at most 48 bytes a token with header, prefill and end included, of which ~8 are the
    top-2 margin and runner-up id (schema 1.4). Memory samples at 4 Hz add ~70 bytes each
    (three float64 fields are 27 of them), ~6 bytes a token at this speed; they are measured
    and bounded separately."""
    rng = random.Random(1)
    pieces = [b" the", b" of", b"ing", b" a", b",", b".", b" model", b" decoding", b"\n"]
    header = _header(prompt_tokens=[rng.randrange(49152) for _ in range(60)])
    events: list[Event] = [header, Prefill(n_tokens=60, t_end_us=90_000)]
    samples: list[Event] = []
    t, next_sample, n = 90_000, 0, 512
    for _ in range(n):
        verify = 19_000 + rng.randrange(2_000)
        t += verify + 150
        margin = [int(rng.expovariate(1 / 3000))]  # thousandths of a logit, most under 10
        events.append(Step([rng.randrange(49152)], [0], [rng.choice(pieces)], [t], 0, 0, 0, 0, verify, 0, margin, [rng.randrange(49152)]))
        if t >= next_sample:
            samples.append(MemorySample(t, 350 * 2**20, 20 * 2**30, 20 * 2**30, 2**30, 0, 0, 0.0))
            next_sample += 250_000
    events.append(End(t_us=t, n_tokens=n))
    size = _write(tmp_path / "ar.spectui", events)[-1]
    assert size / n < 48, f"{size / n:.1f} bytes per token"
    steps_only = _write(tmp_path / "steps.spectui", [header, *(e for e in events if type(e) is Step)])
    assert (steps_only[-1] - steps_only[0]) / n < 44  # ~42: 37 bytes of msgpack + 5 of framing
    with_memory = _write(tmp_path / "mem.spectui", events + samples)[-1]
    assert (with_memory - size) / len(samples) <= 72  # 70 here
    assert with_memory / n < 54


# -- crash safety --------------------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import sys
    from spectui.recording.schema import Header, MemorySample, Step
    from spectui.recording.writer import RecordingWriter
    w = RecordingWriter(sys.argv[1])
    w.write(Header(prompt_text="kill me"))
    print("ready", flush=True)
    i = 0
    while True:
        w.write(Step([i], [0], [b"tok%d" % i], [i], 0, 0, 0, 0, i, 0))
        if i % 1000 == 0:
            w.write(MemorySample(i, 1, 2, 3))
        i += 1
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkilled_writer_leaves_every_complete_record(tmp_path: Path) -> None:
    path = tmp_path / "killed.spectui"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(path)], stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"ready"
        time.sleep(0.5)
        child.send_signal(signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    rec = read_recording(path)
    assert rec.header.prompt_text == "kill me"
    steps = [e for e in rec.events if type(e) is Step]
    assert len(steps) > 100
    assert [s.tokens[0] for s in steps] == list(range(len(steps)))  # nothing lost in between
    assert steps[-1].pieces == [b"tok%d" % (len(steps) - 1)]
    assert not rec.complete
    size = path.stat().st_size
    assert rec.truncated_at is None or rec.truncated_at < size


# -- writer and file names -----------------------------------------------------------------


def test_writer_never_overwrites_a_recording(tmp_path: Path) -> None:
    _write(tmp_path / "r.spectui", _every_kind())
    with pytest.raises(SpectuiError, match="already exists"):
        RecordingWriter(tmp_path / "r.spectui")
    (tmp_path / "placeholder.spectui").touch()  # an empty file is fine to fill
    _write(tmp_path / "placeholder.spectui", _every_kind())
    assert read_recording(tmp_path / "placeholder.spectui").events == _every_kind()
    _write(tmp_path / "new" / "dirs" / "r.spectui", _every_kind())  # parents are created


def test_default_recording_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime as dt

    now = dt.datetime(2026, 11, 21, 11, 30, 2)
    p = default_recording_path(RunConfig(mode="spec"), tmp_path, now=now)
    # the embedded model by the name every screen gives it (format.model_name); K cost-aware 1..16
    assert p == tmp_path / "2026-11-21T11-30-02_spec-ngram-k1-16_SmolLM2-135M-Instruct.Q4_1.spectui"
    p.write_bytes(b"x")
    assert default_recording_path(RunConfig(mode="spec"), tmp_path, now=now).name.endswith("_SmolLM2-135M-Instruct.Q4_1-2.spectui")
    ar = default_recording_path(RunConfig(mode="ar", target="/m/Qwen 2.5:7B.Q4_K_M.gguf"), tmp_path, now=now)
    assert ar.name == "2026-11-21T11-30-02_ar_Qwen-2.5-7B.Q4_K_M.spectui"
    adaptive = RunConfig(draft=DraftConfig(drafter=Model(path="/m/draft.gguf"), length=CostAware(k_min=2, k_max=8)))
    assert "_spec-draft-k2-8_" in default_recording_path(adaptive, tmp_path, now=now).name

    monkeypatch.setenv("SPECTUI_RECORDINGS", str(tmp_path / "env"))
    assert default_recording_path(RunConfig()).parent == tmp_path / "env"
    monkeypatch.delenv("SPECTUI_RECORDINGS")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_recording_path(RunConfig()).parent == data_dir() / "recordings"
    if sys.platform.startswith("linux"):  # platformdirs honours XDG_DATA_HOME on Linux only
        assert data_dir() == tmp_path / "data" / "spectui"
    # a recordings/ folder in the current directory (a checkout's tracked samples) is not used
    (tmp_path / "recordings").mkdir()
    assert default_recording_path(RunConfig()).parent == data_dir() / "recordings"
