"""Hosts compared: what each host is and runs now, and the same series on several hosts side by side.

``spectui history`` over the recordings of several machines (the nodes of ``--host`` and
``sweep --hosts``, or folders copied from them) answers "is node B slower than node A, and what
differs between them": per host, its runs, its newest runtime and OS and its slowdowns; per
series run on more than one host (one target model by name, backend, mode, drafter, K,
sampling, prompt), each host's median of its newest stretch (the runs since its last artifact
change, at most ``changes.WINDOW``) beside the others', and which artifacts differ between the
hosts' newest runs (the target file's sha256, the runtime versions, the OS, ...).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from spectui.history.changes import LINE_CHANGE_FIELDS, WINDOW
from spectui.history.row import IndexedRun
from spectui.history.trend import Group
from spectui.metrics.stats import nanmedian

#: What makes a series comparable across hosts: the model by its display name (two hosts may
#: hold different files of it: their sha256 is then among what differs), and the settings.
SERIES_FIELDS = ("backend", "mode", "drafter", "k", "label", "sampling", "prompt")


@dataclass
class HostSummary:
    host: str
    runs: int
    groups: int
    newest: str  # the newest run's start
    runtime: str  # the newest run's runtime versions, "package version, ..."
    os: str
    slowdowns: int


@dataclass
class HostColumn:
    """One host in a side-by-side row: its newest stretch of the series."""

    host: str
    runs: int  # in the newest stretch
    decode_tok_s: float  # median over the newest stretch
    acceptance: float
    newest: str
    target_sha256: str
    runtime: str
    os: str


@dataclass
class SideBySide:
    target: str  # the target model's display name
    series: dict[str, str]  # SERIES_FIELDS -> value
    hosts: list[HostColumn]  # fastest first
    differs: list[str]  # labels of the artifacts that differ between the hosts' newest runs

    @property
    def title(self) -> str:
        s = self.series
        return f"{self.target} · {s['backend']} · {s['label']} · {s['sampling']} · prompt {s['prompt']}"


def runtime_text(runtime_json: str) -> str:
    """``{"llama-cpp-python": "0.3.16"}`` as ``llama-cpp-python 0.3.16``."""
    try:
        versions = json.loads(runtime_json or "{}")
    except ValueError:
        return runtime_json
    return ", ".join(f"{k} {v}" for k, v in versions.items()) or "-"


def host_summaries(groups: Sequence[Group]) -> list[HostSummary]:
    """One summary per host, in the order of ``groups`` (``trend.by_host``)."""
    out: dict[str, HostSummary] = {}
    for g in groups:
        newest = g.runs[-1]
        s = out.get(g.host)
        if s is None:
            s = out[g.host] = HostSummary(g.host, 0, 0, "", "", "", 0)
        s.runs += len(g.runs)
        s.groups += 1
        s.slowdowns += len(g.slowdowns)
        if newest.started_at >= s.newest:
            s.newest, s.runtime, s.os = newest.started_at, runtime_text(newest.runtime), newest.os
    return list(out.values())


def _newest_stretch(runs: Sequence[IndexedRun]) -> list[IndexedRun]:
    """The runs since the last artifact change (oldest first), at most ``WINDOW`` of them."""
    start = 0
    for i in range(1, len(runs)):
        if any(getattr(runs[i - 1], f) != getattr(runs[i], f) for f, _ in LINE_CHANGE_FIELDS):
            start = i
    return list(runs[max(start, len(runs) - WINDOW) :])


def side_by_side(groups: Sequence[Group]) -> list[SideBySide]:
    """Every series run on more than one host, each host's newest stretch, fastest host first."""
    series: dict[tuple[str, ...], dict[str, list[IndexedRun]]] = {}
    labels: dict[tuple[str, ...], str] = {}
    for g in groups:
        key = (g.target_label, *(g.key[f] for f in SERIES_FIELDS))
        labels[key] = g.target_label
        series.setdefault(key, {}).setdefault(g.host, []).extend(g.runs)
    out = []
    for key, by_host in series.items():
        if len(by_host) < 2:
            continue
        columns, newest_runs = [], []
        for host, runs in by_host.items():
            stretch = _newest_stretch(sorted(runs, key=lambda r: (r.started_at, r.path)))
            last = stretch[-1]
            newest_runs.append(last)
            columns.append(
                HostColumn(
                    host=host, runs=len(stretch), decode_tok_s=nanmedian(r.decode_tok_s for r in stretch),
                    acceptance=nanmedian(r.acceptance for r in stretch), newest=last.started_at,
                    target_sha256=last.target_sha256, runtime=runtime_text(last.runtime), os=last.os,
                )
            )  # fmt: skip
        columns.sort(key=lambda c: -c.decode_tok_s if c.decode_tok_s == c.decode_tok_s else float("inf"))
        differs = [label for f, label in LINE_CHANGE_FIELDS if len({getattr(r, f) for r in newest_runs}) > 1]
        out.append(SideBySide(labels[key], dict(zip(SERIES_FIELDS, key[1:])), columns, differs))
    return out
