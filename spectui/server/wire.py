"""What the servers send, read into plain values: completion chunks, llama-server ``timings``,
Prometheus text from ``/metrics``, error bodies. Pure functions, no I/O.

Formats, from the servers' sources:

* Chunks: OpenAI's ``chat.completion.chunk`` (``choices[0].delta.content``) and
  ``text_completion`` (``choices[0].text``), as llama-server, llama-cpp-python
  (``llama_cpp/server/app.py``) and mlx-lm (``mlx_lm/server.py``, ``generate_response``)
  write them; a last chunk with an empty ``choices`` may carry ``usage``.
* Log-probabilities (``choices[0].logprobs``), where asked for: ``spectui.server.logprobs``.
* ``timings``: llama.cpp ``tools/server/server-task.cpp``, ``result_timings::to_json``:
  ``cache_n, prompt_n, prompt_ms, prompt_per_token_ms, prompt_per_second, predicted_n,
  predicted_ms, predicted_per_token_ms, predicted_per_second``, plus ``draft_n`` and
  ``draft_n_accepted`` only when ``draft_n > 0``. It rides on the final chunk (and on every
  chunk with ``timings_per_token``).
* ``/metrics``: llama.cpp ``server_task_result_metrics::to_metrics``: per item a ``# HELP``
  and a ``# TYPE`` line, then ``llamacpp:<name> <value>``; the speculative counters are
  ``llamacpp:spec_decode_num_draft_tokens_total``, ``..._num_accepted_tokens_total``,
  ``..._num_drafts_total`` (recent builds) and one labelled
  ``llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="i"}`` per draft position.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeGuard

import msgspec

from spectui.server.logprobs import Alternative, TokenLogprobs, parse_logprobs

#: llama-server's speculative-decoding counters on ``/metrics``.
DRAFTS = "llamacpp:spec_decode_num_drafts_total"
DRAFT_TOKENS = "llamacpp:spec_decode_num_draft_tokens_total"
ACCEPTED_TOKENS = "llamacpp:spec_decode_num_accepted_tokens_total"
#: Requests in flight on llama-server: more than ours means the counters mix other work in.
REQUESTS_PROCESSING = "llamacpp:requests_processing"

_METRIC_LINE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*(?:\{[^}]*\})?)\s+(?P<value>\S+)(?:\s+-?\d+)?$")


#: Deeper than any server's answer nests (a chunk with log-probabilities about six levels,
#: llama-server's ``/props`` about five): deeper JSON is refused as malformed, not walked.
MAX_JSON_DEPTH = 64
_fast_json = msgspec.json.Decoder().decode
#: an integer past this is past a float's range (a timing that large is not one)
_INT_LIMIT = 2**1023


def parse_json(text: str) -> Any:
    """``json.loads`` for a server's text. Raises ``ValueError`` for text that is not JSON or
    nests deeper than ``MAX_JSON_DEPTH``: never ``RecursionError``, which Python's reader
    raises past about a thousand levels and which no caller's error handling expects."""
    try:
        # msgspec reads standard JSON three times faster (a stream is a chunk a token); Python's
        # reader takes what it refuses that servers write (NaN, Infinity)
        obj = _fast_json(text)
    except (msgspec.DecodeError, RecursionError):
        try:
            obj = json.loads(text)
        except RecursionError:
            obj = None
    if obj is not None or text.strip() == "null":
        # JSON nests no deeper than it has brackets: a count (in C) spares walking every chunk
        if text.count("[") + text.count("{") <= MAX_JSON_DEPTH or _depth_within(obj, MAX_JSON_DEPTH):
            return obj
    raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")


def _depth_within(obj: Any, limit: int) -> bool:
    """Whether ``obj`` nests at most ``limit`` levels (walked without recursion)."""
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth >= limit:
                    return False
                stack.append((child, depth + 1))
    return True


class MalformedChunk(ValueError):
    """A chunk that is not the JSON object a completion stream is made of."""


@dataclass
class Chunk:
    """One streamed completion chunk."""

    text: str = ""  # generated text: content, reasoning and tool-call arguments alike
    finish_reason: str | None = None
    token_ids: list[int] | None = None  # only where the server sends them
    #: the top log-probabilities of this chunk's tokens, where asked for and sent
    logprobs: list[TokenLogprobs] | None = None
    usage: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] | None = None
    system_fingerprint: str = ""
    error: str = ""  # an error object sent in band


def _snippet(data: str, n: int = 80) -> str:
    one = data.replace("\n", "\\n")
    return one if len(one) <= n else one[:n] + "..."


# -- the common shape, typed ------------------------------------------------------------------
# A chunk in the shape llama-server, llama-cpp-python and mlx-lm write is decoded and checked by
# msgspec in C, straight into these; anything else (an error, the legacy log-probability shape,
# tool calls, a field of another type, NaN) fails the typed decode and takes the generic reader
# below, which gives the same answer for the common shape. Under load a client reads a chunk a
# token per stream, and this is most of what reading one costs.

_Byte = Annotated[int, msgspec.Meta(ge=0, le=255)]
_UNSET = msgspec.UNSET


class _Alt(msgspec.Struct):
    logprob: float
    id: int | None = None
    token: str | None = None
    bytes: list[_Byte] | None = None


class _Entry(msgspec.Struct):
    logprob: float | None = None
    id: int | None = None
    token: str | None = None
    top_logprobs: list[_Alt] | None = None


class _Logprobs(msgspec.Struct):
    content: list[_Entry]


class _Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: None = None  # a call's arguments are text too: the generic reader joins them


class _Choice(msgspec.Struct):
    text: str | None = None
    delta: _Delta | None | msgspec.UnsetType = _UNSET
    message: _Delta | None | msgspec.UnsetType = _UNSET
    finish_reason: str | None = None
    logprobs: _Logprobs | None = None


class _Typed(msgspec.Struct):
    choices: list[_Choice] = []
    tokens: list[int] | None = None
    usage: dict[str, Any] | None = None
    timings: dict[str, float] | None | msgspec.UnsetType = _UNSET
    system_fingerprint: str | None = None


_typed = msgspec.json.Decoder(_Typed).decode


def _from_typed(t: _Typed, raw: str) -> Chunk:
    chunk = Chunk(system_fingerprint=t.system_fingerprint or "")
    if t.choices:
        c = t.choices[0]
        if c.delta is not _UNSET and c.message is not _UNSET:
            return _parse_generic(raw)  # the generic reader's rule says which of the two counts
        d = c.delta if c.delta is not _UNSET else c.message
        if d is not _UNSET:
            chunk.text = "".join(p for p in (d.reasoning_content, d.reasoning, d.content) if p) if d is not None else ""
        else:
            chunk.text = c.text or ""
        chunk.finish_reason = c.finish_reason
        if c.logprobs is not None:
            entries = c.logprobs.content
            ids = [e.id for e in entries if e.id is not None]  # typed: ints or None
            chunk.token_ids = ids if ids and len(ids) == len(entries) else None
            chunk.logprobs = [
                TokenLogprobs(e.id, e.token, e.logprob, tuple(
                    Alternative(a.logprob, a.id, a.token, bytes(a.bytes) if a.bytes is not None else None) for a in e.top_logprobs or ()))
                for e in entries
            ]
    if chunk.token_ids is None and t.tokens:
        chunk.token_ids = t.tokens
    if t.usage:
        chunk.usage = {k: v for k, v in t.usage.items() if type(v) is int}
    if t.timings is not _UNSET:
        chunk.timings = t.timings  # finite: msgspec refuses a number past a float's range
    return chunk


def parse_chunk(data: str) -> Chunk:
    """One SSE ``data`` payload (not ``[DONE]``) -> ``Chunk``; raises ``MalformedChunk``."""
    if '"error"' not in data:
        try:
            return _from_typed(_typed(data), data)
        except (msgspec.DecodeError, RecursionError):
            pass  # not the common shape (or not JSON): the generic reader says which
    return _parse_generic(data)


def _parse_generic(data: str) -> Chunk:
    try:
        obj = parse_json(data)
    except json.JSONDecodeError as exc:
        raise MalformedChunk(f"malformed chunk (not JSON: {exc.msg} at character {exc.pos}): {_snippet(data)}") from None
    except ValueError as exc:
        raise MalformedChunk(f"malformed chunk ({exc}): {_snippet(data)}") from None
    if not isinstance(obj, dict):
        raise MalformedChunk(f"malformed chunk (a JSON {type(obj).__name__}, not an object): {_snippet(data)}")
    chunk = Chunk(system_fingerprint=str(obj.get("system_fingerprint") or ""))
    if "error" in obj:
        chunk.error = error_message(json.dumps(obj))
        return chunk
    choices = obj.get("choices", [])
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise MalformedChunk(f"malformed chunk ('choices' is not a list of objects): {_snippet(data)}")
    if choices:
        choice = choices[0]
        chunk.text = _choice_text(choice, data)
        reason = choice.get("finish_reason")
        chunk.finish_reason = str(reason) if reason is not None else None
        chunk.token_ids = _token_ids(choice.get("logprobs"))
        chunk.logprobs = parse_logprobs(choice.get("logprobs"))
    if chunk.token_ids is None and _int_list(obj.get("tokens")):  # llama-server's return_tokens
        chunk.token_ids = list(obj["tokens"])
    usage = obj.get("usage")
    if isinstance(usage, dict):
        chunk.usage = {k: int(v) for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)}
    if "timings" in obj:
        chunk.timings = parse_timings(obj["timings"])
    return chunk


def _choice_text(choice: dict[str, Any], data: str) -> str:
    parts: list[Any] = []
    if "delta" in choice or "message" in choice:
        delta = choice.get("delta") or choice.get("message") or {}
        if not isinstance(delta, dict):
            raise MalformedChunk(f"malformed chunk ('delta' is not an object): {_snippet(data)}")
        # reasoning is generated text too: a client waits for it token by token
        parts += [delta.get("reasoning_content"), delta.get("reasoning"), delta.get("content")]
        calls = delta.get("tool_calls") or []
        if not isinstance(calls, list):
            raise MalformedChunk(f"malformed chunk ('tool_calls' is not a list): {_snippet(data)}")
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                parts.append(fn.get("arguments"))
    else:
        parts.append(choice.get("text"))
    if not all(p is None or isinstance(p, str) for p in parts):
        raise MalformedChunk(f"malformed chunk (text that is not a string): {_snippet(data)}")
    return "".join(p for p in parts if p)


def _int_list(value: Any) -> TypeGuard[list[int]]:
    return isinstance(value, list) and bool(value) and all(isinstance(t, int) and not isinstance(t, bool) for t in value)


def _token_ids(logprobs: Any) -> list[int] | None:
    """Token ids from OpenAI-style ``logprobs.content[].id`` (llama-server, mlx-lm), if any."""
    if not isinstance(logprobs, dict) or not isinstance(logprobs.get("content"), list):
        return None
    ids = [entry.get("id") for entry in logprobs["content"] if isinstance(entry, dict)]
    return ids if _int_list(ids) else None


def parse_timings(obj: Any) -> dict[str, float] | None:
    """llama-server's ``timings`` object: its numeric fields, by name."""
    if not isinstance(obj, dict):
        return None
    # finite ones only: JSON as Python reads it allows NaN, Infinity and integers past a float
    out = {}
    for k, v in obj.items():
        if type(v) is float or (type(v) is int and -_INT_LIMIT < v < _INT_LIMIT):
            number = float(v)
            if math.isfinite(number):
                out[k] = number
    return out


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text exposition -> {series: value}; a labelled series keeps its labels in
    the key as written. Comment lines and lines that do not parse are skipped."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _METRIC_LINE.match(line)
        if m is None:
            continue
        try:
            out[m["name"]] = float(m["value"])
        except ValueError:
            continue
    return out


def counter_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """How much each ``llamacpp:*_total`` counter grew between two readings. A series first
    seen in the second reading grew from 0: llama-server creates the per-position acceptance
    series (``{position="i"}``) when a position is first drafted, on a server just started too."""
    return {
        name: after[name] - before.get(name, 0.0)
        for name in after
        if name.startswith("llamacpp:") and "_total" in name and math.isfinite(after[name] - before.get(name, 0.0))
    }


def acceptance(kind: str, timings: dict[str, float] | None, delta: dict[str, float]) -> tuple[int, int, str]:
    """(drafted, accepted, where from) for one request; (-1, -1, why) when not reported.

    The request's own ``timings`` come first: ``/metrics`` counts every request the server ran
    meanwhile. llama-server leaves ``draft_n`` out when it drafted nothing, so timings without
    it mean zero drafted, not "unknown".
    """
    if timings is not None and "draft_n" in timings:
        source = "llama-server timings.draft_n / draft_n_accepted (this request)"
        return int(timings["draft_n"]), int(timings.get("draft_n_accepted", 0)), source
    if delta.get(DRAFT_TOKENS, 0) > 0:
        return (
            int(delta[DRAFT_TOKENS]),
            int(delta.get(ACCEPTED_TOKENS, 0)),
            "llama-server /metrics spec_decode counters (their change across the request)",
        )
    if timings is not None:
        return 0, 0, "llama-server timings: nothing drafted (no draft_n)"
    return -1, -1, f"not reported ({kind or 'this server'} reports no draft acceptance per request)"


def _validation_error(e: dict[str, Any]) -> str:
    """One of pydantic's errors (FastAPI's 422 body): ``loc`` joined by dots, then ``msg``."""
    loc = e.get("loc")
    where = ".".join(map(str, loc)) if isinstance(loc, list) else str(loc or "")
    return f"{where}: {e.get('msg', '')}"


def error_message(text: str) -> str:
    """The message of an error body, on one line: OpenAI / llama-server
    ``{"error": {"message": ...}}``, mlx-lm ``{"error": "..."}``, FastAPI ``{"detail": ...}``;
    otherwise the body's first line."""
    try:
        obj = parse_json(text)
    except ValueError:
        obj = None
    msg: Any = None
    if isinstance(obj, dict):
        err = obj.get("error", obj.get("detail", obj.get("message")))
        if isinstance(err, dict):
            msg = err.get("message") or err.get("msg") or json.dumps(err)
        elif isinstance(err, list) and err and isinstance(err[0], dict):  # pydantic validation errors
            msg = "; ".join(_validation_error(e) for e in err[:3] if isinstance(e, dict))
        elif err is not None:
            msg = str(err)
    if msg is None:
        msg = next((line.strip() for line in text.splitlines() if line.strip()), "") or "(empty body)"
    msg = " ".join(str(msg).split())
    return msg if len(msg) <= 300 else msg[:300] + "..."
