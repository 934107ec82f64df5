"""``spectui watch`` against a real HTTP server on 127.0.0.1 that this test runs: it answers
``/metrics`` with the texts of tests/data/metrics (one moment per reading, a restart before the
last), ``/props`` and ``/slots`` as llama-server does, and writes down every request it gets.
The watch must send GETs to its read-only paths and nothing else: no completion, ever.

The failures a person meets first are one line each: /metrics turned off (llama-server without
``--metrics``: HTTP 501), no /metrics at all (404), a refused connection, a bad URL.
"""

from __future__ import annotations

import json
import socket
import threading

import pytest

from tests.conftest import run_cli
from tests.watch.standin import StandIn, assert_only_reads, serve


def test_json_lines_follow_the_counters_through_a_restart(llama_standin):
    srv = llama_standin
    proc = run_cli("watch", srv.url, "--json", "--samples", "4", "--interval", "0.2", timeout=60)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [e["event"] for e in events] == ["start", "sample", "sample", "sample", "sample", "end"]
    start, samples, end = events[0], events[1:-1], events[-1]
    assert start["server"] == "llama-server" and start["identity"]["build"] == "b9999-standin"
    assert start["counts_at_request_end"] is True and "requests finished" in start["not_reported"]
    # the reading that found the server is the first sample: the four samples read moments 0-3
    first = samples[0]
    assert "interval" not in first and first["counters"]["accepted_per_position"] == []
    assert first["slots"] == {"slots": 1, "processing": 1, "speculative": 1, "decoded_in_flight": 17}
    one = samples[1]["interval"]
    assert one["restarted"] is False and (one["drafts"], one["draft_tokens"], one["accepted_tokens"]) == (62, 180, 126)
    assert one["per_position"] == pytest.approx([55 / 62, 43 / 62, 28 / 62])
    assert samples[2]["interval"]["accepted_tokens"] == pytest.approx(1200460 - 126)  # 1.20046e+06 as printed
    last = samples[3]["interval"]
    assert last["restarted"] is True and last["generated_tokens"] == 32 and last["per_position"] == pytest.approx([10 / 12, 7 / 12, 4 / 12])
    assert end["samples"] == 4 and end["restarts"] == 1 and end["failed_reads"] == 0
    # what the server saw: reads only, /metrics once to open and once per sample
    assert_only_reads(srv)
    assert srv.requests.count(("GET", "/metrics")) == 4  # one per reading, none spent on finding out
    assert srv.requests.count(("GET", "/props")) == 1


def test_headless_lines_say_acceptance_and_the_restart(vllm_standin):
    proc = run_cli("watch", vllm_standin.url, "--headless", "--samples", "3", "--interval", "0.2", timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "watching vLLM at" in out and "model standin-model" in out
    assert "accept 75.0% (900/1200)  mean len 3.25  by position 0.90 0.79 0.56" in out
    assert "server restarted" in out
    assert "finished 3" in out
    assert "Traceback" not in proc.stderr
    assert_only_reads(vllm_standin)


def test_duration_bounds_the_watch(vllm_standin):
    proc = run_cli("watch", vllm_standin.url, "--json", "--duration", "0.6", "--interval", "0.3", timeout=60)
    assert proc.returncode == 0, proc.stderr
    samples = [json.loads(line) for line in proc.stdout.splitlines() if '"sample"' in line]
    assert 2 <= len(samples) <= 3
    assert samples[-1]["t_s"] <= 0.6 + 0.3


def test_metrics_turned_off_is_one_line_saying_how():
    for srv in serve("llama-off"):
        proc = run_cli("watch", srv.url, "--headless", "--samples", "2", timeout=60)
        assert proc.returncode == 1
        assert proc.stdout == ""
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "start llama-server with --metrics" in lines[0], proc.stderr
        assert_only_reads(srv)


def test_no_metrics_endpoint_names_each_servers_switch():
    for srv in serve("none"):
        proc = run_cli("watch", srv.url, "--json", timeout=60)
        assert proc.returncode == 1
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "HTTP 404" in lines[0] and "--enable-metrics" in lines[0] and "--metrics" in lines[0]


def test_a_server_without_speculation_is_told_how_to_turn_it_on(tmp_path):
    text = (
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 1.0\n"
        "# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} 10.0\n"
    )
    srv = StandIn("vllm", [text])
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        proc = run_cli("watch", srv.url, "--headless", "--samples", "2", "--interval", "0.2", timeout=60)
    finally:
        srv.shutdown()
        srv.server_close()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("no speculative counters") == 1 and "--speculative-config" in proc.stdout


def test_refused_connection_and_bad_url_are_one_line():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = run_cli("watch", f"http://127.0.0.1:{port}", "--headless", timeout=60)
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1 and "connection refused" in proc.stderr
    assert "Traceback" not in proc.stderr
    bad = run_cli("watch", "ftp://127.0.0.1/x", timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "bad server URL" in bad.stderr
    bounds = run_cli("watch", "http://127.0.0.1:1", "--interval", "0", timeout=60)
    assert bounds.returncode == 2 and "--interval must be > 0" in bounds.stderr
