"""Every parser that reads bytes from outside, fed what hypothesis makes up: GGUF headers,
server-sent events and completion chunks, Prometheus text, recordings. Whatever comes in, the
answer is a value or the parser's own one-line error, never another exception, in bounded
time and memory. Few examples each, with a deadline: these run in the fast tier in seconds.
(The config files' and workload files' property tests are theirs, elsewhere.)"""

from __future__ import annotations

import json
import os
import struct
import tracemalloc
import zlib
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from spectui.errors import SpectuiError
from spectui.metrics.prometheus import FAMILIES, MAX_DRAFT_POSITIONS, MalformedMetrics, parse_exposition, read_counters
from spectui.models.gguf import GGUFInfo, read_gguf
from spectui.recording.reader import read_recording
from spectui.recording.writer import CRC_SEED, MAGIC, encode_varint
from spectui.server.client import ServerError, SSEParser
from spectui.server.wire import Chunk, MalformedChunk, acceptance, error_message, parse_chunk, parse_prometheus
from tests.unit.test_trust_bounds import RawServer

REPO = Path(__file__).resolve().parents[2]
#: More examples for a deeper search now and then: SPECTUI_FUZZ_EXAMPLES=5000
EXAMPLES = int(os.environ.get("SPECTUI_FUZZ_EXAMPLES", "60"))
FAST = settings(max_examples=EXAMPLES, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
#: Memory one reading of a small input may take: a parser that builds from a count it read
#: (rather than from bytes it has) goes far past it.
PEAK_BYTES = 32 << 20


def one_line(exc: BaseException) -> None:
    text = str(exc)
    assert text and "\n" not in text and "Traceback" not in text


class bounded_memory:
    def __enter__(self) -> None:
        tracemalloc.start()

    def __exit__(self, *exc: object) -> None:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < PEAK_BYTES, f"{peak} bytes at peak"


# -- GGUF ---------------------------------------------------------------------------------------

U64 = st.one_of(st.integers(0, 40), st.integers(0, 2**64 - 1), st.sampled_from([2**32, 2**40, 2**63, 2**64 - 1]))
VTYPE = st.integers(0, 14)


@st.composite
def gguf_value(draw, depth: int = 0) -> bytes:
    """The bytes of a value of a random type, with counts that may lie."""
    vtype = draw(VTYPE)
    out = struct.pack("<I", vtype)
    if vtype == 8:
        text = draw(st.binary(max_size=20))
        return out + struct.pack("<Q", draw(st.sampled_from([len(text), len(text) + 1, 2**63]))) + text
    if vtype == 9:
        etype = draw(VTYPE)
        count = draw(U64)
        items = draw(st.binary(max_size=64)) if depth > 2 else b"".join(draw(st.lists(gguf_value(depth + 1), max_size=3)))
        return out + struct.pack("<IQ", etype, count) + items
    return out + draw(st.binary(min_size=0, max_size=8))


@st.composite
def gguf_file(draw) -> bytes:
    keys = draw(
        st.lists(
            st.sampled_from(["general.architecture", "general.file_type", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                             "tokenizer.chat_template", "llama.context_length", "x"]),
            max_size=5,
        )
    )  # fmt: skip
    body = b"".join(struct.pack("<Q", len(k)) + k.encode() + draw(gguf_value()) for k in keys)
    n_kv = draw(st.sampled_from([len(keys), len(keys) + 1, 2**64 - 1]))
    version = draw(st.sampled_from([3, 3, 2, 1, 2**32 - 1]))
    return b"GGUF" + struct.pack("<IQQ", version, draw(U64), n_kv) + body + draw(st.binary(max_size=64))


def read_all(info: GGUFInfo) -> None:
    """What the rest of spectui asks of a file read: none of it may raise."""
    info.architecture, info.name, info.quant, info.n_ctx_train, info.chat_template, info.n_params  # noqa: B018
    info.vocab_sha256()
    info.chat_template_sha256()


def one_key(key: str, value: bytes) -> bytes:
    return b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, len(key)) + key.encode() + value


@FAST
@given(data=st.one_of(gguf_file(), st.binary(max_size=300).map(lambda b: b"GGUF" + b)))
@example(data=one_key("x", struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 5000 + struct.pack("<IQ", 4, 0)))  # nested deep
@example(data=one_key("x", struct.pack("<IIQ", 9, 0, 5_000_000) + bytes(5_000_000)))  # a list 16x its bytes
@example(data=one_key("tokenizer.ggml.tokens", struct.pack("<II", 4, 7)))  # a number where a list belongs
@example(data=one_key("general.file_type", struct.pack("<IQ", 8, 2) + b"Q4"))
def test_gguf_headers(tmp_path, data):
    path = tmp_path / "m.gguf"
    path.write_bytes(data)
    with bounded_memory():
        try:
            info = read_gguf(path)
        except SpectuiError as exc:
            one_line(exc)
            return
        read_all(info)


# -- server-sent events and completion chunks ---------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)
CHUNKISH = st.fixed_dictionaries(
    {},
    optional={
        "choices": st.one_of(JSON, st.lists(st.fixed_dictionaries({}, optional={
            "delta": JSON | st.fixed_dictionaries({}, optional={"content": JSON, "tool_calls": JSON, "reasoning": JSON}),
            "text": JSON, "finish_reason": JSON,
            "logprobs": JSON | st.fixed_dictionaries({}, optional={"content": st.lists(JSON | st.fixed_dictionaries(
                {}, optional={"id": JSON, "token": JSON, "logprob": JSON, "top_logprobs": JSON}), max_size=3)}),
        }), max_size=2)),
        "usage": JSON, "timings": JSON, "tokens": JSON, "error": JSON, "system_fingerprint": JSON,
    },
)  # fmt: skip


@FAST
@given(payload=st.one_of(st.text(max_size=200), JSON.map(json.dumps), CHUNKISH.map(json.dumps)))
@example(payload="[" * 100_000)
@example(payload='{"choices": [{"delta": {"tool_calls": 10}}]}')
@example(payload='{"error": [{"loc": 3}, null]}')
@example(payload='{"choices": [], "timings": {"draft_n": Infinity, "draft_n_accepted": NaN}}')
def test_completion_chunks(payload):
    try:
        chunk = parse_chunk(payload)
    except MalformedChunk as exc:
        one_line(exc)
        return
    assert isinstance(chunk, Chunk) and isinstance(chunk.text, str)
    acceptance("llama-server", chunk.timings, {})  # what the session makes of the timings
    message = error_message(payload)
    assert "\n" not in message and len(message) <= 303


@FAST
@given(lines=st.lists(st.text(max_size=40), max_size=30))
def test_sse_lines(lines):
    parser = SSEParser()
    events = [parser.feed(line, i) for i, line in enumerate(lines)] + [parser.finish()]
    for event in filter(None, events):
        assert event.kind in ("data", "error") and isinstance(event.data, str)


@pytest.fixture(scope="module")
def sse_server():
    """A server that answers a completion with the bytes the test sets."""
    answer = {"body": b""}
    server = RawServer(lambda conn: conn.sendall(answer["body"]))
    yield server, answer
    server.close()


@settings(FAST, max_examples=max(EXAMPLES // 2, 1))
@given(body=st.binary(max_size=300) | st.lists(st.sampled_from([b"data: ", b"{}", b"\n", b"\r\n", b": ping", b"error: x", b"data: [DONE]"]),
                                               max_size=20).map(b"".join))  # fmt: skip
def test_sse_streams_over_http(sse_server, body):
    server, answer = sse_server
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    answer["body"] = head + body
    try:
        for event in server.client(read_timeout_s=2.0).stream("/v1/completions", {"prompt": "x"}):
            assert event.kind in ("data", "error")
    except ServerError as exc:
        one_line(exc)


# -- Prometheus text ------------------------------------------------------------------------------

NAMES = st.sampled_from([f.accepted_per_position for f in FAMILIES if f.accepted_per_position] + ["llamacpp:tokens_predicted_total",
                                                                                                   "vllm:num_requests_running", "x"])
LABEL = st.one_of(st.integers(-5, 10**12).map(str), st.text(max_size=6).filter(lambda t: '"' not in t and "\\" not in t and "\n" not in t))
VALUE = st.one_of(st.floats(allow_nan=True).map(repr), st.sampled_from(["NaN", "+Inf", "-Inf", "1e999", "x"]))
SAMPLE = st.builds(lambda n, p, v: f'{n}{{position="{p}"}} {v}', NAMES, LABEL, VALUE) | st.builds(lambda n, v: f"{n} {v}", NAMES, VALUE)


@FAST
@given(text=st.one_of(st.text(max_size=300), st.lists(SAMPLE | st.text(max_size=30), max_size=20).map("\n".join)))
@example(text='llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="10000000"} 1')
def test_prometheus_text(text):
    assert isinstance(parse_prometheus(text), dict)
    with bounded_memory():
        try:
            exposition = parse_exposition(text)
        except MalformedMetrics as exc:
            one_line(exc)
            return
        for families in FAMILIES:
            reading = read_counters(exposition, families, 0.0)
            assert len(reading.accepted_per_position) <= MAX_DRAFT_POSITIONS


# -- recordings -----------------------------------------------------------------------------------

SAMPLE_RECORDING = (REPO / "tests/data/fixed-session.spectui").read_bytes()


def frame(payload: bytes) -> bytes:
    body = encode_varint(len(payload)) + payload
    return body + zlib.crc32(body, CRC_SEED).to_bytes(4, "little")


@st.composite
def damaged(draw) -> bytes:
    data = bytearray(SAMPLE_RECORDING)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data) - 1))
        how = draw(st.sampled_from(["flip", "cut", "insert", "zero"]))
        if how == "flip":
            data[at] ^= draw(st.integers(1, 255))
        elif how == "cut":
            del data[at:]
        elif how == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        else:
            data[at:] = bytes(len(data) - at)
        if not data:
            break
    return bytes(data)


def header_frame() -> bytes:
    """The sample's magic and first frame (its header), as written."""
    pos, length, shift = len(MAGIC), 0, 0
    while True:
        byte = SAMPLE_RECORDING[pos]
        length |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return SAMPLE_RECORDING[: pos + length + 4]


#: Frames whose checksums are right around payloads that are not the schema's (the reader's
#: decoding has to refuse them, the CRC cannot).
MSGPACK = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=8) | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6) | st.integers(0, 3), inner, max_size=4),
    max_leaves=20,
).map(msgspec.msgpack.encode)
FRAMED = st.lists(st.binary(min_size=1, max_size=40) | MSGPACK, min_size=1, max_size=5).map(
    lambda payloads: header_frame() + b"".join(map(frame, payloads))
)


@FAST
@given(data=st.one_of(damaged(), FRAMED, st.binary(max_size=200), st.binary(max_size=200).map(lambda b: MAGIC + b)))
def test_recordings(tmp_path, data):
    assume(data)
    path = tmp_path / "r.spectui"
    path.write_bytes(data)
    with bounded_memory():
        try:
            rec = read_recording(path)
        except SpectuiError as exc:
            one_line(exc)
            return
    assert rec.events and rec.events[0] is rec.header


# -- bytes from outside on their way to a terminal ------------------------------------------------

#: What a hostile server or file sends first: set the window title, ring, clear the screen, then
#: a bidirectional override and a byte that was not UTF-8.
HOSTILE = "\x1b]0;TITLE\x07\x1b[2J\u202e\udcff"
#: Text with control characters, escapes and lone surrogates among ordinary letters.
outside_text = st.text(
    alphabet=st.one_of(st.characters(max_codepoint=0x9F), st.sampled_from(["\x1b", "\x07", "\x9b", "\u202e", "\u2028", "\udcff", "é"])),
    max_size=60,
)


def reaches_the_terminal_as_letters(out: str, *, lines: bool = False) -> None:
    """Nothing in ``out`` is a control character (newlines too, unless ``lines``)."""
    bad = [ch for ch in out if not (ch.isprintable() or (lines and ch == "\n"))]
    assert not bad, f"{bad!r} reached the terminal raw in {out!r}"


def _printers(text: str, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """What each printer of outside text writes when handed ``text``."""
    import warnings

    from spectui.cli import _show_warning
    from spectui.cli.run import engine_failed
    from spectui.format import terminal_safe, text_table
    from spectui.recording.schema import End
    from spectui.storage import StorageNotice

    out = {"terminal_safe": terminal_safe(text), "text_table": text_table(["name", "value"], [[text, text]])}
    try:
        parse_exposition(text + "\nnot prometheus {{{\n")
    except MalformedMetrics as exc:
        out["metrics error"] = str(exc)
    capsys.readouterr()
    _show_warning(text, StorageNotice, "f", 1)  # spectui's own warnings: one line on stderr
    engine_failed([End(reason="error", error=text)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        printed = capsys.readouterr()
    out["warning and error lines"] = printed.out + printed.err
    return out


@FAST
@given(text=outside_text)
@example(text=HOSTILE)
def test_every_printer_escapes_control_characters(text, capsys):
    for name, out in _printers(text, capsys).items():
        try:
            reaches_the_terminal_as_letters(out, lines=name in ("text_table", "warning and error lines"))
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


def test_a_hostile_metrics_server_reaches_stderr_escaped(tmp_path, monkeypatch, capsys):
    """A real server on 127.0.0.1 whose /metrics body starts with a title change and a screen
    clear, watched with the command a person runs: the error line names the bytes as letters."""
    from spectui.cli import main

    body = (HOSTILE + "# TYPE x counter\nnot prometheus {{{\n").encode("utf-8", "surrogateescape")

    def behave(conn) -> None:  # noqa: ANN001 - a socket
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)

    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.chdir(tmp_path)
    server = RawServer(behave)
    try:
        rc = main(["watch", f"http://127.0.0.1:{server.port}", "--headless", "--samples", "1", "--no-record"])
    finally:
        server.close()
    printed = capsys.readouterr()
    assert rc != 0
    assert "/metrics is not Prometheus text" in printed.err and "\\x1b]0;TITLE\\x07\\x1b[2J" in printed.err, printed.err
    reaches_the_terminal_as_letters(printed.out + printed.err, lines=True)


def test_config_show_prints_a_value_with_escapes_as_letters(tmp_path, monkeypatch, capsys):
    from spectui.cli import main

    config = tmp_path / "config" / "spectui"
    config.mkdir(parents=True)
    (config / "config.toml").write_text('[defaults]\nprompt-name = "\\u001b]0;TITLE\\u0007\\u001b[2J\\u202e"\n')
    (config / "config.toml").chmod(0o600)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(["config", "show", "run"]) == 0
    printed = capsys.readouterr()
    assert "\\x1b]0;TITLE\\x07\\x1b[2J\\u202e" in printed.out, printed.out
    reaches_the_terminal_as_letters(printed.out + printed.err, lines=True)
