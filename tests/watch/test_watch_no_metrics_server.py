"""``spectui watch`` against a real server that has no ``/metrics``: llama-cpp-python's
``python -m llama_cpp.server`` on the embedded model (its FastAPI app serves no Prometheus
text). The watch says so in one line, names each server's switch, exits 1, and the server's
access log shows it sent nothing but a GET."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.server.conftest import llama_cpp_server_args, start_server

pytestmark = [pytest.mark.slow, pytest.mark.server]


def test_a_real_server_without_metrics_is_one_line(model_path, tmp_path):
    server = start_server(llama_cpp_server_args(model_path), "/v1/models", str(tmp_path))
    try:
        proc = run_cli("watch", server.url, "--headless", "--samples", "2", timeout=120)
    finally:
        server.stop()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "serves no /metrics (HTTP 404)" in lines[0] and "--enable-metrics" in lines[0], proc.stderr
    log = Path(server.log).read_text(errors="replace")
    assert '"GET /metrics HTTP/1.1" 404' in log, log[-2000:]
    assert "POST" not in log
