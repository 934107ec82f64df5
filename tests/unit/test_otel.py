"""OpenTelemetry export of real sample recordings, read back through the SDK's in-memory
exporter and reader: span names and tree, attribute names and values, timestamps, metric sums."""

from __future__ import annotations

import datetime as dt
import math
import os
import subprocess
import sys

import msgspec
import pytest

from spectui.errors import SpectuiError
from spectui.metrics.stats import summarize
from spectui.recording.reader import read_recording
from spectui.recording.schema import End, Header, PolicyChange, Prefill, Step
from spectui.telemetry import MISSING_EXTRA, OtelDestination
from tests.conftest import REPO

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

SPEC = os.path.join(REPO, "recordings", "load-typo-fix.spec-ngram-k4.spectui")
AR = os.path.join(REPO, "recordings", "short-control.ar.spectui")

#: Every session-span attribute the issue names (spec session: all of them are defined).
SESSION_ATTRIBUTES = [
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.request.temperature",
    "gen_ai.request.top_k",
    "gen_ai.request.top_p",
    "gen_ai.request.seed",
    "gen_ai.request.max_tokens",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.response.finish_reasons",
    "spectui.mode",
    "spectui.draft.source",
    "spectui.draft.k",
    "spectui.draft.drafted",
    "spectui.draft.accepted",
    "spectui.draft.rollbacks",
    "spectui.draft.forwards",
    "spectui.draft.acceptance_rate",
    "spectui.draft.mean_accepted_length",
    "spectui.decode.tok_s",
    "spectui.ttft_ms",
    "spectui.itl.p50_ms",
    "spectui.itl.p95_ms",
    "spectui.itl.p99_ms",
    "spectui.memory.peak_rss_bytes",
    "spectui.model.sha256",
    "spectui.runtime.llama_cpp_python",
    "spectui.runtime.llama_cpp",
]
#: Summary field behind each numeric attribute.
FROM_SUMMARY = {
    "gen_ai.usage.input_tokens": "n_prompt_tokens",
    "gen_ai.usage.output_tokens": "n_tokens",
    "spectui.draft.drafted": "drafted",
    "spectui.draft.accepted": "accepted",
    "spectui.draft.rollbacks": "rollbacks",
    "spectui.draft.forwards": "draft_forwards",
    "spectui.draft.acceptance_rate": "acceptance_rate",
    "spectui.draft.mean_accepted_length": "mean_accepted_length",
    "spectui.decode.tok_s": "decode_tok_s",
    "spectui.ttft_ms": "ttft_ms",
    "spectui.itl.p50_ms": "itl_p50_ms",
    "spectui.itl.p95_ms": "itl_p95_ms",
    "spectui.itl.p99_ms": "itl_p99_ms",
    "spectui.memory.peak_rss_bytes": "peak_rss_bytes",
}
GEN_AI_METRICS = {
    "gen_ai.client.token.usage",
    "gen_ai.client.operation.duration",
    "gen_ai.server.time_to_first_token",
    "gen_ai.server.time_per_output_token",
}
DRAFT_METRICS = {
    "spectui.draft.tokens.drafted",
    "spectui.draft.tokens.accepted",
    "spectui.draft.rollbacks",
    "spectui.draft.forwards",
    "spectui.draft.acceptance_rate",
}


def export(events):
    """Spans by name and metrics by name, through the real SDK and in-memory exporters."""
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    with OtelDestination(span_exporter=spans, metric_reader=reader) as dest:
        trace_id = dest.emit(events)
        data = reader.get_metrics_data()
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    finished = spans.get_finished_spans()
    assert len({s.name for s in finished}) == len(finished)
    assert all(s.context.trace_id == trace_id for s in finished)
    return {s.name: s for s in finished}, metrics


def epoch_ns(header: Header) -> int:
    started = dt.datetime.fromisoformat(header.started_at)
    return round(started.timestamp() * 1e6) * 1000  # started_at has millisecond precision


def session_span(spans):
    (name,) = [n for n in spans if not n.startswith("spectui.")]
    return spans[name]


def points(metric):
    return list(metric.data.data_points)


def test_spec_recording_spans_names_tree_attributes_and_times():
    rec = read_recording(SPEC)
    s = summarize(rec.events)
    spans, _ = export(rec.events)
    session = session_span(spans)
    assert session.name == "chat SmolLM2-135M-Instruct.Q4_1"  # "{operation} {model}"
    assert set(spans) == {session.name, "spectui.prefill", "spectui.decode"}
    assert session.parent is None
    for child in ("spectui.prefill", "spectui.decode"):
        assert spans[child].parent.span_id == session.context.span_id

    attrs = session.attributes
    missing = [k for k in SESSION_ATTRIBUTES if k not in attrs]
    assert not missing
    for key, field in FROM_SUMMARY.items():
        assert attrs[key] == getattr(s, field), key
    c = rec.header.config
    assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.provider.name"] == "llama.cpp"
    assert attrs["gen_ai.request.temperature"] == c.sampling.temperature
    assert attrs["gen_ai.request.max_tokens"] == c.max_tokens
    assert attrs["gen_ai.response.finish_reasons"] == (s.finish_reason,)
    assert attrs["spectui.mode"] == "spec" and attrs["spectui.draft.source"] == "ngram" and attrs["spectui.draft.k"] == 4
    assert attrs["spectui.model.sha256"] == rec.header.artifacts.target.sha256
    assert attrs["spectui.runtime.llama_cpp_python"] == rec.header.artifacts.runtime["llama-cpp-python"]
    assert s.drafted > 0 and s.rollbacks > 0  # the sample is a real speculative session

    t0 = epoch_ns(rec.header)
    prefill = next(e for e in rec.events if type(e) is Prefill)
    end = rec.events[-1]
    assert type(end) is End
    last_token = [e for e in rec.events if type(e) is Step][-1].t_us[-1]
    assert session.start_time == t0 and session.end_time == t0 + end.t_us * 1000
    assert spans["spectui.prefill"].start_time == t0 + prefill.t_start_us * 1000
    assert spans["spectui.prefill"].end_time == t0 + prefill.t_end_us * 1000
    assert spans["spectui.decode"].start_time == t0 + prefill.t_end_us * 1000
    assert spans["spectui.decode"].end_time == t0 + last_token * 1000
    assert session.status.status_code is StatusCode.UNSET


def test_spec_recording_metrics_names_and_sums():
    rec = read_recording(SPEC)
    s = summarize(rec.events)
    steps = [e for e in rec.events if type(e) is Step]
    _, metrics = export(rec.events)
    assert GEN_AI_METRICS | DRAFT_METRICS <= set(metrics)

    def total(name):
        (p,) = points(metrics[name])
        return p.value

    assert total("spectui.draft.tokens.drafted") == sum(e.drafted for e in steps) == s.drafted
    assert total("spectui.draft.tokens.accepted") == sum(e.accepted for e in steps) == s.accepted
    assert total("spectui.draft.rollbacks") == s.rollbacks
    assert total("spectui.draft.forwards") == sum(e.draft_forwards for e in steps)
    (rate,) = points(metrics["spectui.draft.acceptance_rate"])
    assert rate.count == 1 and rate.sum == s.acceptance_rate

    usage = {p.attributes["gen_ai.token.type"]: p for p in points(metrics["gen_ai.client.token.usage"])}
    assert usage["input"].sum == s.n_prompt_tokens and usage["output"].sum == s.n_tokens
    assert metrics["gen_ai.client.token.usage"].unit == "{token}"
    for p in usage.values():
        assert p.attributes["gen_ai.request.model"] == "SmolLM2-135M-Instruct.Q4_1"
        assert p.attributes["gen_ai.operation.name"] == "chat"

    (ttft,) = points(metrics["gen_ai.server.time_to_first_token"])
    assert ttft.count == 1 and ttft.sum == pytest.approx(s.ttft_ms / 1000, rel=1e-12)
    # one point per inter-token gap: the mean is 1 / decode tok/s
    times = [t for e in steps for t in e.t_us]
    (tpot,) = points(metrics["gen_ai.server.time_per_output_token"])
    assert tpot.count == s.n_tokens - 1 == len(times) - 1
    assert tpot.sum == pytest.approx((times[-1] - times[0]) / 1e6, rel=1e-9)
    assert tpot.count / tpot.sum == pytest.approx(s.decode_tok_s, rel=1e-9)
    (duration,) = points(metrics["gen_ai.client.operation.duration"])
    assert duration.sum == rec.events[-1].t_us / 1e6
    for name in GEN_AI_METRICS - {"gen_ai.client.token.usage"}:
        assert metrics[name].unit == "s"


def test_ar_recording_has_no_draft_metrics_and_no_undefined_attributes():
    rec = read_recording(AR)
    s = summarize(rec.events)
    spans, metrics = export(rec.events)
    attrs = session_span(spans).attributes
    assert attrs["spectui.mode"] == "ar" and "spectui.draft.source" not in attrs
    assert attrs["spectui.draft.drafted"] == 0 and math.isnan(s.acceptance_rate)
    assert "spectui.draft.acceptance_rate" not in attrs  # NaN is left out, not written
    assert not [k for k, v in attrs.items() if isinstance(v, float) and math.isnan(v)]
    assert GEN_AI_METRICS <= set(metrics) and not DRAFT_METRICS & set(metrics)
    assert attrs["spectui.decode.tok_s"] == s.decode_tok_s


def test_policy_changes_become_span_events_and_an_error_end_sets_the_status():
    rec = read_recording(SPEC)
    events = list(rec.events)
    end = events[-1]
    policy = PolicyChange(t_us=end.t_us // 2, before="ngram K=4", after="ngram K=2", reason="acceptance 0.10 < 0.30")
    events.insert(len(events) // 2, policy)
    events[-1] = msgspec.structs.replace(end, reason="error", error="RuntimeError: llama_decode returned -3")
    spans, metrics = export(events)
    session = session_span(spans)
    assert session.status.status_code is StatusCode.ERROR
    assert session.status.description == "RuntimeError: llama_decode returned -3"
    assert session.attributes["error.type"] == "RuntimeError"
    assert session.attributes["gen_ai.response.finish_reasons"] == ("error",)
    (ev,) = session.events
    assert ev.name == "spectui.policy_change"
    assert dict(ev.attributes) == {
        "spectui.policy.before": "ngram K=4",
        "spectui.policy.after": "ngram K=2",
        "spectui.policy.reason": "acceptance 0.10 < 0.30",
    }
    assert ev.timestamp == epoch_ns(rec.header) + policy.t_us * 1000
    # the latency metrics are defined for successful responses only
    assert "gen_ai.server.time_to_first_token" not in metrics
    (duration,) = points(metrics["gen_ai.client.operation.duration"])
    assert duration.attributes["error.type"] == "RuntimeError"


def test_a_torn_recording_exports_what_it_holds(tmp_path):
    data = open(SPEC, "rb").read()
    torn = tmp_path / "torn.spectui"
    torn.write_bytes(data[:-25])  # the End record and a little before it
    rec = read_recording(torn)
    assert rec.truncated and not rec.complete
    spans, metrics = export(rec.events)
    session = session_span(spans)
    last = [e for e in rec.events if type(e) is Step][-1].t_us[-1]
    assert session.end_time >= epoch_ns(rec.header) + last * 1000
    assert "gen_ai.response.finish_reasons" not in session.attributes
    assert session.attributes["gen_ai.usage.output_tokens"] == summarize(rec.events).n_tokens
    (drafted,) = points(metrics["spectui.draft.tokens.drafted"])
    assert drafted.value == sum(e.drafted for e in rec.events if type(e) is Step)


def test_a_stream_without_a_header_or_start_time_is_refused():
    rec = read_recording(AR)
    with pytest.raises(SpectuiError, match="must start with its header"):
        export(rec.events[1:])
    no_time = [msgspec.structs.replace(rec.header, started_at=""), *rec.events[1:]]
    with pytest.raises(SpectuiError, match="no start time"):
        export(no_time)


def test_two_sessions_share_a_destination_and_the_counters_add_up(tmp_path):
    spec, ar = read_recording(SPEC), read_recording(AR)
    out = tmp_path / "both.jsonl"
    with OtelDestination(jsonl=out) as dest:
        ids = {dest.emit(spec.events), dest.emit(ar.events)}
    assert len(ids) == 2
    lines = [msgspec.json.decode(line) for line in out.read_bytes().splitlines()]
    assert [d["name"] for d in lines if "name" in d].count("spectui.decode") == 2
    (metrics_line,) = [d for d in lines if "resource_metrics" in d]
    names = {m["name"] for rm in metrics_line["resource_metrics"] for sm in rm["scope_metrics"] for m in sm["metrics"]}
    assert GEN_AI_METRICS | DRAFT_METRICS <= names
    usage = next(
        m for rm in metrics_line["resource_metrics"] for sm in rm["scope_metrics"] for m in sm["metrics"]
        if m["name"] == "gen_ai.client.token.usage"
    )
    outputs = [p["sum"] for p in usage["data"]["data_points"] if p["attributes"]["gen_ai.token.type"] == "output"]
    assert sorted(outputs) == sorted([summarize(spec.events).n_tokens, summarize(ar.events).n_tokens])


def test_importing_the_exporter_pulls_in_neither_opentelemetry_nor_the_ui():
    code = (
        "import sys, spectui.telemetry, spectui.cli.recordings, spectui.cli.run, spectui.cli\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('opentelemetry', 'textual', 'rich')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_without_the_extra_the_export_says_how_to_install_it():
    # None in sys.modules makes any `import opentelemetry...` fail, as in an install without it
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None\n"
        "from spectui.cli import main\n"
        f"sys.exit(main(['export', {AR!r}, '--otel-json']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2
    assert proc.stderr == f"spectui: error: {MISSING_EXTRA}\n"
    assert proc.stdout == ""


def test_a_server_session_is_a_client_span_named_after_the_servers_model():
    from opentelemetry.trace import SpanKind

    from spectui.recording import schema

    if not hasattr(schema, "ServerArtifacts"):
        pytest.skip("this schema has no server sessions")
    rec = read_recording(SPEC)
    server = schema.ServerArtifacts(url="http://127.0.0.1:8080", kind="llama-server", model_id="smollm2-135m")
    header = msgspec.structs.replace(rec.header, artifacts=msgspec.structs.replace(rec.header.artifacts, server=server))
    spans, _ = export([header, *rec.events[1:]])
    session = session_span(spans)
    assert session.name == "chat smollm2-135m" and session.kind is SpanKind.CLIENT
    assert session.attributes["gen_ai.provider.name"] == "llama.cpp"


# -- no content: what people typed and what the model answered never leaves -----------------

#: The GenAI conventions' opt-in content attributes (prompts, answers, system instructions, tool
#: definitions); spectui sets none of them.
CONTENT_ATTRIBUTES = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "gen_ai.prompt",
    "gen_ai.completion",
)
SECRETS = ("Quetzalcoatl", "marzipanfabrik", "Zwetschgendatschi", "Ravenclaw", "Bartholomew")


def _with_text(events, *, content: bool):
    """The session with the prompt, system prompt, conversation and every token's text and id
    made of secret words (``content``), or with all of them empty and zero."""
    from spectui.config import ChatMessage

    h = events[0]
    word = (lambda i: SECRETS[i % len(SECRETS)]) if content else (lambda i: "")
    config = msgspec.structs.replace(
        h.config,
        prompt=f"Tell me about {word(0)} and {word(1)}." if content else "",
        system=f"You are {word(4)}." if content else "",
        history=(ChatMessage("user", word(2)), ChatMessage("assistant", word(3))),
    )
    header = msgspec.structs.replace(
        h, config=config, prompt_text=config.prompt, prompt_tokens=[i + 7 if content else 0 for i in range(len(h.prompt_tokens))]
    )
    out = [header]
    for ev in events[1:]:
        if type(ev) is Step:
            n = len(ev.tokens)
            ev = msgspec.structs.replace(
                ev,
                tokens=[(i + 11) if content else 0 for i in range(n)],
                pieces=[(" " + word(i)).encode() if content else b"" for i in range(n)],
                runner_up=None if ev.runner_up is None else [0] * n,
            )
        out.append(ev)
    return out


def _jsonl(events, path):
    with OtelDestination(jsonl=path) as dest:
        dest.emit(events)
    return [msgspec.json.decode(line) for line in path.read_bytes().splitlines()]


_DIFFERS_EVERY_TIME = ("trace_id", "span_id", "parent_id", "service.instance.id", "start_time_unix_nano", "time_unix_nano")


def _without_ids(obj):
    """The export with what differs between any two exports (trace, span and instance ids, the
    wall-clock times the SDK stamps on metric points when it collects them) taken out."""
    if isinstance(obj, dict):
        return {k: _without_ids(v) for k, v in obj.items() if k not in _DIFFERS_EVERY_TIME}
    if isinstance(obj, list):
        return [_without_ids(v) for v in obj]
    return obj


@pytest.mark.parametrize("path", [SPEC, AR], ids=["spec", "ar"])
def test_the_export_sends_no_content(path, tmp_path):
    """The prompt, the system prompt, the conversation, the output text and the token ids change
    nothing in what is exported: a session full of secret words and the same session with every
    text empty export the same spans, events and metrics (ids aside), and no secret word, no
    word of the real output and no content attribute appears anywhere in it."""
    from spectui.recording.output import output_text

    rec = read_recording(path)
    full = _jsonl(_with_text(rec.events, content=True), tmp_path / "full.jsonl")
    blank = _jsonl(_with_text(rec.events, content=False), tmp_path / "blank.jsonl")
    assert _without_ids(full) == _without_ids(blank)
    sent = (tmp_path / "full.jsonl").read_text()
    assert [w for w in SECRETS if w in sent] == []
    # the real recording, exported as it is: none of its prompt's or answer's longer words
    real = tmp_path / "real.jsonl"
    _jsonl(rec.events, real)
    words = {w for t in (rec.header.prompt_text, output_text(rec.events)) for w in t.split() if len(w) >= 6 and w.isalpha()}
    assert len(words) >= 5 and [w for w in words if w in real.read_text()] == []
    spans, metrics = export(_with_text(rec.events, content=True))
    keys = {k for s in spans.values() for k in s.attributes} | {k for s in spans.values() for e in s.events for k in e.attributes}
    keys |= {k for m in metrics.values() for p in points(m) for k in p.attributes}
    assert keys and not keys & set(CONTENT_ATTRIBUTES)
    assert not [k for k in keys if "prompt.text" in k or "message" in k or "content" in k]
