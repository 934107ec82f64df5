"""``spectui export --otel-json`` / ``--otel-endpoint`` and ``spectui run --otel-file`` in real
subprocesses: JSON lines that parse, an OTLP/HTTP collector on 127.0.0.1 that receives the
protobuf, a live run that writes its telemetry, and one-line errors."""

from __future__ import annotations

import http.server
import json
import os
import threading

import pytest

from tests.conftest import REPO, run_cli

pytest.importorskip("opentelemetry.sdk")

SPEC = os.path.join(REPO, "recordings", "short-control.spec-ngram-k4.spectui")
AR = os.path.join(REPO, "recordings", "short-control.ar.spectui")
SPANS = {"spectui.prefill", "spectui.decode", "chat SmolLM2-135M-Instruct.Q4_1"}
METRICS = {
    "gen_ai.client.token.usage",
    "gen_ai.client.operation.duration",
    "gen_ai.server.time_to_first_token",
    "gen_ai.server.time_per_output_token",
    "spectui.draft.tokens.drafted",
    "spectui.draft.tokens.accepted",
    "spectui.draft.rollbacks",
    "spectui.draft.forwards",
    "spectui.draft.acceptance_rate",
}


def _refuse_nan(token: str) -> float:
    raise AssertionError(f"{token} is not JSON")


def parse_lines(text: str) -> tuple[list[str], set[str]]:
    """Span names (in order) and metric names of a JSON-lines export; strict JSON only."""
    spans, metrics = [], set()
    for line in text.splitlines():
        doc = json.loads(line, parse_constant=_refuse_nan)
        if "resource_metrics" in doc:
            metrics |= {m["name"] for rm in doc["resource_metrics"] for sm in rm["scope_metrics"] for m in sm["metrics"]}
        else:
            assert doc["context"]["trace_id"].startswith("0x") and doc["start_time"] and doc["end_time"]
            spans.append(doc["name"])
    return spans, metrics


def test_export_otel_json_to_a_file(tmp_path):
    out = tmp_path / "out.jsonl"
    proc = run_cli("export", SPEC, AR, "--otel-json", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    spans, metrics = parse_lines(out.read_text())
    assert sorted(spans) == sorted([*SPANS, *SPANS])  # one trace per recording
    assert metrics == METRICS
    assert proc.stderr.count("-> trace ") == 2
    implied = run_cli("export", AR, "-o", str(tmp_path / "ar.jsonl"))  # -o alone means JSON lines
    assert implied.returncode == 0, implied.stderr
    assert set(parse_lines((tmp_path / "ar.jsonl").read_text())[0]) == SPANS


def test_export_otel_json_to_stdout():
    proc = run_cli("export", AR, "--otel-json")
    assert proc.returncode == 0, proc.stderr
    spans, metrics = parse_lines(proc.stdout)
    assert set(spans) == SPANS
    assert metrics == METRICS - {m for m in METRICS if m.startswith("spectui.draft")}  # AR: nothing drafted


@pytest.mark.parametrize(
    "args, message",
    [
        (("export", "recordings/no-such.spectui", "--otel-json"), "recording not found: recordings/no-such.spectui"),
        (("export", AR), "export needs a format"),
        (("export", AR, "--otel-endpoint", "localhost:4318"), "is not an http(s) URL"),
        (("export", AR, "--otel-json", "-o", "/no/such/dir/x.jsonl"), "no such directory"),
    ],
)
def test_export_bad_input_is_one_line_and_exit_2(args, message):
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_export_of_a_file_that_is_not_a_recording(tmp_path):
    junk = tmp_path / "junk.spectui"
    junk.write_text("hello")
    proc = run_cli("export", str(junk), "--otel-json")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "not a spectui recording" in proc.stderr


class _Collector(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver on 127.0.0.1: keeps each POST, answers ``status``."""

    status = 200
    received: list[tuple[str, bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((self.path, body))
        self.send_response(type(self).status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def collector():
    handler = type("Handler", (_Collector,), {"received": [], "status": 200})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield handler, f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_export_to_an_otlp_http_endpoint(collector):
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    handler, url = collector
    proc = run_cli("export", SPEC, "--otel-endpoint", url)
    assert proc.returncode == 0, proc.stderr
    by_path = {}
    for path, body in handler.received:
        by_path.setdefault(path, []).append(body)
    assert set(by_path) == {"/v1/traces", "/v1/metrics"}
    traces = [ExportTraceServiceRequest.FromString(b) for b in by_path["/v1/traces"]]
    spans = {s.name: s for r in traces for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans}
    assert set(spans) == SPANS
    attrs = {a.key for a in spans["chat SmolLM2-135M-Instruct.Q4_1"].attributes}
    assert {"gen_ai.provider.name", "gen_ai.usage.output_tokens", "spectui.draft.acceptance_rate"} <= attrs
    metrics = [ExportMetricsServiceRequest.FromString(b) for b in by_path["/v1/metrics"]]
    assert {m.name for r in metrics for rm in r.resource_metrics for sm in rm.scope_metrics for m in sm.metrics} == METRICS


def test_an_endpoint_that_refuses_the_export_is_one_line_and_exit_2(collector):
    handler, url = collector
    handler.status = 400  # not retried by the OTLP exporter: the test stays fast
    proc = run_cli("export", AR, "--otel-endpoint", url)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and f"OpenTelemetry export to {url} failed" in proc.stderr


def test_export_of_a_torn_recording(tmp_path):
    torn = tmp_path / "torn.spectui"
    torn.write_bytes(open(SPEC, "rb").read()[:-25])
    proc = run_cli("export", str(torn), "--otel-json")
    assert proc.returncode == 0, proc.stderr
    assert "truncated at byte" in proc.stderr
    spans, metrics = parse_lines(proc.stdout)
    assert set(spans) == SPANS and "spectui.draft.tokens.drafted" in metrics


@pytest.mark.slow
def test_a_live_headless_run_writes_its_telemetry(tmp_path):
    out = tmp_path / "live.jsonl"
    proc = run_cli(
        # a fixed K drafts at every step, so every draft metric is there (the cost-aware
        # default drafts nothing on a greeting, and a rate of nothing is not exported)
        "run", "--headless", "--prompt-name", "short-greeting", "--max-tokens", "16", "--k", "4", "--no-record",
        "--otel-file", str(out),
    )
    assert proc.returncode == 0, proc.stderr
    assert f"exported to {out}" in proc.stderr
    lines = out.read_text().splitlines()
    spans, metrics = parse_lines("\n".join(lines))
    assert set(spans) == SPANS and metrics == METRICS
    session = next(json.loads(line) for line in lines if json.loads(line).get("name", "").startswith("chat "))
    assert session["attributes"]["gen_ai.request.max_tokens"] == 16
    assert session["attributes"]["gen_ai.usage.output_tokens"] <= 16


def test_run_refuses_an_unwritable_otel_file_before_loading_the_model():
    proc = run_cli("run", "--headless", "--no-record", "--otel-file", "/no/such/dir/x.jsonl", timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "no such directory" in proc.stderr
