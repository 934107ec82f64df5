"""The parsers, on text in the exact shapes the servers send (no model, no network).

llama-server's texts are written the way its source writes them: the final chunk of a
``/v1/chat/completions`` stream (``to_json_oaicompat_chat_stream``, with ``timings`` from
``result_timings::to_json``, ``draft_n``/``draft_n_accepted`` only when ``draft_n > 0``) and
``/metrics`` (``server_task_result_metrics::to_metrics``: ``# HELP``/``# TYPE`` lines, then
``llamacpp:<name> <value>``, and the labelled per-position series), both in llama.cpp's
``tools/server/server-task.cpp``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from spectui.errors import SpectuiError
from spectui.server.client import parse_server_url
from spectui.server.probe import flatten
from spectui.server.sse import SSEParser
from spectui.server.wire import (
    ACCEPTED_TOKENS,
    DRAFT_TOKENS,
    DRAFTS,
    MalformedChunk,
    acceptance,
    counter_delta,
    error_message,
    parse_chunk,
    parse_prometheus,
)

LLAMA_SERVER_FINAL_CHUNK = (
    '{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1763740000,'
    '"id":"chatcmpl-4Yp1nXq","model":"gpt-3.5-turbo","system_fingerprint":"b6530-7f09a680",'
    '"object":"chat.completion.chunk","timings":{"cache_n":0,"prompt_n":32,"prompt_ms":41.25,'
    '"prompt_per_token_ms":1.2890625,"prompt_per_second":775.7575757575758,"predicted_n":24,'
    '"predicted_ms":160.5,"predicted_per_token_ms":6.6875,"predicted_per_second":149.53271028037383,'
    '"draft_n":20,"draft_n_accepted":15}}'
)
# with "stream_options": {"include_usage": true} the timings ride on the usage chunk instead
LLAMA_SERVER_USAGE_CHUNK = (
    '{"choices":[],"created":1763740000,"id":"chatcmpl-4Yp1nXq","model":"gpt-3.5-turbo",'
    '"system_fingerprint":"b6530-7f09a680","object":"chat.completion.chunk",'
    '"usage":{"completion_tokens":24,"prompt_tokens":32,"total_tokens":56},'
    '"timings":{"cache_n":12,"prompt_n":20,"prompt_ms":30.5,"prompt_per_token_ms":1.525,'
    '"prompt_per_second":655.7377049180328,"predicted_n":24,"predicted_ms":310.0,'
    '"predicted_per_token_ms":12.916666666666666,"predicted_per_second":77.41935483870968}}'
)
LLAMA_SERVER_METRICS = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 3046
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 1210
# HELP llamacpp:tokens_predicted_seconds_total Total time spent generating tokens
# TYPE llamacpp:tokens_predicted_seconds_total counter
llamacpp:tokens_predicted_seconds_total 9.87654
# HELP llamacpp:n_decode_total Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding
# TYPE llamacpp:n_decode_total counter
llamacpp:n_decode_total 552
# HELP llamacpp:spec_decode_num_draft_tokens_total Speculative: Total draft tokens generated
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 2160
# HELP llamacpp:spec_decode_num_accepted_tokens_total Speculative: Total draft tokens accepted by the target model
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total 1705
# HELP llamacpp:spec_decode_num_drafts_total Speculative: Total speculative decoding verification steps
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 540
# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 775.758
# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 0
# HELP llamacpp:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position
# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 520
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 480
"""


def test_llama_server_final_chunk_gives_timings_and_acceptance():
    c = parse_chunk(LLAMA_SERVER_FINAL_CHUNK)
    assert c.text == "" and c.finish_reason == "length" and c.system_fingerprint == "b6530-7f09a680"
    assert c.timings is not None and c.timings["prompt_ms"] == 41.25 and c.timings["predicted_n"] == 24
    assert acceptance("llama-server", c.timings, {}) == (20, 15, "llama-server timings.draft_n / draft_n_accepted (this request)")


def test_timings_without_draft_n_mean_nothing_drafted_not_unknown():
    c = parse_chunk(LLAMA_SERVER_USAGE_CHUNK)
    assert c.usage == {"completion_tokens": 24, "prompt_tokens": 32, "total_tokens": 56}
    assert c.timings["cache_n"] == 12 and "draft_n" not in c.timings
    assert acceptance("llama-server", c.timings, {}) == (0, 0, "llama-server timings: nothing drafted (no draft_n)")
    drafted, accepted, source = acceptance("mlx-lm", None, {})
    assert (drafted, accepted) == (-1, -1) and source == "not reported (mlx-lm reports no draft acceptance per request)"


def test_llama_server_metrics_and_their_change_across_a_request():
    before = parse_prometheus(LLAMA_SERVER_METRICS)
    assert before[DRAFT_TOKENS] == 2160 and before[ACCEPTED_TOKENS] == 1705 and before[DRAFTS] == 540
    assert before['llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"}'] == 480
    assert before["llamacpp:tokens_predicted_seconds_total"] == 9.87654
    assert not any(k.startswith("#") for k in before)
    after = parse_prometheus(
        LLAMA_SERVER_METRICS.replace("num_draft_tokens_total 2160", "num_draft_tokens_total 2200")
        .replace("num_accepted_tokens_total 1705", "num_accepted_tokens_total 1733")
        .replace("num_drafts_total 540", "num_drafts_total 551")
    )
    delta = counter_delta(before, after)
    assert delta[DRAFT_TOKENS] == 40 and delta[ACCEPTED_TOKENS] == 28 and delta[DRAFTS] == 11
    assert "llamacpp:prompt_tokens_seconds" not in delta and "llamacpp:requests_processing" not in delta  # gauges
    # a per-position series the server created during the request (a fresh server) grew from 0
    fresh = {k: v for k, v in before.items() if 'position="1"' not in k}
    assert counter_delta(fresh, after)['llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"}'] == 480
    # no timings of its own (a server that did not send them): the counters speak for the request
    assert acceptance("llama-server", None, delta)[:2] == (40, 28)
    assert parse_prometheus("garbage line\nllamacpp:x notanumber\n") == {}


def test_chunks_of_each_shape():
    chat = parse_chunk('{"choices":[{"index":0,"delta":{"content":" fox"},"finish_reason":null}]}')
    assert chat.text == " fox" and chat.finish_reason is None and chat.token_ids is None
    completion = parse_chunk('{"object":"text_completion","choices":[{"text":"jumps","index":0,"finish_reason":"stop"}]}')
    assert completion.text == "jumps" and completion.finish_reason == "stop"
    reasoning = parse_chunk('{"choices":[{"delta":{"reasoning_content":"hmm","content":null}}]}')
    assert reasoning.text == "hmm"
    role_only = parse_chunk('{"choices":[{"delta":{"role":"assistant","content":null}}]}')
    assert role_only.text == ""
    with_ids = parse_chunk('{"choices":[{"delta":{"content":"ab"},"logprobs":{"content":[{"id":64,"token":"a"},{"id":65,"token":"b"}]}}]}')
    assert with_ids.token_ids == [64, 65]
    inband = parse_chunk('{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}')
    assert inband.error == "the request exceeds the available context size"


@pytest.mark.parametrize(
    "data",
    ['{"choices": [{"delta": {"content": "!"', "[1, 2]", '{"choices": {"delta": {}}}', '{"choices": [{"delta": {"content": 3}}]}'],
)
def test_malformed_chunks_are_refused_with_a_readable_line(data):
    with pytest.raises(MalformedChunk, match=r"^malformed chunk \(") as exc:
        parse_chunk(data)
    assert "\n" not in str(exc.value)


def test_sse_framing():
    p = SSEParser()
    lines = [": keepalive 10/32\n", "data: {\"a\":\r\n", "data: 1}\n", "\n", ": ping - 2025-01-01\n", "event: x\n", "data:[DONE]\n", "\n"]
    events = [e for i, line in enumerate(lines) if (e := p.feed(line, i)) is not None]
    assert [(e.kind, e.data, e.t_ns) for e in events] == [("data", '{"a":\n1}', 2), ("data", "[DONE]", 6)]
    assert p.feed("error: {\"message\": \"x\"}\n", 9) is None and p.feed("\n", 10).kind == "error"
    assert p.feed("data: tail\n", 11) is None and p.finish().data == "tail"  # no final blank line


def test_error_bodies_of_each_server():
    llama_server = '{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}'
    assert error_message(llama_server) == "Loading model"
    assert error_message('{"detail":"Invalid API key"}') == "Invalid API key"  # llama-cpp-python (FastAPI)
    assert error_message('{"error": "Request should be a JSON dictionary"}') == "Request should be a JSON dictionary"  # mlx-lm
    pydantic = '{"detail":[{"loc":["body","max_tokens"],"msg":"Input should be a valid integer","type":"int_parsing"}]}'
    assert error_message(pydantic) == "body.max_tokens: Input should be a valid integer"
    assert error_message("<html>\n  Bad Gateway\n</html>") == "<html>"
    assert error_message("") == "(empty body)"


def test_server_urls():
    u = parse_server_url("http://127.0.0.1:8080/v1/")
    assert (u.scheme, u.host, u.port, u.prefix, str(u), u.loopback) == ("http", "127.0.0.1", 8080, "", "http://127.0.0.1:8080", True)
    proxied = parse_server_url("https://models.example.org/llm/v1")
    assert (proxied.port, proxied.prefix, proxied.loopback) == (443, "/llm", False)
    # a run's header names this machine only for a server on it: a name that starts like an
    # address is somebody else's; IPv4's loopback through an IPv6 address is this machine
    assert not parse_server_url("http://127.example.com:8080").loopback
    assert parse_server_url("http://[::ffff:127.0.0.1]:8080").loopback and parse_server_url("http://localhost:1").loopback
    for bad in ("127.0.0.1:8080", "ftp://h:1", "http://:8080", "http://h:1?x=1", "http://u:p@h:1"):
        with pytest.raises(SpectuiError):
            parse_server_url(bad)


def test_props_are_flattened_with_long_texts_hashed():
    props = {
        "build_info": "b6530-7f09a680",
        "default_generation_settings": {"n_ctx": 4096, "params": {"speculative.n_max": 16, "samplers": ["top_k", "temperature"]}},
        "chat_template": "{% for message in messages %}" * 20,
        "total_slots": 1,
    }
    flat = flatten(props)
    assert flat["default_generation_settings.params.speculative.n_max"] == "16"
    assert flat["default_generation_settings.params.samplers"] == "top_k,temperature"
    assert flat["chat_template"].startswith("sha256:") and flat["total_slots"] == "1"


def test_the_server_package_does_not_import_the_ui():
    code = (
        "import sys\n"
        "import spectui.server.engine, spectui.server.report, spectui.server.compare\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', 'plotext')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
