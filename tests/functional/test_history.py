"""``spectui history`` over real recordings: groups, an upgrade marked with the number that moved,
hosts as a column, staleness, sweep floors, bad files, and an index that is rebuilt or reused.

The recordings are made by ``spectui run`` / ``spectui sweep`` on the embedded model; the
timeline is then laid out the way weeks of nightly runs would leave it: copies whose header's
start time is moved back, and, for the "upgrade", a header whose runtime version changed (the
field a new llama-cpp-python writes) with its token times stretched by 1.5 (the slowdown the
history must pin on that upgrade). Copies go through the recording reader and writer, so every
file is a valid recording.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import sqlite3

import msgspec
import pytest

from spectui.cli import main
from spectui.recording.reader import read_recording
from spectui.recording.schema import End, Header, MemorySample, Step
from spectui.recording.writer import RecordingWriter
from tests.conftest import run_cli

PROMPT = "Repeat this line twice: the quick brown fox jumps over the lazy dog."
SLOWDOWN = 1.5


def copy_recording(src, dst, *, days_ago: float, runtime: dict | None = None, cpu: str | None = None, slower: float = 1.0,
                   node: str | None = None, os_release: str | None = None, target_sha256: str | None = None):  # fmt: skip
    """``src`` rewritten to ``dst`` with its header edited and its clock optionally stretched."""
    rec = read_recording(src)
    h = rec.header
    started = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=days_ago)
    artifacts = h.artifacts
    if runtime is not None:
        artifacts = msgspec.structs.replace(artifacts, runtime={**artifacts.runtime, **runtime})
    if cpu is not None or os_release is not None:
        host = artifacts.host
        host = msgspec.structs.replace(host, cpu=host.cpu if cpu is None else cpu, os=host.os if os_release is None else os_release)
        artifacts = msgspec.structs.replace(artifacts, host=host)
    if target_sha256 is not None:
        artifacts = msgspec.structs.replace(artifacts, target=msgspec.structs.replace(artifacts.target, sha256=target_sha256))
    header = msgspec.structs.replace(h, started_at=started.isoformat(), artifacts=artifacts, node=h.node if node is None else node)
    with RecordingWriter(dst) as w:
        for ev in rec.events:
            if type(ev) is Header:
                ev = header
            elif slower != 1.0 and type(ev) is Step:
                ev = msgspec.structs.replace(ev, t_us=[int(t * slower) for t in ev.t_us])
            elif slower != 1.0 and type(ev) in (End, MemorySample):
                ev = msgspec.structs.replace(ev, t_us=int(ev.t_us * slower))
            w.write(ev)
    return dst


@pytest.fixture(scope="session")
def made(tmp_path_factory):
    """Two real speculative runs and one real sweep, recorded once."""
    base = tmp_path_factory.mktemp("made")
    runs = []
    for i in range(2):
        path = base / f"run{i}.spectui"
        proc = run_cli("run", "--headless", "--mode", "spec", "--k", "4", "--max-tokens", "24", "--prompt", PROMPT, "--record", str(path))
        assert proc.returncode == 0, proc.stderr
        runs.append(path)
    sweep = base / "sweep"
    proc = run_cli(
        "sweep", "--headless", "--prompts", "copy-quote-paragraph", "--k", "4", "--k-values", "4", "--repeats", "1",
        "--max-tokens", "16", "--out", str(sweep),
    )
    assert proc.returncode == 0, proc.stderr
    return runs, sweep


@pytest.fixture
def timeline(made, tmp_path):
    """Nightly-style folders: host A upgraded its runtime halfway, host B stopped a month ago.
    Host A's copies share one source run, so the upgrade's slowdown is the only change."""
    (a1, a2), _ = made
    root = tmp_path / "nightly"
    for n, days in enumerate((6, 5)):
        copy_recording(a1, root / f"hostA/2025-0{n + 1}/old{n}.spectui", days_ago=days)
    for n, days in enumerate((4, 3, 2)):
        copy_recording(a1, root / f"hostA/2025-1{n}/new{n}.spectui", days_ago=days,
                       runtime={"llama-cpp-python": "9.9.9"}, slower=SLOWDOWN)
    for n, days in enumerate((31, 30)):
        copy_recording([a1, a2][n], root / f"hostB/b{n}.spectui", days_ago=days, cpu="Apple M4 (copied from a Mac mini)")
    return root


def history(capsys, *args: str):
    code = main(["history", *args])
    out, err = capsys.readouterr()
    return code, out, err


def history_json(capsys, *args: str) -> dict:
    code, out, err = history(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_upgrade_marked_with_the_number_that_moved(timeline, tmp_path, capsys):
    index = str(tmp_path / "index.sqlite")
    doc = history_json(capsys, str(timeline), "--index", index)
    assert doc["indexed"]["read"] == 7 and not doc["notes"]
    hosts = {g["key"]["host"] for g in doc["groups"]}
    assert len(hosts) == 2 and any("Apple M4" in h for h in hosts)  # host is a column of its own
    (a,) = [g for g in doc["groups"] if "Apple M4" not in g["key"]["host"]]
    assert len(a["runs"]) == 5 and a["key"]["drafter"] == "n-gram" and a["key"]["k"] == "K=4"
    # grouped and titled by the label the dashboard's header gives these runs (--k 4: a fixed K)
    assert a["key"]["label"] == "spec n-gram K=4" and " · spec n-gram K=4 · " in a["title"]
    (change,) = a["changes"]
    assert change["at"] == 2 and "new0.spectui" in change["path"]  # the first run that has it
    (what,) = change["what"]
    assert what["field"] == "runtime" and what["after"] == "llama-cpp-python 9.9.9"
    assert what["before"].startswith("llama-cpp-python 0.")
    tok_s = change["numbers"]["decode_tok_s"]
    assert tok_s["change"] == pytest.approx(1 / SLOWDOWN - 1, abs=0.05)  # the number that moved
    acceptance = change["numbers"]["acceptance"]
    assert acceptance["before"] == acceptance["after"] is not None  # and one that did not

    code, out, _ = history(capsys, str(timeline), "--index", index, "--charts")
    assert code == 0
    assert "runtime: llama-cpp-python 0." in out and "-> llama-cpp-python 9.9.9" in out
    assert "decode tok/s" in out and "(-3" in out  # ~ -33% across the upgrade
    assert "* slower, runtime" in out  # the table marks the run: slower, and what changed
    assert "time (UTC)" in out and "┌" in out  # charts against wall-clock time (spectui.charts) ...
    assert not re.search(r"\de-0", out)  # ... with no tick in scientific notation


def test_stale_groups_flagged(timeline, tmp_path, capsys):
    index = str(tmp_path / "index.sqlite")
    doc = history_json(capsys, str(timeline), "--index", index)
    stale = {("Apple M4" in g["key"]["host"]): g["stale"] for g in doc["groups"]}
    assert stale == {True: True, False: False}
    doc = history_json(capsys, str(timeline), "--index", index, "--stale-days", "40")
    assert not any(g["stale"] for g in doc["groups"])
    _, out, _ = history(capsys, str(timeline), "--index", index, "--no-charts")
    assert "STALE: the newest run is 30 days old" in out


def test_index_is_incremental(timeline, tmp_path, capsys):
    index = str(tmp_path / "index.sqlite")
    assert history_json(capsys, str(timeline), "--index", index)["indexed"]["read"] == 7
    again = history_json(capsys, str(timeline), "--index", index)["indexed"]
    assert (again["read"], again["unchanged"], again["removed"]) == (0, 7, 0)
    (timeline / "hostB/b0.spectui").unlink()
    shutil.copy(timeline / "hostB/b1.spectui", timeline / "hostB/b2.spectui")
    after = history_json(capsys, str(timeline), "--index", index)["indexed"]
    assert (after["read"], after["unchanged"], after["removed"]) == (1, 6, 1)


def test_corrupt_or_old_index_is_rebuilt(timeline, tmp_path, capsys):
    index = tmp_path / "index.sqlite"
    first = history_json(capsys, str(timeline), "--index", str(index))
    torn = index.read_bytes()[:100] + b"this is not a database" * 100  # SQLite's header, then damage
    index.write_bytes(torn)
    doc = history_json(capsys, str(timeline), "--index", str(index))
    assert len(doc["notes"]) == 1 and "is corrupt" in doc["notes"][0] and "moved it aside" in doc["notes"][0]
    assert [p.read_bytes() for p in tmp_path.glob("index.sqlite.corrupt-*")] == [torn]  # kept, never deleted
    assert doc["indexed"]["read"] == 7 and len(doc["groups"]) == len(first["groups"])
    with sqlite3.connect(index) as db:  # as an older spectui would have left it
        db.execute("UPDATE meta SET value = '0' WHERE key = 'schema'")
    doc = history_json(capsys, str(timeline), "--index", str(index))
    assert len(doc["notes"]) == 1 and "older spectui" in doc["notes"][0]
    assert history_json(capsys, str(timeline), "--index", str(index))["notes"] == []


def test_bad_files_are_one_line_notes(timeline, tmp_path, capsys):
    (timeline / "hostA/garbage.spectui").write_bytes(b"not a recording at all")
    code, out, err = history(capsys, str(timeline), str(tmp_path / "nowhere"), "--index", str(tmp_path / "i.sqlite"), "--no-charts")
    assert code == 0 and err == ""
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert len(notes) == 2
    assert any("garbage.spectui" in n and "not a spectui recording" in n for n in notes)
    assert any("no such folder" in n for n in notes)
    assert "7 runs in 2 groups" in out


def test_user_errors_are_one_line(tmp_path):
    proc = run_cli("history", str(tmp_path), "--index", str(tmp_path), "--json")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "is a folder" in proc.stderr
    proc = run_cli("history", str(tmp_path), "--stale-days", "0", "--index", str(tmp_path / "i.sqlite"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "--stale-days" in proc.stderr


def test_latest_sweep_floors_against_the_trend(made, tmp_path, capsys):
    _, sweep = made
    root = tmp_path / "nightly"
    shutil.copytree(sweep, root / "sweep-1")
    doc = history_json(capsys, str(root), "--index", str(tmp_path / "i.sqlite"))
    with_floor = [g for g in doc["groups"] if g["floor"] is not None]
    assert len(with_floor) == 1
    g = with_floor[0]
    assert g["key"]["k"] == "K=4" and g["prompt_tier"] and g["floor"]["source"].endswith("sweep-1")
    assert {c["metric"] for c in g["floor"]["checks"]} == {"acceptance", "decode tok/s"}
    assert all(c["passed"] for c in g["floor"]["checks"])  # the floor is the sweep's own worst run
    _, out, _ = history(capsys, str(root), "--index", str(tmp_path / "i.sqlite"), "--charts")
    assert "floors of the latest sweep" in out and "sweep floor" in out


def test_hosts_side_by_side_and_what_changed_on_the_one_that_got_slower(made, tmp_path, capsys):
    """Two spectui homes, each a node's recordings folder: node-a steady; on node-b the runtime is
    upgraded, then the model file replaced, then the OS, each time decoding 1.5x slower. history
    lists the hosts, names what changed on node-b at each slowdown, and sets the nodes side by side."""
    (a1, _), _ = made
    home_a, home_b = tmp_path / "home-a" / "recordings", tmp_path / "home-b" / "recordings"
    for n in range(8):
        copy_recording(a1, home_a / f"a{n}.spectui", days_ago=8.5 - n, node="node-a")
    upgrades = [{}, {"runtime": {"llama-cpp-python": "9.9.9"}}, {"target_sha256": "0" * 64}, {"os_release": "Linux-9.9-next"}]
    edits: dict = {}
    for step, upgrade in enumerate(upgrades):
        edits = {**edits, **upgrade}
        for n in range(2):
            copy_recording(a1, home_b / f"b{step}{n}.spectui", days_ago=8 - 2 * step - n, node="node-b", slower=SLOWDOWN**step, **edits)
    index = str(tmp_path / "index.sqlite")
    doc = history_json(capsys, str(home_a), str(home_b), "--index", index)
    assert [h["host"].split(":")[0] for h in doc["hosts"]] == ["node-b", "node-a"]  # the newest run first
    hosts_in_order = [g["key"]["host"].split(":")[0] for g in doc["groups"]]
    assert hosts_in_order == sorted(hosts_in_order, key=["node-b", "node-a"].index)  # host by host
    slow = doc["slowdowns"]
    assert {s["host"].split(":")[0] for s in slow} == {"node-b"}  # node-a's copies decode alike
    assert [[c["field"] for c in s["changed"]] for s in slow] == [["OS"], ["target sha256"], ["runtime"]]  # newest first
    assert all(s["decode_tok_s"]["change"] == pytest.approx(1 / SLOWDOWN - 1, abs=0.05) for s in slow)
    assert slow[-1]["changed"][0]["after"] == "llama-cpp-python 9.9.9" and slow[-1]["changed_text"].endswith("-> 9.9.9")
    (row,) = doc["side_by_side"]
    assert [c["host"].split(":")[0] for c in row["hosts"]] == ["node-a", "node-b"]  # the fastest first
    assert set(row["differs"]) == {"target sha256", "runtime", "OS"}
    assert row["hosts"][1]["decode_tok_s"] == pytest.approx(row["hosts"][0]["decode_tok_s"] / SLOWDOWN**3, rel=0.05)

    code, out, _ = history(capsys, str(home_a), str(home_b), "--index", index, "--no-charts")
    assert code == 0
    before = read_recording(a1).header.artifacts.runtime["llama-cpp-python"]
    assert f"changed: runtime llama-cpp-python {before} -> 9.9.9" in out
    assert "changed: OS " in out and "-> Linux-9.9-next" in out and "changed: target sha256 " in out
    assert out.index("== host node-b") < out.index("== host node-a") and "side by side:" in out
    assert "* slower, runtime" in out  # the group's table marks the run
