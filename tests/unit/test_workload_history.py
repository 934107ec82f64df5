"""Workloads over time in ``spectui history``: a series per workload, setting and load; a newest
speedup under the earlier median is said; a workload's request recordings are not history runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec

from spectui.workload.history import find_workloads, series_text, workload_series
from spectui.workload.result import RESULT_NAME, LevelResult, WorkloadResult
from tests.conftest import REPO


def write_result(folder: Path, started: str, speedup: float) -> None:
    folder.mkdir(parents=True)
    levels = [LevelResult(setting="llama-server AR", family="llama-server", ar=True, clients=2),
              LevelResult(setting="llama-server ngram-mod", family="llama-server", ar=False, clients=2, speedup=speedup,
                          acceptance=0.6, counts={"defect": 0})]
    result = WorkloadResult(workload="mixed-12", path="mixed-12.jsonl", n_requests=12, settings=["llama-server AR", "llama-server ngram-mod"],
                            levels=levels, started_at=started, complete=True, host="cpu x2")
    (folder / RESULT_NAME).write_bytes(msgspec.json.encode(result))


def test_a_series_per_setting_and_load_and_a_drop_is_said(tmp_path: Path) -> None:
    for i, (day, speedup) in enumerate((("2026-11-01", 1.40), ("2026-11-10", 1.38), ("2026-11-20", 1.05))):
        write_result(tmp_path / f"workload-{i}", f"{day}T10:00:00+00:00", speedup)
    notes: list[str] = []
    series = workload_series(find_workloads([str(tmp_path)], notes))
    assert not notes and len(series) == 1
    s = series[0]
    assert (s.workload, s.setting, s.load) == ("mixed-12", "llama-server ngram-mod", "2 clients")
    assert [p.speedup for p in s.points] == [1.40, 1.38, 1.05]
    assert "1.05x on 2026-11-20, 24% under the earlier median 1.39x" in s.drop
    assert "slower: mixed-12" in series_text(series)


def test_history_shows_workloads_and_keeps_their_requests_out_of_its_runs(tmp_path: Path) -> None:
    folder = tmp_path / "recordings" / "workload-1"
    write_result(folder, "2026-11-28T10:00:00+00:00", 1.2)
    # a request's recording inside the workload folder: part of the series, not a run of its own
    (folder / "llama-server-ngram-mod" / "c2" / "pass0").mkdir(parents=True)
    shutil.copy(Path(REPO) / "tests" / "data" / "fixed-session.spectui", folder / "llama-server-ngram-mod" / "c2" / "pass0" / "0000.spectui")
    proc = subprocess.run([sys.executable, "-m", "spectui", "history", str(tmp_path / "recordings"), "--index", str(tmp_path / "h.sqlite"),
                           "--json"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["workloads"][0]["points"][0]["speedup"] == 1.2
    assert not doc["groups"]  # the request recording is not indexed as a run
