"""The typed chunk reader (msgspec, in C) against the generic one it stands in front of: for
any chunk, in the servers' shape or bent out of it, the two give the same ``Chunk`` or the same
refusal. The typed one is the load client's fast path; the generic one says what a chunk means."""

from __future__ import annotations

import json

from hypothesis import example, given, settings
from hypothesis import strategies as st

from spectui.server.wire import MalformedChunk, _parse_generic, parse_chunk

_text = st.text(max_size=6)
_odd = st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.floats(allow_nan=False, allow_infinity=False), _text,
                 st.lists(st.integers(0, 3), max_size=2), st.just({}))


def _maybe(value: st.SearchStrategy, odd: bool = True) -> st.SearchStrategy:
    """The field as servers write it, or absent (None here drops it), or a value of another type."""
    return st.one_of(value, st.just(None), _odd) if odd else st.one_of(value, st.just(None))


_alt = st.fixed_dictionaries({}, optional={
    "id": _maybe(st.integers(0, 50000)), "token": _maybe(_text), "logprob": _maybe(st.floats(-30, 0)),
    "bytes": _maybe(st.lists(st.integers(0, 255), max_size=4)),
})
_entry = st.fixed_dictionaries({}, optional={
    "id": _maybe(st.integers(0, 50000)), "token": _maybe(_text), "logprob": _maybe(st.floats(-30, 0)),
    "bytes": _maybe(st.lists(st.integers(0, 255), max_size=4)), "top_logprobs": _maybe(st.lists(_alt, max_size=3)),
})
_delta = st.fixed_dictionaries({}, optional={
    "content": _maybe(_text), "reasoning_content": _maybe(_text), "role": st.just("assistant"),
    "tool_calls": _maybe(st.lists(st.fixed_dictionaries({"function": st.fixed_dictionaries({"arguments": _text})}), max_size=2)),
})
_choice = st.fixed_dictionaries({}, optional={
    "text": _maybe(_text), "delta": _maybe(_delta), "message": _maybe(_delta), "index": st.just(0),
    "finish_reason": _maybe(st.sampled_from(["stop", "length"])),
    "logprobs": _maybe(st.fixed_dictionaries({"content": _maybe(st.lists(_entry, max_size=3))})),
})
_chunk = st.fixed_dictionaries({}, optional={
    "choices": _maybe(st.lists(_choice, max_size=2)), "tokens": _maybe(st.lists(st.integers(0, 9), max_size=3)),
    "usage": _maybe(st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens"]), _odd)),
    "timings": _maybe(st.dictionaries(st.sampled_from(["prompt_ms", "predicted_n", "draft_n"]), _odd)),
    "system_fingerprint": _maybe(_text), "error": st.fixed_dictionaries({"message": _text}), "object": st.just("x"),
})


def _drop_none(obj: object) -> object:
    if isinstance(obj, dict):
        return {k: _drop_none(v) for k, v in obj.items() if v is not None or k in ("finish_reason", "delta")}
    if isinstance(obj, list):
        return [_drop_none(v) for v in obj]
    return obj


def _read(read, data: str) -> object:  # noqa: ANN001
    try:
        return read(data)
    except MalformedChunk as exc:
        return ("refused", str(exc))


@settings(max_examples=600, deadline=None)
@given(_chunk.map(_drop_none))
@example({"choices": [{"delta": None, "message": {"content": "a"}}]})  # which of the two counts
@example({"choices": [{"delta": {}, "message": {"content": "a"}}]})
@example({"choices": [{"delta": {"tool_calls": [{"function": {"arguments": "{}"}}]}}]})
@example({"choices": [{"text": "a", "logprobs": {"content": [{"id": 1, "top_logprobs": [{"id": 1}]}]}}]})  # no logprob
@example({"choices": [{"text": "a"}], "timings": {"prompt_ms": 1e308, "draft_n": "4"}})
def test_the_typed_reader_reads_every_chunk_as_the_generic_one_does(obj):
    data = json.dumps(obj)
    assert _read(parse_chunk, data) == _read(_parse_generic, data)


def test_a_llama_server_chunk_takes_the_typed_path_and_keeps_everything():
    alt = {"id": 7, "token": " a", "bytes": [32, 97], "logprob": -0.25}
    data = json.dumps({"choices": [{"text": " a", "finish_reason": None, "logprobs": {"content": [{**alt, "top_logprobs": [alt]}]}}],
                       "timings": {"draft_n": 4, "draft_n_accepted": 3}, "usage": {"prompt_tokens": 5, "x": "y"}})
    chunk = parse_chunk(data)
    assert chunk == _parse_generic(data)
    assert chunk.text == " a" and chunk.token_ids == [7] and chunk.timings == {"draft_n": 4.0, "draft_n_accepted": 3.0}
    assert chunk.logprobs is not None and chunk.logprobs[0].top[0].piece == b" a" and chunk.usage == {"prompt_tokens": 5}
