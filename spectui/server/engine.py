"""A server session: the ``EngineProtocol`` surface over an OpenAI-compatible endpoint.

``ServerEngine.load`` checks everything that can fail before a session starts (the URL, the API
key variable, that the server answers and what it is, the local vocabulary) and raises one
line (``SpectuiError``: exit 2 in the CLI). ``run`` yields the same stream as the embedded
engine: ``Header``, ``Prefill``, one ``Step`` per streamed content chunk, ``End``. Once the
header is out, every failure (timeout, HTTP error, a malformed chunk, the connection dropped)
ends the session with ``End(reason="error")`` after every step received, so the recording
keeps all the tokens that arrived and says why it stopped.

Mapping, and why:

* ``Step.t_us`` is the chunk's arrival time on this machine (``time.perf_counter_ns`` taken
  when its line was read), the clock a streaming client lives by; TTFT is the first content
  chunk. The header marks t=0 just before the request is sent.
* ``Prefill`` is llama-server's own ``timings.prompt_ms`` where the first chunk carries it
  (spectui asks for ``timings_per_token``), else the client's wait from sending the request to
  the first content chunk; ``Prefill.source`` says which.
* Token ids: see ``spectui.server.vocabulary``; ``End.server.token_ids`` says how they were made.
* Margins (greedy sessions): the top-2 log-probabilities the server streams, where it is asked
  for them (``spectui.server.logprobs``: which kinds, in which form, and why llama-cpp-python is
  not asked by default), become ``Step.margins_milli`` / ``Step.runner_up`` as the embedded
  engine records them; ``End.server.margins_source`` says where they came from or why there
  are none. A server that refuses the fields (HTTP 400/422) is asked once more without them.
* Acceptance is what the server reports (llama-server ``timings.draft_n`` /
  ``draft_n_accepted``, else its ``/metrics`` counters) in ``End.server``. Per block where the
  stream says it: llama-server's ``timings_per_token`` chunks carry the cumulative counters, so
  the step after a verification carries that block's ``drafted`` / ``accepted`` (its tokens
  stay ``AR`` in origin: the server does not say which streamed token was a draft).
  llama-cpp-python and mlx-lm report none: the recording says "not reported", and no step
  invents a block.
* No memory samples: the sampler would measure this client, not the server.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

from spectui import __version__
from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.models.artifacts import host_info
from spectui.recording.schema import (
    Artifacts,
    BatchNoise,
    End,
    Event,
    FinishReason,
    Header,
    HostInfo,
    ModelArtifacts,
    Prefill,
    ServerArtifacts,
    ServerReport,
    Step,
    TokenOrigin,
)
from spectui.server.client import READ_TIMEOUT_S, ServerClient, ServerError, parse_server_url
from spectui.server.logprobs import MarginTally, Policy, TokenLogprobs, plan, request_fields, spelled_by_server, without_logprobs
from spectui.server.probe import LLAMA_SERVER, ServerInfo, probe, read_metrics
from spectui.server.sse import SSEEvent
from spectui.server.vocabulary import LocalVocabulary
from spectui.server.wire import REQUESTS_PROCESSING, Chunk, MalformedChunk, acceptance, counter_delta, error_message, parse_chunk

CHAT_ENDPOINT = "/v1/chat/completions"
COMPLETIONS_ENDPOINT = "/v1/completions"
_AR = int(TokenOrigin.AR)


class ServerEngine:
    """A reachable, identified server (and the local vocabulary for its model, if any)."""

    draft_model = None  # drafting, if any, happens on the server

    def __init__(
        self, config: RunConfig, client: ServerClient, info: ServerInfo, vocab: LocalVocabulary | None, *, logprobs: Policy = "auto"
    ) -> None:
        self.config = config
        self.client = client
        self.info = info
        self.vocab = vocab
        self.logprobs = logprobs  # whether greedy sessions ask for top-2 log-probabilities

    @classmethod
    def load(cls, config: RunConfig, *, read_timeout_s: float = READ_TIMEOUT_S, logprobs: Policy = "auto") -> ServerEngine:
        config.validate()
        backend = config.backend
        if not backend.server_url:
            raise SpectuiError("the server backend needs a URL: --server http://HOST:PORT")
        url = parse_server_url(backend.server_url)
        api_key = ""
        if backend.api_key_env:
            api_key = os.environ.get(backend.api_key_env, "")
            if not api_key:
                raise SpectuiError(f"--api-key-env {backend.api_key_env}: that environment variable is not set")
        client = ServerClient(url, api_key, read_timeout_s=read_timeout_s)
        try:
            info = probe(client)
        except ServerError as exc:
            raise SpectuiError(str(exc)) from None
        return cls(config, client, info, LocalVocabulary.find(config.target, info.model_id), logprobs=logprobs)

    def close(self) -> None:
        """Nothing is held between requests (each one opens its own connection)."""

    def __enter__(self) -> ServerEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fits(self, config: RunConfig) -> bool:
        """The same server and model name: nothing is loaded here, only the URL and the local
        vocabulary found for the target."""
        loaded = self.config
        return loaded.backend == config.backend and loaded.target == config.target

    def calibrate(self, config: RunConfig, *, before: Callable[[], object] | None = None) -> BatchNoise | None:
        """Nothing: a server's kernels cannot be driven block by block from here."""
        return None

    def check(self, config: RunConfig) -> None:
        """Settings only: the server alone knows its context size, and says so per request."""
        config.validate()

    # -- per run ------------------------------------------------------------------------

    @property
    def tokenizes(self) -> bool:
        return self._tokenizing() is not None

    def _tokenizing(self) -> LocalVocabulary | None:
        """The local vocabulary when it can tokenize; None: the server's ids are all there is."""
        return self.vocab if self.vocab is not None and self.vocab.tokenizer is not None else None

    def request(self, config: RunConfig) -> tuple[str, dict[str, Any]]:
        """(endpoint, JSON body). ``--raw`` sends the prompt as is to ``/v1/completions``;
        otherwise one user message to ``/v1/chat/completions`` and the server's template."""
        s = config.sampling
        body: dict[str, Any] = {
            "stream": True,
            "max_tokens": config.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "top_k": s.top_k,
            "min_p": 0.0,
            "seed": s.seed,
            # spectui's sampler has no penalties; llama-cpp-python defaults repeat_penalty to
            # 1.1, which would make its "greedy" differ from every other engine's
            "repeat_penalty": 1.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "stream_options": {"include_usage": True},
        }
        if self.info.kind == LLAMA_SERVER:
            body["timings_per_token"] = True  # prompt_ms arrives with the first token
        if plan(self.info.kind, s.greedy, self.logprobs)[0]:
            body.update(request_fields(self.info.kind, config.chat))
        if config.chat:
            body["messages"] = config.messages()
            return CHAT_ENDPOINT, body
        body["prompt"] = config.raw_text()
        return COMPLETIONS_ENDPOINT, body

    def header(self, config: RunConfig, endpoint: str) -> Header:
        info, url = self.info, self.client.url
        if self.vocab is not None:
            target = self.vocab.artifacts
        else:
            target = ModelArtifacts(name=os.path.basename(info.model_id.rstrip("/")) or info.model_id)
        server = ServerArtifacts(
            url=str(url),
            kind=info.kind,
            version=info.version,
            endpoint=endpoint,
            model_id=info.model_id,
            props=dict(info.props),
            vocabulary=self.vocab.path if self.vocab is not None and self.tokenizes else "",
            vocabulary_source=self.vocab.source if self.vocab is not None else "",
        )
        if self.vocab is not None and self.vocab.note:
            server.props["vocabulary_note"] = self.vocab.note
        return Header(
            spectui_version=__version__,
            started_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
            config=config,
            artifacts=Artifacts(
                target=target,
                runtime={info.kind: info.version or "unknown"},
                # the host is where the model ran: known here only for a loopback server
                host=host_info() if url.loopback else HostInfo(),
                server=server,
            ),
            # the chat template is applied by the server: only a raw prompt is known exactly
            prompt_text="" if config.chat else config.raw_text(),
        )

    def run(
        self,
        config: RunConfig | None = None,
        *,
        stop: threading.Event | None = None,
        memory_interval_s: float | None = None,  # accepted for Engine.run's signature; see module doc
    ) -> Generator[Event, None, None]:
        config = config or self.config
        config.validate()
        endpoint, body = self.request(config)
        n_prompt = self._count_prompt(config)
        header = self.header(config, endpoint)
        before = read_metrics(self.client) if self.info.metrics else {}
        t0 = time.perf_counter_ns()
        yield header
        state = _RequestState(t0, n_prompt)
        asked = {k: v for k, v in body.items() if k not in without_logprobs(body)}
        state.margins = MarginTally(asked, plan(self.info.kind, config.sampling.greedy, self.logprobs)[1])
        stream = _chain(None, iter(()))
        error = ""
        try:
            stream = self._open(endpoint, body, state)
            for event in stream:
                if event.kind == "error":
                    error = f"the server reported an error mid-stream: {error_message(event.data)}"
                    break
                if event.data.strip() == "[DONE]":
                    state.done = True
                    break
                chunk = parse_chunk(event.data)
                if chunk.error:
                    error = f"the server reported an error: {chunk.error}"
                    break
                state.absorb(chunk)
                if not chunk.text and chunk.logprobs:
                    # a token whose text the server held back (llama-server sends its entry with
                    # an empty text): its text, if it ever comes, arrives with the next chunk's
                    state.pending += chunk.logprobs
                if chunk.text:
                    t_us = (event.t_ns - t0) // 1000
                    if not state.prefill_sent:
                        state.prefill_sent = True
                        yield state.prefill(t_us)
                    step = self._step(chunk, t_us, state)
                    step.drafted, step.accepted = state.block()
                    yield step
                if stop is not None and stop.is_set():
                    state.interrupted = True
                    break
        except (ServerError, MalformedChunk) as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a client bug must still end the session, not lose it
            error = f"{type(exc).__name__}: {exc}"
        finally:
            stream.close()
        t_end = (time.perf_counter_ns() - t0) // 1000
        reason, error = state.finish(error)
        state.report.metrics_note = self.info.metrics_note
        if self.info.metrics:
            self._metrics(before, read_metrics(self.client), state.report)
        report = state.report
        report.margins_source = state.margins.source(state.n_tokens)
        report.drafted, report.accepted, report.acceptance_source = acceptance(self.info.kind, state.timings, report.metrics_delta)
        yield End(t_us=t_end, reason=reason, n_tokens=state.n_tokens, error=error, server=report)

    def _open(self, endpoint: str, body: dict[str, Any], state: _RequestState) -> Generator[SSEEvent, None, None]:
        """The request's event stream. A server that rejects a request carrying the
        log-probability fields as invalid (HTTP 400 or 422: they are optional extras, and a
        server may not know them) is asked once more without them, and the recording says so.
        Other statuses (401, 404, 429, 5xx) say nothing about the fields and end the session."""
        stream = self.client.stream(endpoint, body)
        try:
            first = next(stream, None)
        except ServerError as exc:
            if not state.margins.asked or _http_status(exc) not in REFUSED:
                raise
            state.t_send_us = (time.perf_counter_ns() - state.t0) // 1000  # the answered request's
            stream = self.client.stream(endpoint, without_logprobs(body))
            first = next(stream, None)  # refused again: the fields were not the reason
            state.margins.refused = f"refused by the server ({exc}); asked again without log-probabilities"
            state.margins.asked = {}
        return _chain(first, stream)

    def _count_prompt(self, config: RunConfig) -> int:
        """The prompt's length in tokens by the local vocabulary (0 = unknown). Only a count for
        the prefill rate: a local template that fails must not stop the server's session."""
        vocab = self._tokenizing()
        if vocab is None:
            return 0
        try:
            return vocab.count_prompt(config)
        except SpectuiError:
            return 0

    def _step(self, chunk: Chunk, t_us: int, state: _RequestState) -> Step:
        raw = chunk.text.encode("utf-8")
        entries, state.pending = state.pending + (chunk.logprobs or []), []
        server_ids = chunk.token_ids
        entry_ids = [e.id for e in entries if e.id is not None]
        if server_ids and len(entries) > len(server_ids) and len(entry_ids) == len(entries):
            server_ids = entry_ids  # held-back tokens first
        vocab = self._tokenizing()
        # The server may send ids for some of the text's tokens only (llama-server sends no
        # chunk for a token that ends inside a character): then they are not this text's ids.
        if server_ids and vocab is not None and not vocab.spells(server_ids, raw):
            if len(vocab.ids(chunk.text)[0]) > len(server_ids):
                server_ids = None  # too few for the text: its own tokens, re-tokenized, are closer
        elif server_ids and vocab is None and spelled_by_server(entries, server_ids, raw) is False:
            server_ids = None  # no ids rather than too few: the diff compares characters
        if server_ids:
            ids = server_ids
            method = "server"
            if vocab is not None:
                pieces = vocab.pieces(ids)
                if b"".join(pieces) != raw:  # a normalising vocabulary: keep the server's bytes
                    pieces = [raw] + [b""] * (len(ids) - 1)
            else:
                pieces = [raw] + [b""] * (len(ids) - 1)
        elif vocab is not None:
            ids, pieces = vocab.ids(chunk.text)
            method = "re-tokenized"
        else:
            ids, pieces, method = [-1], [raw], "none"
        state.methods.add(method)
        state.report.chunks += 1
        state.n_tokens += len(ids)
        step = Step(ids, [_AR] * len(ids), pieces, [t_us] * len(ids))
        if state.margins.asked:
            token_of = vocab.token_of if vocab is not None else None
            top = state.margins.take(entries, ids, raw, token_of)
            if top is not None:
                step.margins_milli, step.runner_up = top
        return step

    def _metrics(self, before: dict[str, float], after: dict[str, float], report: ServerReport) -> None:
        if not before or not after:
            report.metrics_note = "a /metrics reading failed"
            return
        delta = counter_delta(before, after)
        report.metrics_delta = delta
        if any(v < 0 for v in delta.values()):
            report.metrics_note = "counters went down: the server restarted during the request"
        elif before.get(REQUESTS_PROCESSING, 0) > 0:
            report.metrics_note = "other requests were in flight: the counters include their work"


def _chain(first: SSEEvent | None, rest: Iterator[SSEEvent]) -> Generator[SSEEvent, None, None]:
    """``rest`` with ``first`` (read early, to see whether the request was refused) before it."""
    if first is not None:
        yield first
    yield from rest


_HTTP_STATUS = re.compile(r"^HTTP (\d{3})\b")
#: The statuses of a request refused as invalid (OpenAI and llama-server 400, FastAPI 422).
REFUSED = (400, 422)


def _http_status(exc: ServerError) -> int | None:
    """The status of an HTTP error answer (``ServerClient.stream`` words it "HTTP 400 ...")."""
    m = _HTTP_STATUS.match(str(exc))
    return int(m.group(1)) if m else None


class _RequestState:
    """What one request's stream has told so far."""

    def __init__(self, t0: int, n_prompt_local: int) -> None:
        self.t0 = t0
        self.t_send_us = (time.perf_counter_ns() - t0) // 1000
        self.n_prompt_local = n_prompt_local
        self.report = ServerReport()
        self.methods: set[str] = set()
        self.timings: dict[str, float] | None = None
        self.n_tokens = 0
        self.prefill_sent = False
        self.done = False
        self.interrupted = False
        self.margins = MarginTally({}, "")
        #: log-probabilities of tokens that came without text, for the next text chunk
        self.pending: list[TokenLogprobs] = []
        #: llama-server's cumulative draft counters as of the last step (``block``)
        self._drafted_seen = (0, 0)

    def block(self) -> tuple[int, int]:
        """What llama-server drafted and had accepted since the last step: with
        ``timings_per_token`` every chunk carries the request's cumulative ``draft_n`` /
        ``draft_n_accepted``, so their growth between two content chunks is the block verified
        in between (0, 0 where nothing was, or the server does not say)."""
        t = self.timings or {}
        now = (int(t.get("draft_n", 0)), int(t.get("draft_n_accepted", 0)))
        seen, self._drafted_seen = self._drafted_seen, now
        drafted, accepted = now[0] - seen[0], now[1] - seen[1]
        return (drafted, min(max(accepted, 0), drafted)) if drafted > 0 else (0, 0)

    def absorb(self, chunk: Chunk) -> None:
        r = self.report
        if chunk.timings is not None:
            self.timings = chunk.timings  # cumulative: the last one is the request's
            r.timings = chunk.timings
        if chunk.usage:
            r.prompt_tokens = chunk.usage.get("prompt_tokens", r.prompt_tokens)
            r.completion_tokens = chunk.usage.get("completion_tokens", r.completion_tokens)
        if chunk.system_fingerprint:
            r.system_fingerprint = chunk.system_fingerprint
        if chunk.finish_reason is not None:
            r.finish_reason = chunk.finish_reason

    def prefill(self, t_first_us: int) -> Prefill:
        t = self.timings
        if t is not None and "prompt_ms" in t:
            return Prefill(
                n_tokens=int(t.get("prompt_n", 0)),
                t_start_us=self.t_send_us,
                t_end_us=self.t_send_us + int(t["prompt_ms"] * 1000),
                source=f"server: llama-server timings.prompt_ms over prompt_n ({int(t.get('cache_n', 0))} more reused from its cache)",
            )
        counted = "prompt tokens counted with the local vocabulary" if self.n_prompt_local else "prompt tokens not reported"
        return Prefill(
            n_tokens=self.n_prompt_local,
            t_start_us=self.t_send_us,
            t_end_us=t_first_us,
            source=f"client: request sent to first content chunk (network, queueing, prefill and the first token); {counted}",
        )

    def finish(self, error: str) -> tuple[FinishReason, str]:
        """The end reason, and the error (if any) in one line."""
        self.report.token_ids = "+".join(sorted(self.methods)) or "none"
        if error:
            received = f" (after {self.report.chunks} content chunk{'s' if self.report.chunks != 1 else ''})"
            return "error", error + received
        if self.interrupted:
            return "interrupted", ""
        reason = self.report.finish_reason
        if not self.done and not reason:
            chunks = self.report.chunks
            return "error", f"the server closed the connection mid-stream (after {chunks} content chunks; no finish reason, no [DONE])"
        return ("length" if reason == "length" else "stop"), ""
