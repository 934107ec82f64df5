"""``spectui workload --server URL --hosts node-a,node-b``: the load of one workload sent from two
nodes (``tests/remote/conftest.py``: two spectui homes on this machine over a real loopback SSH
server) to a llama-server started by hand, every request recorded here with its node."""

from __future__ import annotations

import json

import pytest

from spectui.recording.reader import read_recording
from spectui.workload.result import load_result
from tests.remote.test_remote import spectui
from tests.runtime.test_workload import _serve

pytestmark = [pytest.mark.server, pytest.mark.slow]


def test_the_load_comes_from_each_node_and_every_request_is_recorded_here(node, llama_server_binary, model_path, tmp_path) -> None:
    server, url = _serve(llama_server_binary.path, model_path, "--spec-type", "ngram-simple")
    try:
        out = tmp_path / "run"
        proc = spectui(node, "workload", "summaries", "--server", url, "--target", model_path, "--hosts", "node-a,node-b",
                       "--clients", "2", "--max-tokens", "12", "--json", "--out", str(out))
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    levels = {(lv["clients"], lv["setting"]) for lv in doc["levels"]}
    assert levels == {(1, f"server {url}"), (2, f"server {url}")}
    result = load_result(out)
    at_two = next(lv for lv in result.levels if lv.clients == 2)
    nodes = {read_recording(out / r.recording).header.node for r in at_two.requests}
    assert nodes == {"node-a", "node-b"}  # client 0 sent from node-a, client 1 from node-b
    assert all(read_recording(out / r.recording).complete for lv in result.levels for r in lv.requests)
    # the server answers here too: its counters around each level, from this machine
    assert all("/metrics" in lv.acceptance_source for lv in result.levels)


def test_hosts_without_a_server_is_one_line(node) -> None:
    proc = spectui(node, "workload", "summaries", "--hosts", "node-a")
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "spectui: error: --hosts sends the load from several nodes to one server: name it with --server URL")
