"""A session's event stream as OpenTelemetry spans and metrics (the ``otel`` extra).

One function, ``emit_session``, serves a live run (called with its events when the session
ends) and the conversion of a recording: the same events go through the same code, like replay.

Names follow the GenAI semantic conventions where they have one (``gen_ai.*``); speculative
decoding has none, so draft counters live under ``spectui.*``. Every number comes from
``summarize(events)``; this module only maps it onto OpenTelemetry names.

Time: spans carry the recording's own timestamps, not the time of the export: ``Header.started_at``
is the wall-clock time of t=0 and every event's ``t_us`` counts from there. Metric data points
cannot carry a past timestamp (the SDK's instruments have no timestamp argument), so a metric
point is stamped with the time of its export; its value is still the session's.

opentelemetry is imported inside the functions, never at the top: ``spectui --help`` and the
headless core must not need the extra.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Sequence
from typing import Any

from spectui import __version__
from spectui.errors import SpectuiError
from spectui.recording.schema import End, Event, Header, MemorySample, PolicyChange, Prefill, Step

MISSING_EXTRA = "OpenTelemetry export needs the otel extra: pip install 'spectui[otel]'"

#: The instrumentation scope of every span and instrument.
SCOPE = "spectui"

#: ``BackendConfig.name``, or a measured server's ``kind`` -> ``gen_ai.provider.name``; anything
#: else keeps its own name (the convention allows custom values).
PROVIDERS = {
    "llamacpp": "llama.cpp",
    "mlx": "mlx",
    "llama-server": "llama.cpp",
    "llama-cpp-python": "llama.cpp",
    "mlx-lm": "mlx",
}

PREFILL_SPAN = "spectui.prefill"
DECODE_SPAN = "spectui.decode"
POLICY_EVENT = "spectui.policy_change"

TOKEN_USAGE = "gen_ai.client.token.usage"
OPERATION_DURATION = "gen_ai.client.operation.duration"
TIME_TO_FIRST_TOKEN = "gen_ai.server.time_to_first_token"
#: One point per inter-token gap (not per step): the gaps a streaming client sees, so tokens of
#: one speculative block record 0 s. Sum / count is then (last - first token) / (tokens - 1),
#: the convention's "time per output token after the first", and the buckets hold the ITL shape.
TIME_PER_OUTPUT_TOKEN = "gen_ai.server.time_per_output_token"
DRAFTED_TOKENS = "spectui.draft.tokens.drafted"
ACCEPTED_TOKENS = "spectui.draft.tokens.accepted"
ROLLBACKS = "spectui.draft.rollbacks"
DRAFT_FORWARDS = "spectui.draft.forwards"
#: A histogram with one point per speculative session (accepted / drafted of that session).
ACCEPTANCE_RATE = "spectui.draft.acceptance_rate"

# Bucket advice from the GenAI conventions, except time per output token: its buckets start at
# 10 ms, which a local model beats, so finer ones come first (0 holds same-block tokens).
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
TPOT_BUCKETS = (
    *(0.0, 0.001, 0.0025, 0.005, 0.0075),  # spectui's additions
    *(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5),
)
RATE_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def require_otel() -> None:
    """Raise the one-line install hint when the extra is missing."""
    try:
        import opentelemetry.sdk.metrics
        import opentelemetry.sdk.trace  # noqa: F401 - imported only to see that the extra is installed
    except ImportError:
        raise SpectuiError(MISSING_EXTRA) from None


# --- names and values: plain functions of the events, no OpenTelemetry needed ---------------


def _server(header: Header) -> Any:
    """The measured server of a ``--server`` session, else None (getattr: older schemas)."""
    return getattr(header.artifacts, "server", None)


def provider_name(header: Header) -> str:
    server = _server(header)
    name = server.kind if server is not None and server.kind else header.config.backend.name
    return PROVIDERS.get(name, name)


def model_name(header: Header) -> str:
    """``gen_ai.request.model``: a server's model id, else the target's file name without
    ``.gguf`` (the GGUF's ``general.name`` is often a training-run label; the path is private)."""
    server = _server(header)
    if server is not None and server.model_id:
        return server.model_id
    path = header.artifacts.target.path or header.config.target
    name = os.path.basename(path.rstrip("/"))
    if name.lower().endswith(".gguf"):
        name = name[: -len(".gguf")]
    return name or header.artifacts.target.name or "unknown"


def operation_name(header: Header) -> str:
    return "chat" if header.config.chat else "text_completion"


def span_name(header: Header) -> str:
    """The GenAI convention's span name: ``{gen_ai.operation.name} {gen_ai.request.model}``."""
    return f"{operation_name(header)} {model_name(header)}"


def metric_attributes(header: Header) -> dict[str, Any]:
    """The low-cardinality attributes every metric point carries."""
    c = header.config
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": operation_name(header),
        "gen_ai.provider.name": provider_name(header),
        "gen_ai.request.model": model_name(header),
        "spectui.mode": c.mode,
    }
    if c.mode == "spec":
        attrs["spectui.draft.source"] = c.draft.kind
        if c.draft.fixed_k is not None:
            attrs["spectui.draft.k"] = c.draft.fixed_k
    return attrs


def session_attributes(header: Header, s: Any) -> dict[str, Any]:  # s: Summary
    """Everything on the session span. Undefined numbers (NaN: acceptance of an AR run, ITL of
    a one-token run) are left out: JSON cannot carry NaN, and absent reads as 'not measured'."""
    c, art = header.config, header.artifacts
    attrs = metric_attributes(header)
    attrs.update(
        {
            "gen_ai.request.temperature": c.sampling.temperature,
            "gen_ai.request.top_k": c.sampling.top_k,
            "gen_ai.request.top_p": c.sampling.top_p,
            "gen_ai.request.seed": c.sampling.seed,
            "gen_ai.request.max_tokens": c.max_tokens,
            "gen_ai.usage.input_tokens": s.n_prompt_tokens,
            "gen_ai.usage.output_tokens": s.n_tokens,
            "spectui.version": header.spectui_version,
            "spectui.clock": header.clock,
            "spectui.prompt.name": c.prompt_name,
            "spectui.prompt.tier": c.prompt_tier,
            "spectui.model.sha256": art.target.sha256,
            "spectui.model.quant": art.target.quant,
            "spectui.draft.drafted": s.drafted,
            "spectui.draft.accepted": s.accepted,
            "spectui.draft.rollbacks": s.rollbacks,
            "spectui.draft.forwards": s.draft_forwards,
            "spectui.draft.blocks": s.draft_blocks,
            "spectui.draft.acceptance_rate": s.acceptance_rate,
            "spectui.draft.mean_accepted_length": s.mean_accepted_length,
            "spectui.decode.tok_s": s.decode_tok_s,
            "spectui.decode.steady_tok_s": s.steady_tok_s,
            "spectui.prefill.ms": s.prefill_ms,
            "spectui.ttft_ms": s.ttft_ms,
            "spectui.itl.p50_ms": s.itl_p50_ms,
            "spectui.itl.p95_ms": s.itl_p95_ms,
            "spectui.itl.p99_ms": s.itl_p99_ms,
        }
    )
    if s.finish_reason:
        attrs["gen_ai.response.finish_reasons"] = (s.finish_reason,)
    if c.mode == "spec":
        attrs["spectui.draft.adaptive"] = c.draft.cost_aware
    if art.draft is not None:
        attrs["spectui.draft.model.sha256"] = art.draft.sha256
        attrs["spectui.draft.model.file"] = os.path.basename(art.draft.path)
    if s.peak_rss_bytes:  # 0: no memory samples in the stream
        attrs["spectui.memory.peak_rss_bytes"] = s.peak_rss_bytes
    if s.min_headroom_bytes >= 0:
        attrs["spectui.memory.min_headroom_bytes"] = s.min_headroom_bytes
    for key, value in art.runtime.items():
        # "llama-cpp-python" / "llama.cpp" -> one attribute each, not a dotted namespace
        attrs["spectui.runtime." + key.lower().replace("-", "_").replace(".", "_")] = value
    return {k: v for k, v in attrs.items() if not (isinstance(v, float) and math.isnan(v))}


def start_epoch_ns(header: Header) -> int:
    """Wall-clock nanoseconds of the session's t=0, exactly (no float round trip)."""
    if not header.started_at:
        raise SpectuiError("the session has no start time (its header's started_at is empty)")
    try:
        t = dt.datetime.fromisoformat(header.started_at)
    except ValueError:
        raise SpectuiError(f"the session's start time {header.started_at!r} is not an ISO 8601 time") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)  # spectui writes UTC
    return (t - _EPOCH) // dt.timedelta(microseconds=1) * 1000


def session_end_us(events: Sequence[Event]) -> int:
    """The session's end: its ``End`` (the final memory sample is taken just after it), or for
    a torn recording the latest thing it holds."""
    t = 0
    for ev in events:
        if type(ev) is End:
            return ev.t_us
        if type(ev) is Step:
            if ev.t_us:
                t = max(t, ev.t_us[-1])
        elif type(ev) is Prefill:
            t = max(t, ev.t_end_us)
        elif isinstance(ev, (MemorySample, PolicyChange)):
            t = max(t, ev.t_us)
    return t


# --- the one code path -----------------------------------------------------------------------


def emit_session(events: Sequence[Event], *, tracer_provider: Any, meter_provider: Any) -> int:
    """Turn one session's events (``Header`` first) into spans and metric points on the given
    providers; return the session's trace id. The providers are the caller's: nothing global
    is set, and nothing is flushed here (``OtelDestination.close`` does that)."""
    require_otel()
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, Status, StatusCode

    from spectui.metrics.stats import summarize

    if not events or type(events[0]) is not Header:
        raise SpectuiError("a session's event stream must start with its header")
    header = events[0]
    s = summarize(events)
    t0 = start_epoch_ns(header)

    def at(t_us: int) -> int:
        return t0 + t_us * 1000

    prefill = next((e for e in events if type(e) is Prefill), None)
    token_us = [t for e in events if type(e) is Step for t in e.t_us]
    n_steps = sum(1 for e in events if type(e) is Step)
    end = next((e for e in reversed(events) if type(e) is End), None)
    t_end = session_end_us(events)

    tracer = tracer_provider.get_tracer(SCOPE, __version__)
    # the convention: CLIENT for a call to a model server, INTERNAL for an in-process model
    kind = SpanKind.CLIENT if _server(header) is not None else SpanKind.INTERNAL
    session = tracer.start_span(span_name(header), kind=kind, start_time=t0, attributes=session_attributes(header, s))
    parent = trace.set_span_in_context(session)
    if prefill is not None:
        attrs: dict[str, float] = {"spectui.prefill.tokens": prefill.n_tokens}
        if not math.isnan(s.prefill_tok_s):
            attrs["spectui.prefill.tok_s"] = s.prefill_tok_s
        span = tracer.start_span(PREFILL_SPAN, context=parent, start_time=at(prefill.t_start_us), attributes=attrs)
        span.end(end_time=at(prefill.t_end_us))
    if token_us:
        attrs = {
            "spectui.decode.tokens": s.n_tokens,
            "spectui.decode.steps": n_steps,
            "spectui.draft.ms": s.draft_ms,
            "spectui.verify.ms": s.verify_ms,
        }
        if not math.isnan(s.decode_tok_s):
            attrs["spectui.decode.tok_s"] = s.decode_tok_s
        start = prefill.t_end_us if prefill is not None else token_us[0]
        span = tracer.start_span(DECODE_SPAN, context=parent, start_time=at(start), attributes=attrs)
        span.end(end_time=at(token_us[-1]))
    for ev in events:
        if type(ev) is PolicyChange:
            session.add_event(
                POLICY_EVENT,
                {
                    "spectui.policy.before": ev.before,
                    "spectui.policy.after": ev.after,
                    "spectui.policy.reason": ev.reason,
                },
                timestamp=at(ev.t_us),
            )
    # "RuntimeError: ..." -> "RuntimeError": the convention's low-cardinality error class
    error_type = (end.error.partition(":")[0] or "error") if end is not None and end.reason == "error" else None
    if end is not None and error_type is not None:
        session.set_attribute("error.type", error_type)
        session.set_status(Status(StatusCode.ERROR, end.error))
    session.end(end_time=at(t_end))

    _record_metrics(meter_provider.get_meter(SCOPE, __version__), header, s, token_us, t_end, error_type)
    return session.get_span_context().trace_id


def _histogram(meter: Any, name: str, unit: str, description: str, buckets: Sequence[float]) -> Any:
    return meter.create_histogram(name, unit=unit, description=description, explicit_bucket_boundaries_advisory=buckets)


def _record_metrics(
    meter: Any, header: Header, s: Any, token_us: list[int], t_end_us: int, error_type: str | None
) -> None:
    common = metric_attributes(header)
    usage = _histogram(meter, TOKEN_USAGE, "{token}", "Number of input and output tokens used.", TOKEN_BUCKETS)
    usage.record(s.n_prompt_tokens, {**common, "gen_ai.token.type": "input"})
    usage.record(s.n_tokens, {**common, "gen_ai.token.type": "output"})
    duration = _histogram(meter, OPERATION_DURATION, "s", "GenAI operation duration.", DURATION_BUCKETS)
    duration.record(t_end_us / 1e6, common if error_type is None else {**common, "error.type": error_type})
    if error_type is None:  # the convention defines both latency metrics "for successful responses"
        ttft = _histogram(
            meter, TIME_TO_FIRST_TOKEN, "s", "Time to generate first token for successful responses.", TTFT_BUCKETS
        )
        if not math.isnan(s.ttft_ms):
            ttft.record(s.ttft_ms / 1000, common)
        tpot = _histogram(
            meter,
            TIME_PER_OUTPUT_TOKEN,
            "s",
            "Time per output token after the first: one point per inter-token gap as a client sees it.",
            TPOT_BUCKETS,
        )
        for before, after in zip(token_us, token_us[1:]):
            tpot.record((after - before) / 1e6, common)
    if header.config.mode != "spec":
        return
    for name, unit, text, value in (
        (DRAFTED_TOKENS, "{token}", "Tokens proposed by the drafter.", s.drafted),
        (ACCEPTED_TOKENS, "{token}", "Drafted tokens the target accepted.", s.accepted),
        (ROLLBACKS, "{block}", "Draft blocks with a rejected token (caches truncated).", s.rollbacks),
        (DRAFT_FORWARDS, "{forward}", "Forward passes of a draft model (0 for n-gram drafts).", s.draft_forwards),
    ):
        meter.create_counter(name, unit=unit, description=text).add(value, common)
    if not math.isnan(s.acceptance_rate):
        text = "Accepted / drafted tokens, one point per session."
        rate = _histogram(meter, ACCEPTANCE_RATE, "1", text, RATE_BUCKETS)
        rate.record(s.acceptance_rate, common)


def trace_id_hex(trace_id: int) -> str:
    return f"{trace_id:032x}"


__all__ = [
    "MISSING_EXTRA",
    "emit_session",
    "session_attributes",
    "span_name",
    "trace_id_hex",
]
