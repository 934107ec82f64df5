"""What moved between two runs of one series, and when a host's runs got slower, what moved then.

An *artifact change* is a frozen header fact that differs between consecutive runs of a series
(the runtime versions, the model files' sha256, the OS, ...): ``describe`` says one briefly.

A *slowdown* is a drop of the median decode tok/s between consecutive runs of one host's
*line* (the runs of one host, backend, mode, drafter, K, sampling and prompt, whatever target
file they used) beyond that line's noise. The line is cut at every artifact change into
stretches of runs that should measure alike; at each pair of consecutive runs the runs before
are set against the runs from there on, as many on each side as both sides have in their
stretches (at most ``WINDOW``: one slow run among fast ones moves no median, and a later
slowdown in the next stretch is not blamed on this pair's change; at least
``MIN_RUNS_UNEXPLAINED`` where nothing changed), and a drop counts when it exceeds the noise,
``NOISE_MADS`` scaled median absolute deviations of the runs before as a share of their median
and never less than ``MIN_NOISE``, and the first run after the pair's boundary is itself that
much slower. Inside a stretch, where one slow period shows at several neighbouring pairs, the
pair with the largest drop (the earliest of equals) is the one kept.
Each slowdown names what changed between the two runs (runtime, model fingerprint, OS, ...),
or says that nothing the header records did: the machine itself (load, heat, power) is then
the suspect.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from spectui.history.row import IndexedRun
from spectui.metrics.stats import nanmedian

#: What may change inside a series: (IndexedRun field, label). A new target file (its sha256)
#: starts a new group; a host's line (``line_key``) spans it, so it is here too for slowdowns.
CHANGE_FIELDS = (
    ("runtime", "runtime"),
    ("draft_sha256", "draft model sha256"),
    ("chat_template", "chat template"),
    ("os", "OS"),
    ("host_detail", "Python/GPU"),
    ("spectui_version", "spectui version"),
)
LINE_CHANGE_FIELDS = (("target_sha256", "target sha256"), *CHANGE_FIELDS)

#: What makes a host's line: a group's key without the target file (``trend.KEY_FIELDS``).
LINE_FIELDS = ("host", "backend", "mode", "drafter", "k", "label", "sampling", "prompt")

#: The smallest tok/s drop called a slowdown (a share of the median before), whatever the noise.
MIN_NOISE = 0.05
#: A drop must exceed this many scaled median absolute deviations of the runs before it.
NOISE_MADS = 3.0
#: The most runs on each side of a pair that the medians take.
WINDOW = 5
#: Runs each side needs for a drop where nothing recorded changed (one run against one is
#: enough across an artifact change, which says what to suspect; without one it is a blip).
MIN_RUNS_UNEXPLAINED = 2
#: A median absolute deviation times this estimates a normal distribution's standard deviation.
_MAD_SIGMA = 1.4826


@dataclass
class FieldChange:
    label: str
    before: str
    after: str

    def text(self) -> str:
        """``runtime llama-cpp-python 0.3.16 -> 9.9.9`` (one package: its name once)."""
        if self.label == "runtime" and ", " not in self.before + self.after:
            a, _, old = self.before.rpartition(" ")
            b, _, new = self.after.rpartition(" ")
            if a and a == b:
                return f"runtime {a} {old} -> {new}"
        return f"{self.label} {self.before} -> {self.after}"


def describe(label: str, before: str, after: str) -> FieldChange:
    """One moved artifact, said briefly: runtime versions by package, digests shortened."""
    if label == "runtime":
        try:
            a, b = json.loads(before or "{}"), json.loads(after or "{}")
        except ValueError:
            a, b = {}, {}
        moved = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        return FieldChange(label, ", ".join(f"{k} {a.get(k) or '-'}" for k in moved), ", ".join(f"{k} {b.get(k) or '-'}" for k in moved))
    if "sha256" in label or label == "chat template":
        return FieldChange(label, before[:12] or "-", after[:12] or "-")
    return FieldChange(label, before or "-", after or "-")


def moved(prev: IndexedRun, cur: IndexedRun, fields: Sequence[tuple[str, str]] = CHANGE_FIELDS) -> list[FieldChange]:
    """The artifacts that differ between two runs, described."""
    return [describe(label, getattr(prev, f), getattr(cur, f)) for f, label in fields if getattr(prev, f) != getattr(cur, f)]


def line_key(run: IndexedRun) -> tuple[str, ...]:
    return tuple(getattr(run, f) for f in LINE_FIELDS)


@dataclass
class Slowdown:
    """``runs[at]`` of a host's line decodes slower than the runs before it, beyond noise."""

    line: dict[str, str]  # LINE_FIELDS -> value
    at: int  # the first slower run, in the line
    path: str
    started_at: str
    before_started_at: str  # the run just before it
    before_tok_s: float  # median of the runs before
    after_tok_s: float  # median of the runs from ``at`` on
    drop: float  # 1 - after / before
    noise: float  # the share a drop had to exceed
    runs_before: int
    runs_after: int
    what: list[FieldChange] = field(default_factory=list)  # empty: nothing recorded changed

    @property
    def host(self) -> str:
        return self.line["host"]

    def changed_text(self) -> str:
        if not self.what:
            return "nothing recorded (runtime, model and OS as before: load, heat or power on the host?)"
        return "; ".join(w.text() for w in self.what)


def _noise(values: Sequence[float]) -> float:
    """The share of the median a drop must exceed, from the spread of ``values`` (runs before)."""
    med = nanmedian(values)
    if not med or med != med:
        return MIN_NOISE
    mad = nanmedian(abs(v - med) for v in values)
    return max(MIN_NOISE, NOISE_MADS * _MAD_SIGMA * mad / abs(med)) if mad == mad else MIN_NOISE


def line_slowdowns(runs: Sequence[IndexedRun]) -> list[Slowdown]:
    """The slowdowns of one host's line (its runs oldest first)."""
    if len(runs) < 2:
        return []
    tok_s = [r.decode_tok_s for r in runs]
    whats: list[list[FieldChange]] = [[]] + [moved(runs[i - 1], runs[i], LINE_CHANGE_FIELDS) for i in range(1, len(runs))]
    cuts = [i for i in range(1, len(runs)) if whats[i]]
    starts = [0, *cuts]
    ends = [*cuts, len(runs)]
    found: list[Slowdown] = []
    for i in range(1, len(runs)):
        start = max(s for s in starts if s <= i - 1)  # the stretch holding the run before
        end = min(e for e in ends if e > i)  # the stretch holding this run ends there
        n = min(i - start, end - i, WINDOW)
        if n < MIN_RUNS_UNEXPLAINED and not whats[i]:
            continue
        before, after = tok_s[i - n : i], tok_s[i : i + n]
        b, a = nanmedian(before), nanmedian(after)
        if not (b > 0 and a == a):
            continue
        drop, noise = 1 - a / b, _noise(tok_s[max(start, i - WINDOW) : i])
        if drop <= noise or not tok_s[i] < b * (1 - noise):  # the first slower run is slower itself
            continue
        found.append(
            Slowdown(
                line=dict(zip(LINE_FIELDS, line_key(runs[i]))), at=i, path=runs[i].path, started_at=runs[i].started_at,
                before_started_at=runs[i - 1].started_at, before_tok_s=b, after_tok_s=a, drop=drop, noise=noise,
                runs_before=len(before), runs_after=len(after), what=whats[i],
            )
        )
    return _strongest_per_period(found)


def _strongest_per_period(found: list[Slowdown]) -> list[Slowdown]:
    """Neighbouring pairs inside one stretch that show one slow period: the largest drop stays.
    A slowdown at an artifact change is always kept (it names what moved)."""
    out: list[Slowdown] = []
    for s in found:
        prev = out[-1] if out else None
        if prev is not None and not prev.what and not s.what and s.at == prev.at + 1:
            if s.drop > prev.drop:
                out[-1] = s
            continue
        out.append(s)
    return out


def find_slowdowns(runs: Sequence[IndexedRun]) -> list[Slowdown]:
    """Every host line's slowdowns, over readable runs in any order; newest first."""
    lines: dict[tuple[str, ...], list[IndexedRun]] = {}
    for r in sorted((r for r in runs if r.readable), key=lambda r: (r.started_at, r.path)):
        lines.setdefault(line_key(r), []).append(r)
    found = [s for members in lines.values() for s in line_slowdowns(members)]
    return sorted(found, key=lambda s: s.started_at, reverse=True)
