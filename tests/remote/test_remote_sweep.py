"""``sweep --hosts ... --parallel`` over the loopback SSH server, and ``spectui history`` over its
nodes' recordings (``tests/remote/conftest.py``: ``node-a`` and ``node-b`` are two spectui homes on
this machine, ``nowhere`` a port nobody listens on).

One sweep serves the module: node-a, node-b and nowhere at once, a tiny plan (AR and K=2 on one
prompt, 12 tokens, one thread each: two model processes share this machine's two cores, so the
test asserts what was recorded, never how fast). What must hold: both real nodes record the whole
plan, the same tokens on each (greedy); the node that cannot be reached costs only its own part,
one stderr line naming it and exit 1; history groups the recordings by node, and when node-b's
runs got slower after its runtime changed, it says so, naming the runtime versions.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spectui.recording.reader import read_recording
from spectui.recording.schema import Step
from tests.functional.test_history import copy_recording
from tests.remote.conftest import second_home
from tests.remote.test_remote import spectui

pytestmark = [pytest.mark.server, pytest.mark.slow]

SLOWDOWN = 1.5


@pytest.fixture(scope="module")
def swept(node, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "out"
    proc = spectui(node, "sweep", "--hosts", "node-a,node-b,nowhere", "--parallel", "--prompts", "short-greeting", "--k-values", "2",
                   "--reps", "1", "--max-tokens", "12", "--threads", "1", "--json", "--out", str(out))  # fmt: skip
    return proc, out


def tokens(path: Path) -> list[int]:
    return [t for e in read_recording(path).events if type(e) is Step for t in e.tokens]


def test_a_parallel_sweep_records_the_same_tokens_on_each_node_and_loses_nothing_to_a_failed_one(swept, node):
    proc, out = swept
    assert proc.returncode == 1, proc.stderr  # one node failed
    errors = [line for line in proc.stderr.splitlines() if line.startswith("spectui: error:")]
    assert len(errors) == 1 and errors[0].startswith("spectui: error: the sweep on node nowhere failed: cannot reach node nowhere")
    doc = json.loads(proc.stdout)
    assert list(doc["failed"]) == ["nowhere"]
    nodes = doc["nodes"]
    assert list(nodes) == ["node-a", "node-b"] and all(n["complete"] and len(n["runs"]) == 2 for n in nodes.values())
    files = {name: sorted((out / name).glob("*.spectui")) for name in nodes}
    for name, paths in files.items():
        recordings = [read_recording(p) for p in paths]
        assert len(recordings) == 2 and all(r.complete and r.header.node == name for r in recordings)
    for a, b in zip(files["node-a"], files["node-b"]):
        assert a.name == b.name and tokens(a) == tokens(b) and tokens(a)  # the same plan, the same greedy tokens
    assert Path(second_home(node.folder)[0]).is_dir()  # node-b ran in a spectui home of its own


def test_history_groups_a_sweeps_recordings_by_node(swept, node, tmp_path):
    _, out = swept
    history = spectui(node, "history", str(out), "--json", "--index", str(tmp_path / "index.sqlite"))
    assert history.returncode == 0, history.stderr
    doc = json.loads(history.stdout)
    assert {g["key"]["host"].split(":")[0] for g in doc["groups"]} == {"node-a", "node-b"} and len(doc["groups"]) == 4
    assert sorted(h["host"].split(":")[0] for h in doc["hosts"]) == ["node-a", "node-b"]
    assert len(doc["side_by_side"]) == 2 and all(len(row["hosts"]) == 2 for row in doc["side_by_side"])  # AR and K=2


def test_history_names_the_runtime_change_on_the_node_that_got_slower(swept, node, tmp_path):
    """Each node's recordings laid out as two nights; on node-b's second night the header says a
    new llama-cpp-python and its clock runs 1.5x slower."""
    _, out = swept
    root = tmp_path / "nights"
    for name in ("node-a", "node-b"):
        for path in sorted((out / name).glob("*.spectui")):
            copy_recording(path, root / name / "night-1" / path.name, days_ago=2)
            edits = {"runtime": {"llama-cpp-python": "9.9.9"}, "slower": SLOWDOWN} if name == "node-b" else {}
            copy_recording(path, root / name / "night-2" / path.name, days_ago=1, **edits)
    history = spectui(node, "history", str(root), "--no-charts", "--index", str(tmp_path / "index.sqlite"))
    assert history.returncode == 0, history.stderr
    text = history.stdout
    before = read_recording(next((out / "node-b").glob("*.spectui"))).header.artifacts.runtime["llama-cpp-python"]
    # AR and K=2 on node-b, each in the hosts' list of slowdowns and under its own group
    assert text.count(f"changed: runtime llama-cpp-python {before} -> 9.9.9") == text.count("SLOWER") == 4
    assert "== host node-a" in text and "== host node-b" in text
    doc = json.loads(spectui(node, "history", str(root), "--json", "--index", str(tmp_path / "index.sqlite")).stdout)
    assert {s["host"].split(":")[0] for s in doc["slowdowns"]} == {"node-b"}
    assert all(row["differs"] == ["runtime"] for row in doc["side_by_side"])
