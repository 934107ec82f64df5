"""Bytes from outside are bounded: a server's ``/metrics``, JSON and streams (in size and in
time), a GGUF's metadata; and the small storage and redaction holes around them. Each test
here failed before its fix. The property tests over the same parsers: test_untrusted_bytes.py."""

from __future__ import annotations

import os
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from spectui import storage
from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.metrics.prometheus import LLAMA_SERVER, MAX_DRAFT_POSITIONS, parse_exposition, read_counters
from spectui.models.gguf import MAX_ARRAY_ELEMENTS, read_gguf
from spectui.recording.redact import Redactor
from spectui.recording.schema import Header, Provenance, SettingOrigin
from spectui.recording.writer import RecordingWriter
from spectui.server.client import MAX_BODY_BYTES, Reply, ServerClient, ServerError, parse_server_url
from spectui.server.wire import MalformedChunk, error_message, parse_chunk
from spectui.watch.source import WatchTarget, poll

# -- /metrics ----------------------------------------------------------------------------------


def test_a_huge_draft_position_is_left_out_with_a_note_not_allocated():
    text = (
        "llamacpp:tokens_predicted_total 10\n"
        'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 5\n'
        'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="100000"} 1\n'
    )
    reading = read_counters(parse_exposition(text), LLAMA_SERVER, 0.0)
    assert reading.accepted_per_position == (5.0,)
    assert "100000" not in reading.note and str(MAX_DRAFT_POSITIONS) in reading.note and "left out" in reading.note


def test_positions_under_the_cap_read_as_before():
    rows = "".join(f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {i}\n' for i in range(0, 40, 3))
    reading = read_counters(parse_exposition(rows), LLAMA_SERVER, 0.0)
    assert len(reading.accepted_per_position) == 40 and reading.accepted_per_position[39] == 39 and not reading.note


# -- a server's JSON -----------------------------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


def test_deeply_nested_json_is_not_json_not_a_recursion_error():
    assert Reply(200, "OK", {}, DEEP).json() is None
    assert Reply(200, "OK", {}, '{"a":' * 70 + "1" + "}" * 70).json() is None  # past the 64 levels any server nests
    with pytest.raises(MalformedChunk, match="nested deeper"):
        parse_chunk(DEEP)
    assert error_message(DEEP).startswith("[[[")


def test_timings_keep_finite_numbers_only():
    chunk = parse_chunk('{"choices": [], "timings": {"draft_n": Infinity, "predicted_n": 1e999, "prompt_n": 3, "x": ' + "9" * 400 + "}}")
    assert chunk.timings == {"prompt_n": 3.0}


# -- a server's bytes in time and size: a raw socket server that misbehaves on purpose -------------


class RawServer:
    """Accepts one connection at a time and runs ``behave(conn)`` on it (after reading the request)."""

    def __init__(self, behave: Callable[[socket.socket], None]) -> None:
        self.behave = behave
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    part = conn.recv(65536)
                    if not part:
                        break
                    data += part
                try:
                    self.behave(conn)
                except OSError:
                    pass  # the client went away: what these tests want it to do

    def client(self, **kwargs: float) -> ServerClient:
        return ServerClient(parse_server_url(f"http://127.0.0.1:{self.port}"), **kwargs)

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.fixture
def raw_server():
    servers: list[RawServer] = []

    def make(behave: Callable[[socket.socket], None]) -> RawServer:
        servers.append(RawServer(behave))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def trickle(data: bytes, every_s: float = 0.1, stop_after_s: float = 6.0) -> Callable[[socket.socket], None]:
    def behave(conn: socket.socket) -> None:
        t0 = time.monotonic()
        for i in range(len(data)):
            if time.monotonic() - t0 > stop_after_s:
                return
            conn.sendall(data[i : i + 1])
            time.sleep(every_s)

    return behave


def test_a_get_whose_body_trickles_ends_at_its_deadline(raw_server):
    server = raw_server(lambda c: (c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n"), trickle(b"x" * 200)(c)))
    t0 = time.monotonic()
    with pytest.raises(ServerError, match="within 1.5 s"):
        server.client().get("/metrics", timeout_s=1.0)
    assert time.monotonic() - t0 < 3


def test_a_get_whose_headers_trickle_ends_at_its_deadline(raw_server):
    server = raw_server(trickle(b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"y" * 200 + b"\r\n\r\n"))
    t0 = time.monotonic()
    with pytest.raises(ServerError, match="within 1.5 s"):
        server.client().get("/metrics", timeout_s=1.0)
    assert time.monotonic() - t0 < 3


def test_the_watch_poller_flags_a_trickling_server_and_goes_on(raw_server):
    server = raw_server(lambda c: (c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n"), trickle(b"x" * 200)(c)))
    client = server.client(probe_timeout_s=1.0)
    t0 = time.monotonic()
    result = poll(client, WatchTarget(url=str(client.url), families=LLAMA_SERVER))
    assert result.reading is None and "within 1.5 s" in result.error
    assert time.monotonic() - t0 < 3


def test_a_stream_line_that_trickles_ends_at_the_read_timeout(raw_server):
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
    server = raw_server(lambda c: (c.sendall(head + b"data: {}\n\n"), trickle(b'data: {"choices": []}' * 10)(c)))
    stream = server.client(read_timeout_s=1.0).stream("/v1/completions", {"prompt": "x"})
    t0 = time.monotonic()
    assert next(stream).data == "{}"
    with pytest.raises(ServerError, match="no whole line"):
        next(stream)
    assert time.monotonic() - t0 < 3


def test_a_stream_ends_at_its_total_deadline(raw_server):
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
    server = raw_server(lambda c: (c.sendall(head), trickle(b": keepalive\n" * 100, every_s=0.01)(c)))
    t0 = time.monotonic()
    with pytest.raises(ServerError, match="more than 1 s"):
        list(server.client(read_timeout_s=5.0).stream("/v1/completions", {"prompt": "x"}, total_s=1.0))
    assert time.monotonic() - t0 < 3


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_body_over_the_cap_is_refused_not_cut(raw_server, framing):
    body = b"# " + b"x" * MAX_BODY_BYTES + b"\n"
    if framing == "length":
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    else:
        answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"
    server = raw_server(lambda c: c.sendall(answer))
    with pytest.raises(ServerError, match="larger than the 1 MiB"):
        server.client().get("/metrics")


def test_a_body_under_the_cap_reads_whole(raw_server):
    body = b"llamacpp:n_decode_total 7\n"
    server = raw_server(lambda c: c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body))
    reply = server.client().get("/metrics")
    assert reply.ok and reply.text == body.decode()


# -- GGUF ---------------------------------------------------------------------------------------


def gguf_bytes(kvs: list[tuple[str, int, bytes]], n_tensors: int = 0) -> bytes:
    """A GGUF v3 header with ``kvs`` as (key, value type, value bytes as the spec lays them)."""
    out = b"GGUF" + struct.pack("<IQQ", 3, n_tensors, len(kvs))
    for key, vtype, value in kvs:
        out += struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", vtype) + value
    return out


def gguf_string(text: str) -> bytes:
    return struct.pack("<Q", len(text.encode())) + text.encode()


def write(tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "m.gguf"
    path.write_bytes(data)
    return str(path)


def test_gguf_arrays_nested_deep_are_a_one_line_error(tmp_path):
    nested = struct.pack("<IQ", 9, 1) * 5000 + struct.pack("<IQ", 4, 0)  # arrays of arrays ... of u32
    with pytest.raises(SpectuiError, match="nested deeper"):
        read_gguf(write(tmp_path, gguf_bytes([("x", 9, nested)])))


def test_gguf_element_counts_are_bounded(tmp_path):
    n = MAX_ARRAY_ELEMENTS + 1
    data = gguf_bytes([("x", 9, struct.pack("<IQ", 0, n) + bytes(n))])  # a u8 array: a list 16x its bytes
    with pytest.raises(SpectuiError, match="array elements"):
        read_gguf(write(tmp_path, data))


def test_gguf_counts_past_the_file_are_refused_at_once(tmp_path):
    data = gguf_bytes([("x", 9, struct.pack("<IQ", 8, 1 << 40))])  # a trillion strings
    with pytest.raises(SpectuiError, match="corrupt GGUF"):
        read_gguf(write(tmp_path, data))
    with pytest.raises(SpectuiError, match="tensors"):
        read_gguf(write(tmp_path, gguf_bytes([], n_tensors=1 << 40)))


def _hostile_gguf(path: Path, n_tensors: int, n_dims: int) -> Path:
    """The issue's shape: a 4,194,303-element u64 array, then ``n_tensors`` tensors of ``n_dims``
    dimensions each, the whole at its real size (134 MB for a million tensors of 8 dims). Sparse
    on disk: the header and each tensor's entry are written, the array's zeros are a hole."""
    n = MAX_ARRAY_ELEMENTS - 1
    head = gguf_bytes([("hostile", 9, struct.pack("<IQ", 10, n))], n_tensors=n_tensors)
    entry_size = 8 + 8 + 4 + 8 * n_dims + 12
    with open(path, "wb") as f:
        f.write(head)
        f.seek(len(head) + 8 * n)  # the array's 32 MB of zeros: a hole
        block = bytearray()
        for i in range(min(n_tensors, 4096)):  # the first entries written, the rest a hole of the same size
            block += struct.pack("<Q", 8) + b"t%07d" % i + struct.pack("<I", n_dims) + struct.pack(f"<{n_dims}Q", *([1 << 20] * n_dims))
            block += struct.pack("<IQ", 0, 0)
        f.write(block)
        f.truncate(len(head) + 8 * n + entry_size * n_tensors)
    return path


@pytest.mark.parametrize("n_tensors", [1 << 20, 1 << 16], ids=["a-million-tensors", "within-the-tensor-cap"])
def test_a_hostile_gguf_costs_a_fraction_of_a_second_and_a_few_mb(tmp_path, n_tensors):
    """4,194,303 u64 elements and a million tensors of 8 dims passed the old reader at 12 s and
    1 GB. The whole header is walked for its shape before anything is built: a count past its
    bound, or a tensor of more dimensions than ggml has, is refused before the array's list is."""
    import tracemalloc

    path = _hostile_gguf(tmp_path / "hostile.gguf", n_tensors, 8)
    assert path.stat().st_size > (134_000_000 if n_tensors == 1 << 20 else 30 << 20)  # 134 MB: its real size, as the reader sees it
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(SpectuiError, match="tensors|dimensions") as err:
            read_gguf(path)
        seconds = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "\n" not in str(err.value)
    assert seconds < 0.5, seconds
    assert peak < 4 << 20, f"{peak / 1e6:.1f} MB"


@pytest.mark.parametrize(
    ("key", "vtype", "value"),
    [
        ("tokenizer.ggml.tokens", 4, struct.pack("<I", 7)),  # a u32 where a list of strings belongs
        ("general.file_type", 8, gguf_string("Q4_K_M")),  # a string where llama.cpp's number belongs
        ("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 8, 1) + gguf_string("n")),  # strings, not ints
        ("general.architecture", 9, struct.pack("<IQ", 4, 1) + struct.pack("<I", 1)),
    ],
)
def test_gguf_metadata_of_the_wrong_type_is_a_one_line_error(tmp_path, key, vtype, value):
    with pytest.raises(SpectuiError, match=f"corrupt GGUF file .*{key}") as err:
        read_gguf(write(tmp_path, gguf_bytes([(key, vtype, value)])))
    assert "\n" not in str(err.value)


def test_gguf_context_length_of_the_wrong_type_is_refused(tmp_path):
    data = gguf_bytes([("general.architecture", 8, gguf_string("llama")), ("llama.context_length", 8, gguf_string("4k"))])
    with pytest.raises(SpectuiError, match="llama.context_length is a string"):
        read_gguf(write(tmp_path, data))


# -- export --redact: the command's settings --------------------------------------------------------

SECRETS = ("my-private-prompt", "/home/alice/secret.txt", "/home/alice/chat.json", "alice@gpu-box", "collector.corp", "/home/alice/.config")


def test_redaction_labels_the_provenance_texts_and_places_and_the_node():
    settings = [
        SettingOrigin(option="prompt-name", value="my-private-prompt", origin="flag"),
        SettingOrigin(option="prompt-file", value="/home/alice/secret.txt", origin="flag"),
        SettingOrigin(option="messages", value="/home/alice/chat.json", origin="flag"),
        SettingOrigin(option="host", value="alice@gpu-box", origin="/home/alice/.config/spectui/config.toml:12"),
        SettingOrigin(option="otel-endpoint", value="http://collector.corp:4318", origin="flag"),
        SettingOrigin(option="k", value="4", origin="/home/alice/.config/spectui/config.toml:3"),
    ]
    config = RunConfig(prompt_name="my-private-prompt", prompt="what my prompt says")
    header = Header(config=config, node="alice@gpu-box", provenance=Provenance(command="run", profile="fast", settings=settings))
    redactor = Redactor()
    copy = redactor.header(header, quality_passed=None)
    encoded = msgspec.json.encode(copy).decode()
    for secret in SECRETS:
        assert secret not in encoded
    assert copy.provenance is not None
    by_option = {s.option: s for s in copy.provenance.settings}
    assert by_option["k"].value == "4" and by_option["k"].origin.endswith(":3")  # numbers and lines stay
    assert by_option["host"].value == copy.node  # one host, one label, wherever it shows
    assert by_option["prompt-name"].value == copy.config.prompt_name
    assert by_option["k"].origin.rpartition(":")[0] == by_option["host"].origin.rpartition(":")[0]  # one file, one label
    assert copy.provenance.command == "run"
    assert copy.provenance.profile == redactor.label("profile", "fast")  # a name a person chose: labelled


def test_a_shipped_prompt_keeps_its_name_in_the_provenance_too(monkeypatch):
    redactor = Redactor()
    monkeypatch.setattr(redactor, "_shipped", {"short-chat": "Hello"})
    provenance = Provenance(settings=[SettingOrigin(option="prompt-name", value="short-chat", origin="flag")])
    header = Header(config=RunConfig(prompt_name="short-chat", prompt="Hello"), provenance=provenance)
    copy = redactor.header(header, quality_passed=None)
    assert copy.provenance is not None and copy.provenance.settings[0].value == "short-chat" == copy.config.prompt_name


# -- storage ----------------------------------------------------------------------------------


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors through /proc")
def test_create_new_closes_its_descriptor_when_fchmod_fails(tmp_path, monkeypatch):
    def refuse(fd: int, mode: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "fchmod", refuse)
    before = open_fds()
    for i in range(5):
        with pytest.raises(PermissionError):
            storage.create_new(tmp_path / f"f{i}", private=True)
    assert open_fds() == before


def test_a_new_recording_fsyncs_its_folder_at_once(tmp_path, monkeypatch):
    synced: list[bool] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    writer = RecordingWriter(tmp_path / "run.spectui")
    assert True in synced  # before any close: a crash now keeps the file's name
    writer.close()


def test_pruning_skips_a_file_another_process_removed_meanwhile(tmp_path, monkeypatch):
    for i in range(5):
        (tmp_path / f"srv-{i}.log").write_text("x")
        os.utime(tmp_path / f"srv-{i}.log", (1000 + i, 1000 + i))
    real_glob = Path.glob

    def glob(self: Path, pattern: str):  # one listed file is gone by the time it is looked at
        return [*real_glob(self, pattern), self / "srv-gone.log"]

    monkeypatch.setattr(Path, "glob", glob)
    storage.prune_oldest(tmp_path, "srv-*.log", keep=2)
    assert sorted(p.name for p in real_glob(tmp_path, "*.log")) == ["srv-3.log", "srv-4.log"]
