"""``spectui watch URL --host NODE``: the node watches and streams its readings back, over a real
OpenSSH server on 127.0.0.1 (``tests/remote/conftest.py``: the node is this machine). The server
watched is the stand-in of ``standin.py``, reached by the node at the URL as the node sees it.

What must hold: the readings that come back are the readings a local watch makes (the same
figures through a restart), the recording is written here with the node's name in its header,
the process stats are the node's (the node found the process on its loopback port), the server
saw only GETs; a node that cannot watch the URL says why in one line, exit 1.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from spectui.recording.reader import read_recording
from spectui.recording.watch_records import WatchReading
from tests.conftest import REPO
from tests.remote.conftest import Node, start_node, stop_node
from tests.watch.standin import assert_only_reads

pytestmark = [pytest.mark.server, pytest.mark.slow]


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Node:
    node = start_node(tmp_path_factory.mktemp("sshd-watch"))
    yield node
    stop_node(node)


def spectui(node: Node, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spectui", *args], capture_output=True, text=True, timeout=180, cwd=REPO,
                          env=node.environ())  # fmt: skip


def test_the_node_watches_and_streams_back(node, llama_standin, tmp_path):
    out = tmp_path / "from-node.spectui"
    proc = spectui(node, "watch", llama_standin.url, "--host", "node-a", "--json", "--samples", "4", "--interval", "0.2", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [e["event"] for e in events] == ["start", "sample", "sample", "sample", "sample", "end"]
    start, samples, end = events[0], events[1:-1], events[-1]
    assert start["server"] == "llama-server" and start["identity"]["build"] == "b9999-standin"
    assert start["process"].endswith(f"pid {os.getpid()}")  # the node found the stand-in's process on its loopback port
    one = samples[1]["interval"]
    assert (one["drafts"], one["draft_tokens"], one["accepted_tokens"]) == (62, 180, 126)
    assert samples[3]["interval"]["restarted"] is True and end["restarts"] == 1 and end["samples"] == 4
    assert all("process" in s for s in samples)

    rec = read_recording(out)
    assert rec.complete and rec.header.node == "node-a" and rec.header.watch is not None
    assert len([e for e in rec.events if type(e) is WatchReading]) == 4
    report = spectui(node, "report", str(out))
    assert report.returncode == 0 and "watched from" in report.stdout and "(node node-a)" in report.stdout
    assert_only_reads(llama_standin)
    assert llama_standin.requests.count(("GET", "/metrics")) == 4


def test_a_node_that_cannot_watch_says_why_in_one_line(node):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = spectui(node, "watch", f"http://127.0.0.1:{port}", "--host", "node-a", "--headless")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("spectui: error: node node-a: ") and "connection refused" in lines[0]
    unreachable = spectui(node, "watch", "http://127.0.0.1:1", "--host", "nowhere", "--headless")
    assert unreachable.returncode == 2 and "cannot reach node nowhere" in unreachable.stderr
