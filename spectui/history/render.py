"""``spectui history``'s output: a text report (tables via ``spectui.format``), plotext charts,
and one JSON document. The dashboard's history screen draws the same text and charts.

The report: the hosts (what each is and runs now), the slowdowns (a host's runs got slower, and
what changed on it then), the series run on several hosts side by side, then every group,
host by host."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from typing import Any

from spectui.charts import Axis, Panel, Series, render, time_axis
from spectui.format import NA, counted, num_or_na, pct, section_title, size, text_table
from spectui.history.changes import Slowdown
from spectui.history.hosts import SideBySide, host_summaries, side_by_side
from spectui.history.index import IndexUpdate
from spectui.history.row import IndexedRun
from spectui.history.trend import METRICS, Change, Group, parse_time

#: Rows of a group's table in the text report (the charts and JSON have every run).
DEFAULT_LAST_ROWS = 20


def metric_text(name: str, value: float) -> str:
    if name == "acceptance":
        return NA if value != value else pct(value)
    if name == "peak_rss_bytes":
        return NA if value != value else size(int(value))
    return num_or_na(value, ".1f")


def _delta(name: str, before: float, after: float) -> str:
    text = f"{metric_text(name, before)} -> {metric_text(name, after)}"
    if before == before and after == after and before:
        text += f" ({(after - before) / abs(before) * 100:+.1f}%)"
    return text


def _when(started_at: str) -> str:
    t = parse_time(started_at)
    return t.strftime("%Y-%m-%d %H:%M") if t is not None else started_at or "?"


def change_lines(change: Change, metrics: Sequence[tuple[str, str, bool]] = METRICS) -> list[str]:
    """``2025-05-01 10:00  runtime: llama-cpp-python 0.3.16 -> 0.3.17`` and the numbers across it."""
    moved = "; ".join(f"{w.label}: {w.before} -> {w.after}" for w in change.what)
    numbers = ", ".join(f"{label} {_delta(name, *change.numbers[name])}" for name, label, _ in metrics)
    return [f"{_when(change.started_at)}  {moved}", f"    {numbers}"]


def slowdown_text(s: Slowdown) -> str:
    """``decode tok/s 51.0 -> 34.0 (-33.3%, beyond the 5.0% noise; 3 runs -> 2); changed: runtime ...``"""
    runs = f"{counted(s.runs_before, 'run')} -> {s.runs_after}"
    numbers = f"decode tok/s {s.before_tok_s:.1f} -> {s.after_tok_s:.1f} ({-s.drop * 100:+.1f}%, beyond the {s.noise:.1%} noise; {runs})"
    return f"{_when(s.started_at)}  SLOWER: {numbers}; changed: {s.changed_text()}"


def group_table(g: Group, last: int = DEFAULT_LAST_ROWS) -> str:
    marks = {c.at: ", ".join(w.label for w in c.what) for c in g.changes}
    index = {r.path: i for i, r in enumerate(g.runs)}
    for s in g.slowdowns:
        i = index[s.path]
        marks[i] = "slower" + (f", {marks[i]}" if i in marks else "")
    start = max(0, len(g.runs) - last) if last > 0 else 0
    rows = []
    for i in range(start, len(g.runs)):
        r = g.runs[i]
        rows.append([_when(r.started_at), *(metric_text(n, getattr(r, n)) for n, _, _ in g.metrics), f"* {marks[i]}" if i in marks else ""])
    table = text_table(["run", *(label for _, label, _ in g.metrics), "change"], rows, right=set(range(1, len(g.metrics) + 1)), rules_before={0})
    return (f"  ... {start} earlier runs (--last 0 shows every run)\n" if start else "") + table


def format_group(g: Group, *, stale_days: float, last: int = DEFAULT_LAST_ROWS, charts: bool = False, width: int = 100) -> str:
    n = len(g.runs)
    runs = (f"{n} watch" + ("" if n == 1 else "es")) if g.is_watch else counted(n, "run")
    lines = [section_title(g.title, 0), f"  {runs}, newest {_when(g.runs[-1].started_at)}"]
    if g.stale:
        lines.append(f"  STALE: the newest run is {g.age_days:.0f} days old (older than {stale_days:g}); re-measure before trusting it")
    lines.append(group_table(g, last))
    if g.changes:
        lines.append("  changes (median of the runs before -> from the change on):")
        lines += [f"    {line}" for c in g.changes for line in change_lines(c, g.metrics)]
    lines += [f"  {slowdown_text(s)}" for s in g.slowdowns]
    if g.floor is not None:
        checks = "; ".join(
            f"{label} {num_or_na(v, '.3f' if label == 'acceptance' else '.1f')} >= {limit:g} {'pass' if ok else 'FAIL'}"
            for label, v, limit, ok in g.floor_checks()
        )
        lines.append(f"  floors of the latest sweep ({g.floor.source}), newest run: {checks}")
    if charts:
        lines.append(group_charts(g, width=width))
    return "\n".join(lines)


def format_history(
    groups: Sequence[Group],
    update: IndexUpdate,
    *,
    stale_days: float,
    last: int = DEFAULT_LAST_ROWS,
    charts: bool = False,
    width: int = 100,
) -> str:
    runs = sum(len(g.runs) for g in groups)
    stale = sum(g.stale for g in groups)
    head = (
        f"spectui history: {counted(runs, 'run')} in {counted(len(groups), 'group')}, {stale} stale "
        f"(index {update.index_path}: {update.read} read, {update.unchanged} unchanged, {update.removed} removed, {update.seconds:.1f} s)"
    )
    parts = [head, *(f"note: {n}" for n in update.notes)]
    if not groups:
        parts.append("no readable recordings found (record some with spectui run, sweep or soak)")
    sessions = [g for g in groups if not g.is_watch]
    parts += ["", *hosts_report(sessions)]
    host = None
    for g in sessions:
        if g.host != host:
            host = g.host
            parts.append(f"== host {host}")
        parts.append(format_group(g, stale_days=stale_days, last=last, charts=charts, width=width) + "\n")
    watches = sorted((g for g in groups if g.is_watch), key=lambda g: (g.key["backend"], g.key["prompt"], g.host))
    if watches:  # spectui watch: a server watched while it served others, listed by server
        n = sum(len(g.runs) for g in watches)
        parts.append(f"== watches, by server ({n} watch{'' if n == 1 else 'es'})")
        parts += [format_group(g, stale_days=stale_days, last=last, charts=charts, width=width) + "\n" for g in watches]
    return "\n".join(parts).rstrip() + "\n"


def hosts_report(groups: Sequence[Group]) -> list[str]:
    """The hosts, their slowdowns (newest first) and the series they share, side by side; one
    host without slowdowns needs none of it (its groups say all)."""
    hosts = host_summaries(groups)
    slow = sorted(((g, s) for g in groups for s in g.slowdowns), key=lambda gs: gs[1].started_at, reverse=True)
    if len(hosts) < 2 and not slow:
        return []
    rows = [[h.host, str(h.runs), str(h.groups), _when(h.newest), h.runtime, h.os or NA, str(h.slowdowns)] for h in hosts]
    lines = [section_title(f"{counted(len(hosts), 'host')}", 0),
             text_table(["host", "runs", "groups", "newest", "runtime", "OS", "slowdowns"], rows, right={1, 2, 6}, rules_before={0})]  # fmt: skip
    if slow:
        lines.append("  slowdowns (decode tok/s median drop beyond noise on one host; what changed on it then), newest first:")
        for g, s in slow:
            lines += [f"    {g.title}", f"      {slowdown_text(s)}"]
    for row in side_by_side(groups):
        lines.append(side_by_side_table(row))
    return [*lines, ""]


def side_by_side_table(row: SideBySide) -> str:
    best = row.hosts[0].decode_tok_s
    cells = [
        [c.host, str(c.runs), metric_text("decode_tok_s", c.decode_tok_s), f"{c.decode_tok_s / best:.2f}x" if best == best and best else NA,
         metric_text("acceptance", c.acceptance), c.target_sha256[:12] or NA, c.runtime, c.os or NA]
        for c in row.hosts
    ]  # fmt: skip
    header = ["host", "runs", "decode tok/s", "vs fastest", "acceptance", "target sha256", "runtime", "OS"]
    differs = ", ".join(row.differs) if row.differs else "nothing recorded but the machines"
    return "\n".join([
        section_title(f"side by side: {row.title}", 0),
        "  each host's newest runs (since its last artifact change)",
        text_table(header, cells, right={1, 2, 3, 4}, rules_before={0}),
        f"  differs between the hosts' newest runs: {differs}",
    ])  # fmt: skip


# -- charts ----------------------------------------------------------------------------------


#: A number as a chart shows it: (title, factor from the index's unit). Acceptance is stored as
#: a share (0.75) and drawn in percent (75); RSS in bytes, drawn in MiB.
CHART_UNITS = {
    "decode_tok_s": ("decode tok/s", 1.0),
    "acceptance": ("acceptance %", 100.0),
    "itl_p95_ms": ("p95 ITL ms", 1.0),
    "ttft_ms": ("TTFT ms", 1.0),
    "peak_rss_bytes": ("peak RSS MiB", 1 / 2**20),
}


def chart_panels(g: Group) -> list[Panel]:
    """Every number of the group against wall-clock time: a line per number, an ``x`` at each
    artifact change, the sweep's floor as a flat line (``spectui.charts`` draws them)."""
    times = [parse_time(r.started_at) for r in g.runs]
    parsed = [t for t in times if t is not None]
    if len(parsed) == len(times):
        xs, x_axis = time_axis(parsed)
    else:  # a start time that does not parse: runs in order instead
        xs, x_axis = [float(i + 1) for i in range(len(g.runs))], Axis(label="run")
    floors = {} if g.floor is None else {"acceptance": g.floor.acceptance, "decode_tok_s": g.floor.decode_tok_s}
    changes = sorted({c.at for c in g.changes})
    panels = []
    for name, _label, _ in g.metrics:
        title, factor = CHART_UNITS[name]
        ys = [getattr(r, name) * factor for r in g.runs]
        series = [Series(xs, ys)]
        if changes:
            series.append(Series([xs[i] for i in changes], [ys[i] for i in changes], label="change", marker="x", lines=False))
        if name in floors:
            ends = [min(xs), max(xs)] if len(xs) > 1 and max(xs) > min(xs) else list(x_axis.lim or (xs[0], xs[0] + 1))
            series.append(Series(ends, [floors[name] * factor] * 2, label="sweep floor"))
        panels.append(Panel(title, series, x=x_axis))
    return panels


def group_charts(g: Group, *, width: int = 100, height: int = 11, colour: bool = False) -> str:
    """The group's numbers over time, two charts a row (plain text unless ``colour``)."""
    panels = chart_panels(g)
    return render(panels, width=width, height=height * math.ceil(len(panels) / 2), cols=2, colour=colour)


# -- JSON --------------------------------------------------------------------------------------


def _num(v: float) -> float | None:
    return None if v != v else v


def _run_json(r: IndexedRun) -> dict[str, Any]:
    import json

    if r.is_watch:  # the figures a watch has, under their own names
        return {
            "path": r.path, "started_at": r.started_at, "complete": r.complete, "watch": r.watch, "seconds": _num(r.watch_seconds),
            "generated_tokens": r.n_tokens, "generated_tok_s": _num(r.decode_tok_s), "acceptance": _num(r.acceptance),
            "server_peak_rss_bytes": _num(r.peak_rss_bytes), "runtime": json.loads(r.runtime or "{}"), "spectui_version": r.spectui_version,
        }  # fmt: skip
    return {
        "path": r.path,
        "started_at": r.started_at,
        "complete": r.complete,
        "n_tokens": r.n_tokens,
        **{name: _num(getattr(r, name)) for name, _, _ in METRICS},
        "runtime": json.loads(r.runtime or "{}"),
        "os": r.os,
        "host_detail": r.host_detail,
        "draft_sha256": r.draft_sha256,
        "chat_template_sha256": r.chat_template,
        "spectui_version": r.spectui_version,
        "sweep": r.sweep,
    }


def _slowdown_json(s: Slowdown) -> dict[str, Any]:
    return {
        "host": s.host,
        "line": s.line,
        "path": s.path,
        "started_at": s.started_at,
        "before_started_at": s.before_started_at,
        "decode_tok_s": {"before": _num(s.before_tok_s), "after": _num(s.after_tok_s), "change": -s.drop},
        "noise": s.noise,
        "runs": {"before": s.runs_before, "after": s.runs_after},
        "changed": [{"field": w.label, "before": w.before, "after": w.after} for w in s.what],
        "changed_text": s.changed_text(),
    }


def history_json(groups: Sequence[Group], update: IndexUpdate, *, stale_days: float) -> dict[str, Any]:
    return {
        "index": update.index_path,
        "indexed": {"found": update.found, "read": update.read, "unchanged": update.unchanged, "removed": update.removed, "seconds": update.seconds},
        "notes": update.notes,
        "stale_days": stale_days,
        "hosts": [dataclasses.asdict(h) for h in host_summaries([g for g in groups if not g.is_watch])],
        "slowdowns": sorted((_slowdown_json(s) for g in groups for s in g.slowdowns), key=lambda d: d["started_at"], reverse=True),
        "side_by_side": [
            {"target": row.target, "series": row.series, "differs": row.differs,
             "hosts": [{**dataclasses.asdict(c), "decode_tok_s": _num(c.decode_tok_s), "acceptance": _num(c.acceptance)} for c in row.hosts]}
            for row in side_by_side([g for g in groups if not g.is_watch])
        ],  # fmt: skip
        "groups": [
            {
                "kind": "watch" if g.is_watch else "sessions",
                "key": g.key,
                "title": g.title,
                "target_name": g.target_name,
                "target_quant": g.target_quant,
                "prompt_tier": g.prompt_tier,
                "stale": g.stale,
                "age_days": _num(g.age_days),
                "runs": [_run_json(r) for r in g.runs],
                "slowdowns": [_slowdown_json(s) for s in g.slowdowns],
                "changes": [
                    {
                        "at": c.at,
                        "path": os.fspath(g.runs[c.at].path),
                        "started_at": c.started_at,
                        "what": [{"field": w.label, "before": w.before, "after": w.after} for w in c.what],
                        "numbers": {
                            m: {"before": _num(b), "after": _num(a), "change": _num((a - b) / abs(b)) if b == b and a == a and b else None}
                            for m, (b, a) in c.numbers.items()
                        },
                    }
                    for c in g.changes
                ],
                "floor": None
                if g.floor is None
                else {
                    "source": g.floor.source,
                    "acceptance": g.floor.acceptance,
                    "decode_tok_s": g.floor.decode_tok_s,
                    "checks": [{"metric": label, "value": _num(v), "floor": lim, "passed": ok} for label, v, lim, ok in g.floor_checks()],
                },
            }
            for g in groups
        ],
    }
