"""Workloads over time: each (workload, setting, load) a series of its speedups, run after run.

``spectui history`` shows them beside its runs: the workload folders (``workload.json``) under
the folders it reads, each level's speedup, acceptance and exactness counts in the order the
workloads started, and a line where the newest speedup fell below the series' earlier median by
more than ``DROP`` (the machine, the server or the model changed; the folders say which).
A workload's own request recordings stay out of history's runs: they are its series' parts.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from spectui.errors import SpectuiError
from spectui.format import num, text_table
from spectui.metrics.stats import nanmedian
from spectui.workload.result import DEFECT, RESULT_NAME, WorkloadResult, load_result

#: a newest speedup this far under the series' earlier median is said
DROP = 0.10


@dataclass(frozen=True)
class Point:
    started_at: str
    folder: str
    host: str
    speedup: float
    acceptance: float
    defects: int


@dataclass
class Series:
    workload: str
    setting: str
    load: str  # "2 clients", "1/s"
    points: list[Point] = field(default_factory=list)

    @property
    def drop(self) -> str:
        """One line where the newest speedup fell below the earlier median ("" otherwise)."""
        if len(self.points) < 2:
            return ""
        earlier = nanmedian(p.speedup for p in self.points[:-1])
        last = self.points[-1]
        if not (math.isfinite(earlier) and math.isfinite(last.speedup)) or last.speedup >= earlier * (1 - DROP):
            return ""
        return (f"{self.workload} · {self.setting} · {self.load}: {last.speedup:.2f}x on {last.started_at[:10]}, "
                f"{1 - last.speedup / earlier:.0%} under the earlier median {earlier:.2f}x ({last.folder})")


def find_workloads(roots: Sequence[str], notes: list[str]) -> list[tuple[str, WorkloadResult]]:
    """Every workload folder under ``roots``; one that cannot be read is a note."""
    out = []
    for root in roots:
        for folder, _dirs, files in os.walk(root):
            if RESULT_NAME in files:
                try:
                    out.append((folder, load_result(folder)))
                except SpectuiError as exc:
                    notes.append(str(exc))
    return out


def workload_series(found: Sequence[tuple[str, WorkloadResult]]) -> list[Series]:
    """A series per (workload, setting, load), points in the order the workloads started; a
    level's last pass (the warmest) stands for it."""
    series: dict[tuple[str, str, str], Series] = {}
    for folder, result in sorted(found, key=lambda f: f[1].started_at):
        for lv in result.levels:
            if lv.ar or lv.pass_no != result.passes - 1:
                continue
            load = f"{lv.clients} client{'s' if lv.clients != 1 else ''}" if lv.clients else f"{lv.rate:g}/s"
            key = (result.workload, lv.setting, load)
            s = series.setdefault(key, Series(*key))
            s.points.append(Point(result.started_at, folder, result.host, lv.speedup, lv.acceptance, lv.counts.get(DEFECT, 0)))
    return list(series.values())


def series_text(series: Sequence[Series], last: int = 20) -> str:
    if not series:
        return ""
    rows = []
    for s in series:
        for p in s.points[-last if last else 0:]:
            rows.append([s.workload, s.setting, s.load, p.started_at[:16].replace("T", " "), p.host, num(p.speedup, ".2f", "x"),
                         num(p.acceptance * 100 if math.isfinite(p.acceptance) else None, ".0f", "%"), str(p.defects)])
    out = ["workloads over time (each level's speedup over the same text, its last pass):",
           text_table(["workload", "setting", "load", "started", "host", "speedup", "accept", "defects"], rows, right={5, 6, 7})]
    out += [f"  slower: {s.drop}" for s in series if s.drop]
    return "\n".join(out) + "\n"


def series_json(series: Sequence[Series]) -> list[dict[str, Any]]:
    def finite(v: float) -> float | None:
        return v if math.isfinite(v) else None

    return [{"workload": s.workload, "setting": s.setting, "load": s.load, "drop": s.drop,
             "points": [{**p.__dict__, "speedup": finite(p.speedup), "acceptance": finite(p.acceptance)} for p in s.points]}
            for s in series]
