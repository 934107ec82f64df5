"""Margins from a server's log-probabilities: ``Step.margins_milli`` / ``Step.runner_up`` of a
greedy ``--server`` session, compared with the embedded engine's on the same prompt and model,
and what ``spectui diff`` makes of them.

Real servers on 127.0.0.1: llama-cpp-python (asked explicitly: by default it is not asked, see
``spectui.server.logprobs``) and mlx-lm (asked; it streams none). llama-server runs nowhere in
this test suite, so its stream is replayed by a loopback ``http.server`` from chunks a real
llama-server (built from the llama.cpp that llama-cpp-python 0.3.36 vendors) sent for this
model; a refusing server and post-sampling values come from the same kind of endpoint.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from spectui.compare.diff import diff_recordings
from spectui.compare.divergence import DEFECT
from spectui.config import BackendConfig, RunConfig, SamplingConfig
from spectui.recording.output import output_tokens, output_top_two
from spectui.recording.reader import Recording, read_recording
from spectui.recording.schema import End, Step
from spectui.recording.writer import RecordingWriter
from spectui.server.engine import ServerEngine
from spectui.server.logprobs import LLAMA_CPP_PYTHON_COST, TokenLogprobs, parse_logprobs, top_two
from spectui.server.vocabulary import LocalVocabulary
from tests.conftest import run_cli
from tests.server.conftest import JsonHandler, start_server
from tests.unit.test_diff import replace_token, write_events

# the same prompt as test_llama_cpp_server: an ASCII answer (llama-cpp-python's log-probability
# stream drops characters split across tokens), identical to the embedded engine's
PROMPT = "Fix the typos and return the text: The quick brwon fox jumsp over the lazy dgo near the rivr bank."
MAX_TOKENS = 24
#: server margin vs embedded margin, thousandths of a logit: both are float32 differences of
#: the same logits (llama-cpp-python: log_softmax of the row), so they agree to rounding
#: (measured: 0 at every position, runner-ups identical; llama-server the same)
TOLERANCE_MILLI = 2


def server_config(url: str, **kw: object) -> RunConfig:
    settings = {"prompt": PROMPT, "mode": "ar", "max_tokens": MAX_TOKENS, **kw}
    return RunConfig(backend=BackendConfig(name="server", server_url=url), **settings)


def record(config: RunConfig, path, **engine_kw: object) -> Recording:
    engine = ServerEngine.load(config, **engine_kw)
    with RecordingWriter(path) as w:
        for ev in engine.run(config):
            w.write(ev)
    return read_recording(path)


def end_of(rec: Recording) -> End:
    end = rec.events[-1]
    assert type(end) is End and end.server is not None
    return end


def steps(rec: Recording) -> list[Step]:
    return [e for e in rec.events if type(e) is Step]


# -- llama-cpp-python, against the embedded engine -------------------------------------------


@pytest.fixture(scope="module")
def embedded(tmp_path_factory) -> Recording:
    path = tmp_path_factory.mktemp("embedded") / "embedded.spectui"
    proc = run_cli("run", "--headless", "--mode", "ar", "--max-tokens", str(MAX_TOKENS), "--prompt", PROMPT, "--record", str(path))
    assert proc.returncode == 0, proc.stderr
    return read_recording(path)


@pytest.fixture(scope="module")
def with_margins(ar_server, tmp_path_factory) -> Recording:
    """A greedy session that asked llama-cpp-python for its top-2 log-probabilities."""
    return record(server_config(ar_server.url), tmp_path_factory.mktemp("lcp") / "margins.spectui", logprobs="always")


def test_greedy_server_margins_match_the_embedded_engine(with_margins, embedded):
    rec = with_margins
    tokens, top = output_tokens(rec.events)[0], output_top_two(rec.events)
    base_tokens, base_top = output_tokens(embedded.events)[0], output_top_two(embedded.events)
    stopped = embedded.events[-1].reason == "stop"  # type: ignore[union-attr]
    assert tokens == (base_tokens[:-1] if stopped else base_tokens), "a server never streams the end-of-generation token"
    assert all(t is not None for t in top), "every token got a margin"
    end = end_of(rec)
    assert end.server.margins_source == (
        f"server log-probabilities (asked with logprobs=true, top_logprobs=2): margins for {len(tokens)} of {len(tokens)} tokens"
    )
    diffs = [abs(s[0] - b[0]) for s, b in zip(top, base_top)]  # type: ignore[index]
    print(f"server vs embedded margins, thousandths of a logit: max {max(diffs)}, mean {sum(diffs) / len(diffs):.2f}")
    assert max(diffs) <= TOLERANCE_MILLI
    # runner-ups: llama-cpp-python names them by text; one token of that text gives the id
    runners = [(s[1], b[1]) for s, b in zip(top, base_top)]  # type: ignore[index]
    assert all(s == b or s == -1 for s, b in runners), runners
    assert sum(s == b for s, b in runners) >= len(runners) - 2


def test_llama_cpp_python_is_not_asked_by_default(ar_server, tmp_path):
    rec = record(server_config(ar_server.url), tmp_path / "default.spectui")
    assert all(s.margins_milli is None and s.runner_up is None for s in steps(rec))
    assert end_of(rec).server.margins_source == LLAMA_CPP_PYTHON_COST


def test_a_sampled_session_records_no_margins(ar_server, tmp_path):
    config = server_config(ar_server.url, sampling=SamplingConfig(temperature=0.8, seed=7))
    rec = record(config, tmp_path / "sampled.spectui", logprobs="always")
    assert steps(rec) and all(s.margins_milli is None and s.runner_up is None for s in steps(rec))
    assert end_of(rec).server.margins_source.startswith("not asked: a sampled session")


def test_diff_classifies_a_server_divergence(with_margins, embedded, model_path, tmp_path):
    identical = diff_recordings(embedded, with_margins)
    assert identical.outputs.identical and identical.outputs.first_divergence is None

    # an honest construction: the server's token at a position where both runs were sure
    # (large margins) replaced by the embedded run's runner-up there
    noise = embedded.header.batch_noise
    assert noise is not None, "a greedy embedded run carries its batch-noise calibration"
    base_top = output_top_two(embedded.events)
    server_top = output_top_two(with_margins.events)
    n_prompt = len(embedded.header.prompt_tokens)
    i = max(range(2, len(server_top)), key=lambda k: base_top[k][0] + server_top[k][0])  # type: ignore[index]
    assert (base_top[i][0] + server_top[i][0]) / 1000 > 2 * noise.at(n_prompt + i)  # type: ignore[index,operator]
    runner = base_top[i][1]  # type: ignore[index]
    piece = LocalVocabulary.open(model_path, "test").tokenizer.piece(runner)  # type: ignore[union-attr]
    edited = write_events(tmp_path / "edited.spectui", replace_token(with_margins.events, i, runner, piece))

    d = diff_recordings(embedded, read_recording(edited))
    div = d.outputs.first_divergence
    assert div is not None and div.index == i and d.outputs.unit == "token"
    assert div.cause is not None and div.cause.verdict == DEFECT
    assert div.cause.baseline_margin == base_top[i][0] / 1000 and div.cause.candidate_margin == server_top[i][0] / 1000  # type: ignore[index]
    assert "more than numerics can move" in div.cause.reason


# -- mlx-lm: asked, sends none while streaming -----------------------------------------------


@pytest.fixture(scope="module")
def mlx_server(mlx_model_dir, server_logs):
    server = start_server(["mlx_lm.server", "--model", mlx_model_dir], "/health", server_logs)
    yield server
    server.stop()


@pytest.mark.parametrize("chat", [True, False], ids=["chat", "raw"])
def test_mlx_server_accepts_the_request_and_streams_no_logprobs(mlx_server, mlx_model_dir, tmp_path, chat):
    config = server_config(mlx_server.url, prompt="Say hi", target=mlx_model_dir, max_tokens=4, chat=chat)
    rec = record(config, tmp_path / "mlx.spectui")
    end = end_of(rec)
    assert end.reason in ("length", "stop") and len(output_tokens(rec.events)[0]) >= 1
    assert all(s.margins_milli is None for s in steps(rec))
    assert end.server.margins_source == "not sent by the server (asked with logprobs=true, top_logprobs=2)"


# -- llama-server's stream, replayed; a refusing server ----------------------------------------

# Chunks as a llama-server sent them for SmolLM2 (``/v1/completions``, ``n_probs: 2``; model name
# shortened, timings dropped). The first is a token that completed a character begun by two
# earlier tokens: those sent no chunk, so one entry (the last token's; its alternatives' bytes
# are their own pieces) comes with three tokens' text.
HELD_CHARACTER = (
    '{"choices":[{"text":" 👩","index":0,"logprobs":{"content":[{"id":119,"token":" 👩","bytes":[32,240,159,145,169],'
    '"logprob":-1.7674113512039185,"top_logprobs":[{"id":119,"token":"�","bytes":[169],"logprob":-1.7674113512039185},'
    '{"id":233,"token":"�","bytes":[143],"logprob":-2.6736841201782227}]}]},"finish_reason":null}],"model":"smollm2",'
    '"system_fingerprint":"b0-unknown","object":"text_completion"}'
)
PARIS = (
    '{"id":7042,"token":" Paris","bytes":[32,80,97,114,105,115],"logprob":-0.25889989733695984,"top_logprobs":['
    '{"id":7042,"token":" Paris","bytes":[32,80,97,114,105,115],"logprob":-0.25889989733695984},'
    '{"id":260,"token":" the","bytes":[32,116,104,101],"logprob":-2.764557123184204}]}'
)
PERIOD = (
    '{"id":30,"token":".","bytes":[46],"logprob":-0.3981500566005707,"top_logprobs":[{"id":30,"token":".","bytes":[46],'
    '"logprob":-0.3981500566005707},{"id":28,"token":",","bytes":[44],"logprob":-1.5545029640197754}]}'
)
NEWLINE = (
    '{"choices":[{"text":"\\n","index":0,"logprobs":{"content":[{"id":198,"token":"\\n","bytes":[10],"logprob":-1.182702898979187,'
    '"top_logprobs":[{"id":198,"token":"\\n","bytes":[10],"logprob":-1.182702898979187},{"id":2,"token":"","bytes":[],'
    '"logprob":-1.6321046352386475}]}]},"finish_reason":null}],"model":"smollm2","system_fingerprint":"b0-unknown","object":"text_completion"}'
)
FINAL = '{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"model":"smollm2","object":"text_completion"}'


def completion_chunk(text: str, *entries: str) -> str:
    """A chunk in the same shape (``to_json_oaicompat`` of a partial result)."""
    logprobs = '{"content":[' + ",".join(entries) + "]}" if entries else "null"
    return f'{{"choices":[{{"text":{json.dumps(text)},"index":0,"logprobs":{logprobs},"finish_reason":null}}],"object":"text_completion"}}'


LLAMA_SERVER_STREAM = [
    HELD_CHARACTER,
    # a token whose text the server holds back (a possible stop string: ``text_to_send = ""``)
    # sends its entry with an empty text; the next chunk's text starts with it
    completion_chunk("", PARIS),
    completion_chunk(" Paris.", PERIOD),
    NEWLINE,
    # the end-of-generation token: an entry, no text, nothing after it
    completion_chunk("", PERIOD.replace('"id":30', '"id":2')),
    FINAL,
    "[DONE]",
]


class Replay(JsonHandler):
    """An OpenAI-style endpoint replaying ``self.server.chunks``: llama-server when
    ``server.kind`` says so (``/props`` with ``build_info``), else unidentified."""

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": "smollm2", "object": "model"}]})
        elif self.path == "/props" and self.server.kind == "llama-server":
            self._json(200, {"build_info": "b0-unknown", "default_generation_settings": {"n_ctx": 2048}})
        else:
            self._json(404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.server.bodies.append(body)
        refuse = self.server.refuse
        if refuse == "always" or (refuse and any(k in body for k in ("logprobs", "top_logprobs", "n_probs"))):
            self._json(400, {"error": {"code": 400, "message": "Unrecognized request argument: logprobs", "type": "invalid_request_error"}})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for chunk in self.server.chunks:
            self.wfile.write(f"data: {chunk}\n\n".encode())


@pytest.fixture
def replay() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Replay)
    server.daemon_threads = True
    server.kind, server.refuse, server.chunks, server.bodies = "llama-server", "", LLAMA_SERVER_STREAM, []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def milli(lp_best: float, lp_runner: float) -> int:
    return round(1000 * (lp_best - lp_runner))


def test_llama_server_stream_with_the_local_vocabulary(replay, model_path, tmp_path):
    rec = record(server_config(url(replay), chat=False, target=model_path), tmp_path / "ls.spectui")
    assert replay.bodies[0]["n_probs"] == 2 and "logprobs" not in replay.bodies[0]
    assert [s.tokens for s in steps(rec)] == [[15107, 235, 119], [7042, 30], [198]]  # the first re-tokenized
    assert [s.margins_milli for s in steps(rec)] == [
        None,
        [milli(-0.25889989733695984, -2.764557123184204), milli(-0.3981500566005707, -1.5545029640197754)],
        [milli(-1.182702898979187, -1.6321046352386475)],
    ]
    assert [s.runner_up for s in steps(rec)] == [None, [260, 28], [2]]  # the server's ids
    end = end_of(rec)
    assert end.server.token_ids == "re-tokenized+server"
    assert end.server.margins_source == (
        "server log-probabilities (asked with n_probs=2): margins for 3 of 6 tokens;"
        " none for 3 (log-probabilities came for fewer or more tokens than the text's)"
    )


def test_llama_server_stream_without_a_local_vocabulary(replay, tmp_path):
    rec = record(server_config(url(replay), chat=False), tmp_path / "ls.spectui")
    # the held character's one id would undercount its tokens: no ids rather than too few
    assert [s.tokens for s in steps(rec)] == [[-1], [7042, 30], [198]]
    assert [s.runner_up for s in steps(rec)] == [None, [260, 28], [2]]
    assert end_of(rec).server.token_ids == "none+server"  # so spectui diff compares characters


def test_what_each_server_kind_is_asked(replay, tmp_path):
    record(server_config(url(replay)), tmp_path / "chat.spectui")
    assert {k: replay.bodies[-1][k] for k in ("n_probs", "logprobs", "top_logprobs")} == {"n_probs": 2, "logprobs": True, "top_logprobs": 2}
    replay.kind = "unknown"
    record(server_config(url(replay), chat=False), tmp_path / "raw.spectui")
    assert replay.bodies[-1]["logprobs"] == 2 and "n_probs" not in replay.bodies[-1]
    record(server_config(url(replay), sampling=SamplingConfig(temperature=0.5)), tmp_path / "sampled.spectui")
    assert not {"logprobs", "top_logprobs", "n_probs"} & set(replay.bodies[-1])


def test_a_server_refusing_the_fields_is_asked_again_without_them(replay, tmp_path):
    replay.kind, replay.refuse = "unknown", "fields"
    replay.chunks = [completion_chunk("Hi"), completion_chunk(" there"), FINAL, "[DONE]"]
    rec = record(server_config(url(replay)), tmp_path / "refused.spectui")
    assert rec.header.artifacts.server is not None and rec.header.artifacts.server.kind == "openai-compatible"
    assert [("logprobs" in b, "top_logprobs" in b) for b in replay.bodies] == [(True, True), (False, False)]
    end = end_of(rec)
    assert end.reason == "length" and output_tokens(rec.events)[0] == [-1, -1]
    assert end.server.margins_source == (
        "refused by the server (HTTP 400 Bad Request from POST /v1/chat/completions: Unrecognized request argument:"
        " logprobs); asked again without log-probabilities"
    )
    # once only: a server that refuses everything ends the session with its own word, as before
    replay.refuse, replay.bodies = "always", []
    rec = record(server_config(url(replay)), tmp_path / "always.spectui")
    assert len(replay.bodies) == 2 and end_of(rec).reason == "error"
    assert end_of(rec).error.startswith("HTTP 400 Bad Request from POST /v1/chat/completions")


# -- reading one token's entry ---------------------------------------------------------------


def entry(obj: object) -> TokenLogprobs:
    parsed = parse_logprobs(obj)
    assert parsed is not None and len(parsed) == 1
    return parsed[0]


def test_what_gives_a_margin_and_what_does_not():
    # llama-cpp-python's legacy completions shape (as it streamed it): texts, no ids
    legacy = entry({"tokens": [" it"], "text_offset": [7], "token_logprobs": [-2.52], "top_logprobs": [{" it": -2.52, " the": -2.889}]})
    top = top_two(legacy)
    assert not isinstance(top, str) and round(top.margin, 6) == 0.369 and top.runner_up.text == " the"
    # llama-cpp-python chat: the chosen token's text listed again after the top ones
    echo = [{"token": "A", "logprob": -0.1}, {"token": "B", "logprob": -1.0}, {"token": "A", "logprob": -0.1}]
    top = top_two(entry({"content": [{"token": "A", "logprob": -0.1, "top_logprobs": echo}]}))
    assert not isinstance(top, str) and round(top.margin, 6) == 0.9 and top.runner_up.text == "B"
    # llama-server's post-sampling values at temperature 0 (as it sent them): no log-probabilities
    post = {"id": 198, "token": "\n", "bytes": [10], "prob": 1.0, "top_probs": [{"id": 198, "token": "\n", "bytes": [10], "prob": 1.0}]}
    assert isinstance(top_two(entry({"content": [post]})), str)
    # p = 0 written as the lowest float: no margin against it
    zero = [{"id": 5, "logprob": 0.0}, {"id": 6, "logprob": -3.4028234663852886e38}]
    assert "probability is 0" in top_two(entry({"content": [{"id": 5, "logprob": 0.0, "top_logprobs": zero}]}))  # type: ignore[operator]
    # a token that was not the best of the numbers sent (not a greedy pick from them)
    other = [{"id": 5, "logprob": -0.5}, {"id": 6, "logprob": -1.5}]
    assert "not the most probable" in top_two(entry({"content": [{"id": 6, "logprob": -1.5, "top_logprobs": other}]}))  # type: ignore[operator]
    # odd values never raise: they give no entry or no margin
    assert parse_logprobs("x") is None and parse_logprobs({"content": "x"}) is None
    assert isinstance(top_two(entry({"content": [{"id": "x", "top_logprobs": [{"logprob": "y"}]}]})), str)
