"""Indexed runs as series: groups, the artifact changes inside them, staleness, sweep floors.

A group (a series) is the runs that should measure the same thing: one host, one target file
(sha256), one backend, one run label (mode, drafter and K: ``labels.run_label``, the label the
dashboard's header gives the run), one sampling setup, one prompt. Inside a group, anything
else frozen in the headers that moves is an *artifact change*: the runtime versions,
the draft model's sha256, the chat template, the host's OS, Python and GPU, the spectui version.
Each is marked at the first run that has it, with every number's median over the runs since
the previous change against its median over the runs from this change to the next one: the
"fast last week, slow today" question, answered with the version that moved.

The groups are listed host by host; ``spectui.history.changes`` finds where a host's runs got
slower and what changed on it then, ``spectui.history.hosts`` sets the hosts side by side.

A new target file (another sha256) starts a new group; when an older group matches it in
everything else, the new group's first run carries a "target sha256" change against that
group's last stretch, so a re-downloaded or requantised model is still a marked step in one
story. Groups whose newest run is older than ``stale_days`` are stale: a runbook treats data
older than two weeks as no longer describing the machine.

Watches (``spectui watch``) are indexed too and grouped by the server watched (its kind, URL
and the host that watched it): their numbers are the server's traffic, so they get no
slowdowns and are never stale, and their own columns (``WATCH_METRICS``).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from spectui.errors import SpectuiError
from spectui.format import model_name
from spectui.history.changes import CHANGE_FIELDS, FieldChange, Slowdown, describe, find_slowdowns, moved
from spectui.history.index import HistoryIndex, IndexUpdate
from spectui.history.row import IndexedRun, parse_time
from spectui.metrics.stats import nanmedian

DEFAULT_STALE_DAYS = 14.0

#: The numbers every group shows: (IndexedRun field, label, higher is better).
METRICS = (
    ("decode_tok_s", "decode tok/s", True),
    ("acceptance", "acceptance", True),
    ("itl_p95_ms", "p95 ITL ms", False),
    ("ttft_ms", "TTFT ms", False),
    ("peak_rss_bytes", "peak RSS", False),
)
#: A watch's numbers (``IndexedRun.watch``): the server's tokens/s over the watch (every request
#: it served, not one session's decode), its acceptance, its process's peak RSS.
WATCH_METRICS = (
    ("decode_tok_s", "gen tok/s", True),
    ("acceptance", "acceptance", True),
    ("peak_rss_bytes", "server RSS", False),
)

#: What makes a group, in display order. ``label`` (the run's one label: the header's, the
#: compare column's) tells apart what mode, drafter and K alone do not (a chain in front of a
#: draft model); those stay in the key for ``--json`` and the sweep floors.
KEY_FIELDS = ("host", "target_sha256", "backend", "mode", "drafter", "k", "label", "sampling", "prompt")


@dataclass(frozen=True)
class FloorLine:
    """A floor of the latest sweep (``spectui.lab.sweep_report.Floor`` as plain values)."""

    tier: str
    drafter: str  # "ngram" or a draft model path, as the sweep's configuration names it
    k: int
    acceptance: float
    decode_tok_s: float
    source: str  # the sweep folder


@dataclass
class Change:
    """Artifacts that moved at ``runs[at]`` of a group, and what every number did across it."""

    at: int
    started_at: str
    what: list[FieldChange]
    #: metric field -> (median before, median after); NaN where a side has no value
    numbers: dict[str, tuple[float, float]]


@dataclass
class Group:
    key: dict[str, str]
    target_name: str
    target_quant: str
    prompt_tier: str
    draft_source: str
    k_value: int
    runs: list[IndexedRun]
    changes: list[Change] = field(default_factory=list)
    stale: bool = False
    age_days: float = float("nan")  # since the newest run
    floor: FloorLine | None = None
    #: this group's runs that decode slower than the runs before them on the host's line
    #: (``spectui.history.changes``), with what changed then
    slowdowns: list[Slowdown] = field(default_factory=list)

    @property
    def host(self) -> str:
        return self.key["host"]

    @property
    def is_watch(self) -> bool:
        """The watches of one server (``spectui watch``), not a series of sessions."""
        return self.key["mode"] == "watch"

    @property
    def metrics(self) -> tuple[tuple[str, str, bool], ...]:
        return WATCH_METRICS if self.is_watch else METRICS

    @property
    def target_label(self) -> str:
        """The target's display name (``format.model_name``), the quant in it."""
        return model_name(self.target_name or "?", self.target_quant)

    @property
    def label(self) -> str:
        """The runs' one label (``history.labels.run_label``), as the dashboard's header shows it."""
        return self.key["label"]

    @property
    def title(self) -> str:
        k = self.key
        if self.is_watch:  # the server first: watches are listed by server
            model = f" · model {self.target_name}" if self.target_name else ""
            return f"watches of {k['backend']} at {k['prompt']}{model} · from {k['host']}"
        target = f"{self.target_label} ({k['target_sha256'][:12] or 'no sha256'})"
        return f"{k['host']} · {target} · {k['backend']} · {self.label} · {k['sampling']} · prompt {k['prompt']}"

    def floor_checks(self) -> list[tuple[str, float, float, bool]]:
        """The newest run against the sweep's floor: (metric label, value, floor, passed)."""
        if self.floor is None or not self.runs:
            return []
        last = self.runs[-1]
        out = []
        for name, label, limit in (("acceptance", "acceptance", self.floor.acceptance), ("decode_tok_s", "decode tok/s", self.floor.decode_tok_s)):
            value = getattr(last, name)
            out.append((label, value, limit, value >= limit))  # NaN fails, as in spectui diff --floors
        return out


def _medians(runs: Sequence[IndexedRun]) -> dict[str, float]:
    return {name: nanmedian(getattr(r, name) for r in runs) for name, _, _ in METRICS}


def _mark_changes(g: Group) -> None:
    points = []
    for i in range(1, len(g.runs)):
        prev, cur = g.runs[i - 1], g.runs[i]
        what = moved(prev, cur, CHANGE_FIELDS)
        if what:
            points.append((i, what))
    bounds = [0] + [i for i, _ in points] + [len(g.runs)]
    for n, (i, what) in enumerate(points):
        before, after = _medians(g.runs[bounds[n] : i]), _medians(g.runs[i : bounds[n + 2]])
        g.changes.append(Change(i, g.runs[i].started_at, what, {m: (before[m], after[m]) for m in before}))


def _link_new_targets(groups: list[Group]) -> None:
    """A group whose target file is new, following one alike in all else: a target change."""
    lines: dict[tuple[str, ...], list[Group]] = {}
    for g in groups:
        lines.setdefault(tuple(v for k, v in g.key.items() if k != "target_sha256"), []).append(g)
    for members in lines.values():
        members.sort(key=lambda g: g.runs[0].started_at)
        for prev, g in zip(members, members[1:]):
            stretch = prev.runs[prev.changes[-1].at :] if prev.changes else prev.runs
            after_end = g.changes[0].at if g.changes else len(g.runs)
            before, after = _medians(stretch), _medians(g.runs[:after_end])
            what = [
                describe("target sha256", prev.key["target_sha256"], g.key["target_sha256"]),
                FieldChange("target", prev.target_label, g.target_label),
            ]
            g.changes.insert(0, Change(0, g.runs[0].started_at, what, {m: (before[m], after[m]) for m in before}))


def build_groups(
    runs: Sequence[IndexedRun],
    *,
    stale_days: float = DEFAULT_STALE_DAYS,
    floors: Sequence[FloorLine] = (),
    now: dt.datetime | None = None,
) -> list[Group]:
    """The readable runs as groups, oldest run first within each; groups newest first."""
    now = now or dt.datetime.now(dt.timezone.utc)
    by_key: dict[tuple[str, ...], Group] = {}
    for r in sorted((r for r in runs if r.readable), key=lambda r: (r.started_at, r.path)):
        key = tuple(getattr(r, f) for f in KEY_FIELDS)
        g = by_key.get(key)
        if g is None:
            g = by_key[key] = Group(
                dict(zip(KEY_FIELDS, key)), r.target_name, r.target_quant, r.prompt_tier, r.draft_source, r.k_value, []
            )
        g.runs.append(r)
    groups = list(by_key.values())
    for g in groups:
        _mark_changes(g)
        newest = parse_time(g.runs[-1].started_at)
        if newest is not None:
            g.age_days = (now - newest).total_seconds() / 86400
            g.stale = g.age_days > stale_days and not g.is_watch  # a watch saw a server's traffic then: it measures no machine
        g.floor = next(
            (f for f in floors if g.key["mode"] == "spec" and f.tier == g.prompt_tier and f.drafter == g.draft_source and f.k == g.k_value),
            None,
        )
    _link_new_targets(groups)
    by_path = {r.path: g for g in groups for r in g.runs}
    # a watch's tokens/s is its traffic's, not a measurement of the machine: no slowdowns
    for slowdown in find_slowdowns([r for r in runs if not r.is_watch]):
        by_path[slowdown.path].slowdowns.insert(0, slowdown)  # oldest first, as the runs
    return by_host(groups)


def by_host(groups: list[Group]) -> list[Group]:
    """Groups host by host (the host with the newest run first), newest first within a host."""
    newest: dict[str, str] = {}
    for g in groups:
        newest[g.host] = max(newest.get(g.host, ""), g.runs[-1].started_at)
    hosts = sorted(newest, key=lambda h: (newest[h], h), reverse=True)
    rank = {h: i for i, h in enumerate(hosts)}
    newest_first = sorted(groups, key=lambda g: g.runs[-1].started_at, reverse=True)
    return sorted(newest_first, key=lambda g: rank[g.host])  # stable: newest first within a host


def latest_sweep(runs: Sequence[IndexedRun]) -> str:
    """The sweep folder whose newest run is the newest of all sweeps ("" when none)."""
    newest: dict[str, str] = {}
    for r in runs:
        if r.sweep and r.started_at > newest.get(r.sweep, ""):
            newest[r.sweep] = r.started_at
    return max(newest, key=newest.__getitem__) if newest else ""


def load_history(
    folders: Sequence[str | os.PathLike[str]],
    *,
    index: str | os.PathLike[str] | None = None,
    stale_days: float = DEFAULT_STALE_DAYS,
    floors_of: Callable[[str], list[FloorLine]] | None = None,
    now: dt.datetime | None = None,
) -> tuple[list[Group], IndexUpdate]:
    """Refresh the index over ``folders`` and group their runs. ``floors_of(folder)`` gives a
    sweep folder's floors (``spectui.lab`` sits beside this package: the caller brings it);
    the newest sweep among the runs is the one drawn against the trends."""
    if not stale_days > 0:
        raise SpectuiError(f"--stale-days must be > 0, got {stale_days:g}")
    with HistoryIndex(index) as idx:
        update = idx.refresh(folders)
        runs = idx.runs(folders)
    floors: list[FloorLine] = []
    sweep = latest_sweep(runs)
    if sweep and floors_of is not None:
        try:
            floors = floors_of(sweep)
        except SpectuiError as exc:  # a half-copied sweep must not hide the history
            update.notes.append(f"no floors from the latest sweep {sweep}: {exc}")
    return build_groups(runs, stale_days=stale_days, floors=floors, now=now), update
