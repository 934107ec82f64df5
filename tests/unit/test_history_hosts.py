"""``spectui.history.changes`` and ``hosts`` on indexed runs made by hand (no model, no files):
where a host's line got slower beyond its noise, what changed on it then, and hosts side by side.
The same over real recordings: tests/functional/test_history.py, tests/remote/test_remote_sweep.py."""

from __future__ import annotations

import json

import pytest

from spectui.history.changes import MIN_NOISE, find_slowdowns, line_slowdowns
from spectui.history.hosts import side_by_side
from spectui.history.row import IndexedRun
from spectui.history.trend import build_groups


def run(n: int, tok_s: float, *, host: str = "node-a: cpu x2", runtime: str = "0.3.16", os: str = "Linux 6.1",
        sha: str = "a" * 64, mode: str = "ar") -> IndexedRun:  # fmt: skip
    return IndexedRun(
        path=f"/r/{host.split(':')[0]}-{mode}-{n:03d}.spectui", started_at=f"2026-11-01T{n // 60:02d}:{n % 60:02d}:00+00:00",
        host=host, target_sha256=sha, target_name="SmolLM2-135M", backend="llama.cpp", mode=mode,
        drafter="AR" if mode == "ar" else "n-gram", k="" if mode == "ar" else "K=4", sampling="greedy", prompt="p",
        runtime=json.dumps({"llama-cpp-python": runtime}), os=os, decode_tok_s=tok_s, complete=True,
    )  # fmt: skip


def test_a_runtime_upgrade_that_slows_a_host_is_named():
    runs = [run(i, 50.0) for i in range(3)] + [run(3 + i, 30.0, runtime="9.9.9") for i in range(3)]
    (slow,) = line_slowdowns(runs)
    assert slow.at == 3 and slow.before_tok_s == 50.0 and slow.after_tok_s == 30.0
    assert slow.drop == pytest.approx(0.4) and slow.noise == MIN_NOISE
    assert slow.changed_text() == "runtime llama-cpp-python 0.3.16 -> 9.9.9"


def test_a_new_model_file_or_os_is_named_and_an_unexplained_drop_says_so():
    runs = [run(0, 50.0), run(1, 40.0, sha="b" * 64)]
    runs += [run(2 + i, v, sha="b" * 64, os="Linux 6.9") for i, v in enumerate((30.0, 30.0, 20.0, 20.0))]
    assert [s.changed_text() for s in line_slowdowns(runs)] == [
        "target sha256 aaaaaaaaaaaa -> bbbbbbbbbbbb",
        "OS Linux 6.1 -> Linux 6.9",
        "nothing recorded (runtime, model and OS as before: load, heat or power on the host?)",
    ]


def test_one_slow_run_among_fast_ones_and_noise_are_not_slowdowns():
    assert line_slowdowns([run(i, 30.0 if i == 3 else 50.0) for i in range(7)]) == []  # the medians do not move
    noisy = [50.0, 44.0, 56.0, 50.0, 44.0, 56.0, 45.0, 44.0, 46.0]  # +-12%: a 10% dip is inside it
    assert line_slowdowns([run(i, v) for i, v in enumerate(noisy)]) == []
    steady = [50.0, 50.5, 49.5, 50.0, 45.0, 45.0, 45.5]  # +-1%: the same 10% dip is a slowdown
    (slow,) = line_slowdowns([run(i, v) for i, v in enumerate(steady)])
    assert slow.at == 4 and not slow.what


def test_one_slow_period_is_one_slowdown():
    runs = [run(i, 50.0) for i in range(4)] + [run(4 + i, 25.0) for i in range(4)]
    (slow,) = line_slowdowns(runs)
    assert slow.at == 4 and slow.runs_before == slow.runs_after == 4


def test_hosts_are_lines_of_their_own_and_side_by_side():
    runs = [run(i, 50.0) for i in range(3)] + [run(4, 50.0, runtime="9.9.9")]
    runs += [run(i, 40.0, host="node-b: cpu x2") for i in range(2)] + [run(2 + i, 20.0, host="node-b: cpu x2", runtime="9.9.9") for i in range(2)]
    slow = find_slowdowns(runs)
    assert [s.host for s in slow] == ["node-b: cpu x2"]  # node-a's upgrade cost nothing
    groups = build_groups(runs)
    assert [g.host for g in groups] == ["node-a: cpu x2", "node-b: cpu x2"] and groups[1].slowdowns == slow
    (row,) = side_by_side(groups)
    assert [(c.host, c.runs, c.decode_tok_s) for c in row.hosts] == [("node-a: cpu x2", 1, 50.0), ("node-b: cpu x2", 2, 20.0)]
    assert row.differs == []  # both on 9.9.9 now: only the machines differ
    runs.append(run(9, 55.0, runtime="9.9.9", os="Linux 6.9"))
    (row,) = side_by_side(build_groups(runs))
    assert row.differs == ["OS"]
