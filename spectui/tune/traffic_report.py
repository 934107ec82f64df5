"""What ``spectui tune --workload`` reports, kept as ``tune-traffic.json`` in its folder and
printed again by ``--analyze DIR`` without a model.

Only check-half figures are reported as results: the tuned setting, each tried method as the
runtime ships it, and AR, on requests the search never saw. The search's own figures (the
tuning half) are shown as what they are, the search's trail. The advice is the setting that
runs fastest on the check half among the tuned one and the defaults, and "run AR" where none
beats AR by the noise margin (``GAIN``).

A speedup is the workload's own kind (``spectui.workload.result.pair_speedup``): the AR twins'
summed time over the setting's, over the text each request shares with its twin. The check runs
every setting twice, in mirrored order (AR, the tuned one, the defaults; then the defaults
backwards, the tuned one, AR), so a request's time is the mean of its two runs and a drift that
runs one way through the check moves every setting alike.

Its 95% interval holds two things. What the requests vary: a percentile bootstrap over requests
of that ratio of sums. And what this host moves between runs of the same setting on the same
requests (``run_spread``): every setting's two runs differ by that much, pooled over the settings
as a standard deviation of a run's log time, with Student's t for how few settings gave it. A
setting is advised only when the whole interval is above AR: one run of a setting is one draw of
a few seconds of a shared machine (on mixed-12 at one client, ngram-mod as shipped read 1.14x in
one check, 0.85x in another and 1.01x in the grid).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import msgspec
import numpy as np

from spectui import file_kinds, storage
from spectui.errors import SpectuiError
from spectui.format import text_table
from spectui.metrics.stats import BOOTSTRAP_SEED, bootstrap, percentile_interval, t_quantile_975
from spectui.tune.runtime import GAIN
from spectui.tune.traffic_search import Trial

RESULT_NAME = "tune-traffic.json"
#: the verdicts of ``spectui workload``'s judge, in its order, and their JSON names
VERDICTS = (("identical", "identical"), ("near-tie", "near_tie"), ("batched", "batched"), ("defect", "defect"), ("unjudged", "unjudged"))
TUNED, DEFAULT, AR = "tuned", "default", "AR"


class RequestRow(msgspec.Struct, kw_only=True):
    """One check-half request of one setting: its times over the text it shares with its AR
    twin, and its verdict as the workload's judge gave it."""

    index: int
    exact: str
    why: str = ""
    ms: float | None = None  # the setting's time to the last token in common with its AR twin
    #: AR's time to the same token: the mean of the check's two AR runs (before the settings and
    #: after them; the first alone in a result from before 2026-12-03, or where the second failed)
    ar_ms: float | None = None
    #: each run's time to that token, the setting's and AR's: ``ms`` and ``ar_ms`` are their means
    #: (one run each in a result from before 2026-12-04; None where a run has no such token)
    runs_ms: list[float | None] = msgspec.field(default_factory=list)
    ar_runs_ms: list[float | None] = msgspec.field(default_factory=list)

    @property
    def speedup(self) -> float:
        return self.ar_ms / self.ms if self.ms and self.ar_ms else math.nan


class CheckRow(msgspec.Struct, kw_only=True):
    """One setting on the check half."""

    role: str  # tuned / default / AR
    label: str
    candidate: dict | None = None  # traffic_space.Candidate.to_dict(); None for AR
    command: str = ""  # the server's command line, to paste
    speedup: float | None = None
    requests: list[RequestRow] = msgspec.field(default_factory=list)

    @property
    def value(self) -> float:
        return math.nan if self.speedup is None else self.speedup

    @property
    def runs(self) -> int:
        """How many runs of this setting its figures are the mean of."""
        return max((len(r.runs_ms) for r in self.requests), default=0) or 1

    def counts(self) -> dict[str, int]:
        return {key: sum(1 for r in self.requests if r.exact == verdict) for verdict, key in VERDICTS}


class TrafficResult(msgspec.Struct, kw_only=True):
    workload: str
    path: str
    runtime: str = "llama-server"
    model: str = ""
    clients: int = 1
    rate: float = 0.0
    budget_s: float = 0.0
    search_s: float = 0.0
    check_s: float = 0.0
    space: int = 0
    space_by_method: dict[str, int] = msgspec.field(default_factory=dict)
    tuning: list[int] = msgspec.field(default_factory=list)  # request indices
    check: list[int] = msgspec.field(default_factory=list)
    trials: list[dict] = msgspec.field(default_factory=list)  # traffic_search.Trial.to_dict()
    stopped: str = ""  # why the search ended early ("" = every rung ran)
    rows: list[CheckRow] = msgspec.field(default_factory=list)
    complete: bool = False

    @property
    def load(self) -> str:
        if self.rate:
            return f"{self.rate:g} requests/s"
        return f"{self.clients} client{'s' * (self.clients != 1)}"

    def row(self, role: str) -> CheckRow | None:
        return next((r for r in self.rows if r.role == role), None)

    def trial_list(self) -> list[Trial]:
        return [Trial.from_dict(t) for t in self.trials]

    def spread(self) -> Spread:
        return run_spread(self.rows)

    def interval(self, row: CheckRow) -> tuple[float, float]:
        """``row``'s 95% interval: its requests' bootstrap, widened by the host's run-to-run
        spread where the check measured it (``run_spread``)."""
        return row_interval(row, self.spread(), (self.row(AR) or row).runs)


class Spread(msgspec.Struct, frozen=True):
    """What this host moves between two runs of one setting over the same requests: the
    standard deviation of a run's summed log time (``sd``), from ``settings`` settings run twice."""

    sd: float = math.nan
    settings: int = 0

    @property
    def known(self) -> bool:
        return self.settings > 0 and math.isfinite(self.sd)


def run_spread(rows: Sequence[CheckRow]) -> Spread:
    """Every row run twice gives one difference of log summed times, over the requests both of
    its runs timed; a run's variance is half the mean squared difference (AR's own two runs
    count as one row)."""
    diffs = []
    for row in rows:
        both = [(a, b) for q in row.requests if len(q.runs_ms) == 2 for a, b in [q.runs_ms]
                if a is not None and b is not None and _pos(a) and _pos(b)]
        if both:
            diffs.append(math.log(sum(a for a, _ in both) / sum(b for _, b in both)))
    if not diffs:
        return Spread()
    return Spread(sd=math.sqrt(sum(d * d for d in diffs) / (2 * len(diffs))), settings=len(diffs))


def row_interval(row: CheckRow, spread: Spread, ar_runs: int) -> tuple[float, float]:
    """A setting's 95% interval over AR run ``ar_runs`` times: its requests' bootstrap of the
    ratio of sums, widened by ``spread``."""
    return widened(row.value, ratio_ci(timed_pairs(row.requests)), spread, row.runs, ar_runs)


def widened(value: float, ci: tuple[float, float], spread: Spread, runs: int, ar_runs: int) -> tuple[float, float]:
    """``ci`` (the requests' interval of ``value``) with the run-to-run spread added on the log
    scale: a speedup of a mean of ``runs`` runs over a mean of ``ar_runs`` of AR moves by
    sd * sqrt(1/runs + 1/ar_runs) between checks, at Student's t for the settings the sd came from."""
    lo, hi = ci
    if not spread.known or not (math.isfinite(value) and math.isfinite(lo) and math.isfinite(hi)) or min(value, lo) <= 0:
        return lo, hi
    run = t_quantile_975(spread.settings) * spread.sd * math.sqrt(1 / runs + 1 / ar_runs)
    below, above = math.log(value / lo), math.log(hi / value)
    return value * math.exp(-math.hypot(below, run)), value * math.exp(math.hypot(above, run))


def _pos(v: float | None) -> bool:
    return v is not None and math.isfinite(v) and v > 0


def timed_pairs(requests: Sequence[RequestRow]) -> list[tuple[float, float]]:
    """(AR ms, setting ms) of each request that has both figures."""
    return [(r.ar_ms, r.ms) for r in requests
            if r.ar_ms is not None and r.ms is not None and math.isfinite(r.ar_ms) and math.isfinite(r.ms) and r.ms > 0]


def ratio_of_sums(requests: Sequence[RequestRow]) -> float:
    """A setting's speedup over its requests: their AR times summed over theirs, as
    ``pair_speedup`` sums a level (NaN where none has both)."""
    known = timed_pairs(requests)
    return sum(a for a, _ in known) / sum(m for _, m in known) if known else math.nan


def ratio_ci(pairs: Sequence[tuple[float, float]], seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """95% percentile-bootstrap interval of sum(AR) / sum(setting) over requests (NaN for
    fewer than two requests with figures)."""
    v = np.array([(a, b) for a, b in pairs if math.isfinite(a) and math.isfinite(b) and b > 0], dtype=float)
    if len(v) < 2:
        return math.nan, math.nan
    ar, ms = v[:, 0], v[:, 1]
    ratios = bootstrap(len(v), lambda idx: ar[idx].sum(axis=1) / ms[idx].sum(axis=1), np.random.default_rng(seed))
    return percentile_interval(ratios)


def advised(result: TrafficResult) -> CheckRow | None:
    """The setting to run: the fastest on the check half of the tuned one and the defaults
    whose requests the judge found no defect in (one output speculation changed is never
    advised, however fast), when it beats AR by ``GAIN`` and its whole interval (requests and
    runs) is above AR; None: run AR."""
    options = [r for r in result.rows if r.role in (TUNED, DEFAULT) and math.isfinite(r.value) and not r.counts()["defect"]]
    best = max(options, key=lambda r: (r.value, r.role == TUNED), default=None)
    if best is None or best.value < GAIN:
        return None
    lo, _ = result.interval(best)
    return best if not math.isfinite(lo) or lo > 1.0 else None


def noise_words(result: TrafficResult) -> str:
    """How much this host moved between runs of one setting, as the advice states it."""
    spread = result.spread()
    if not spread.known:
        return "the check ran each setting once: its interval holds the requests' spread, not the host's from run to run"
    return (f"a run of one setting moved {math.expm1(spread.sd):.0%} (one sd) from its twin on this host,"
            f" over {spread.settings} setting{'s' * (spread.settings != 1)} run twice")


def _x(v: float) -> str:
    return f"{v:.2f}x" if math.isfinite(v) else "—"


def exactness(row: CheckRow) -> str:
    """``all 6 identical`` or ``4 identical, 1 near-tie, 1 defect``."""
    n = len(row.requests)
    counts = {verdict: sum(1 for r in row.requests if r.exact == verdict) for verdict, _ in VERDICTS}
    if n and counts["identical"] == n:
        return f"all {n} identical" if n > 1 else "identical"
    return ", ".join(f"{c} {v}" for v, c in counts.items() if c) or "none judged"


def _defects(row: CheckRow) -> str:
    """`` with 1 defect: never advised`` where the judge found one, else nothing."""
    n = row.counts()["defect"]
    return f" with {n} defect{'s' * (n != 1)}: never advised" if n else ""


def advice(result: TrafficResult) -> str:
    """The one line a person acts on."""
    tuned, pick = result.row(TUNED), advised(result)
    n = len(result.check)
    defaults = [r for r in result.rows if r.role == DEFAULT and r is not pick]
    shipped = "; ".join(f"{r.label}: {_x(r.value)}" for r in defaults)
    head = f"at {result.load}"
    if tuned is None:
        return f"{head}: nothing measured on the check half ({result.stopped or 'the search found no setting'})"
    if pick is None:
        others = "; ".join(f"{r.label}: {_x(r.value)}" + ("" if _ci_text(result, r) == "—" else f" ({_ci_text(result, r)})")
                           + _defects(r) for r in result.rows if r.role in (TUNED, DEFAULT))
        return (f"{head}: run AR: no setting beat AR by {GAIN - 1:.0%} with its 95% interval above AR on {n}"
                f" request{'s' * (n != 1)} it never saw ({others})")
    lo, hi = result.interval(pick)
    ci = f" (95% CI {lo:.2f}-{hi:.2f})" if math.isfinite(lo) else ""
    which = "" if pick.role == TUNED else f" (the tuned {tuned.label} ran {_x(tuned.value)} there)"
    line = (f"{head}: {pick.label}: {_x(pick.value)} AR on {n} request{'s' * (n != 1)} it never saw{ci}, {exactness(pick)}"
            f"{which}")
    return line + (f"; {shipped}" if shipped else "")


def to_json(result: TrafficResult) -> dict[str, object]:
    """The ``--json`` object: every speedup measured on the check half."""
    tuned, pick, spread = result.row(TUNED), advised(result), result.spread()

    def finite(v: float) -> float | None:
        return v if math.isfinite(v) else None

    def one(r: CheckRow) -> dict[str, object]:
        lo, hi = result.interval(r)
        return {"setting": r.label, "command": r.command, "speedup": finite(r.value), "ci": [finite(lo), finite(hi)],
                "requests": r.counts(), "candidate": r.candidate,
                "per_request": [{"index": q.index, "exact": q.exact, "why": q.why, "speedup": finite(q.speedup)} for q in r.requests]}

    tried = len({str(t["candidate"]) for t in result.trials})
    return {
        "workload": result.workload, "load": {"clients": result.clients, "rate": result.rate}, "space": result.space,
        "space_by_method": result.space_by_method, "tried": tried, "trials": len(result.trials),
        "split": {"tuning": result.tuning, "check": result.check},
        "best": one(tuned) if tuned is not None else None,
        "defaults": [{"setting": r.label, "speedup": finite(r.value), "command": r.command, "requests": r.counts()}
                     for r in result.rows if r.role == DEFAULT],
        "advice": advice(result), "advised": None if pick is None else pick.label,
        "run_spread": {"sd": finite(spread.sd), "settings": spread.settings},
        "command": "" if pick is None else pick.command,
        "search_s": result.search_s, "check_s": result.check_s, "budget_s": result.budget_s, "stopped": result.stopped,
    }


def format_text(result: TrafficResult, folder: str = "") -> str:
    tuned, pick = result.row(TUNED), advised(result)
    rungs = max((t["rung"] for t in result.trials), default=-1) + 1
    tried = len({str(t["candidate"]) for t in result.trials})
    by_method = ", ".join(f"{m} {n}" for m, n in result.space_by_method.items())
    out = [f"spectui tune: {result.workload} at {result.load} · {result.runtime} · {result.model or '?'}",
           f"space: {result.space} settings ({by_method}); tried {tried} in {rungs} rung{'s' * (rungs != 1)} on the tuning half"
           f" ({len(result.tuning)} request{'s' * (len(result.tuning) != 1)}), checked on the other {len(result.check)};"
           f" {(result.search_s + result.check_s) / 60:.1f} of {result.budget_s / 60:g} min"
           + (f"; {result.stopped}" if result.stopped else ""),
           "", advice(result)]
    if pick is not None:
        out.append(f"  {pick.command}")
    elif tuned is not None:
        out.append("  run the server without --spec-type (AR)")
    if result.rows:
        table = [[r.label if r.role != TUNED else f"{r.label} (tuned)", _x(r.value), _ci_text(result, r),
                  "/".join(str(c) for c in r.counts().values())] for r in result.rows if r.role != AR]
        out += ["", "on the check half (requests the search never saw), each over the runtime's AR on the same text;"
                f" the interval holds the requests and the runs ({noise_words(result)}):",
                text_table(["setting", "speedup", "95% CI", "identical/near-tie/batched/defect/unjudged"], table,
                           right={1, 2}, rules_before={0})]
        out += ["", "every check-half request, as the workload judges it against AR at one client:"]
        for r in result.rows:
            if r.role == AR:
                continue
            words = ", ".join(f"#{q.index} {q.exact}{'' if not math.isfinite(q.speedup) else f' {q.speedup:.2f}x'}" for q in r.requests)
            out.append(f"  {r.label}: {words}")
            out += [f"      #{q.index}: {q.why}" for q in r.requests if q.exact not in ("identical", "reference") and q.why]
    trials = result.trial_list()
    if trials:
        priced_rung = min((t.rung for t in trials if t.priced), default=None)
        out += ["", "the search (tuning half only; not a result): best of each rung"]
        for rung in range(rungs):
            at = sorted((t for t in trials if t.rung == rung), key=lambda t: -t.speedup if math.isfinite(t.speedup) else math.inf)
            if at:
                top = ", ".join(f"{t.candidate.label()} {_x(t.speedup)}" for t in at[:3])
                if at[0].priced:
                    out.append(f"  priced: {len(at)} from their drafters replayed over AR's tokens: {top}")
                elif priced_rung is not None and rung > priced_rung:
                    out.append(f"  race round {rung - priced_rung}: {len(at)} on the whole tuning half: {top}")
                else:
                    out.append(f"  rung {rung + 1}: {len(at)} on {at[0].share:.0%} of the tuning half: {top}")
    if folder:
        out += ["", f"recorded in {folder} (spectui tune --analyze {folder} prints this again)"]
    return "\n".join(out)


def _ci_text(result: TrafficResult, r: CheckRow) -> str:
    lo, hi = result.interval(r)
    return f"{lo:.2f}-{hi:.2f}" if math.isfinite(lo) else "—"


KIND = file_kinds.json_kind("spectui tune traffic result", lambda doc: isinstance(doc, dict) and "rows" in doc and "trials" in doc)


def save(result: TrafficResult, folder: Path) -> None:
    storage.write_atomic(folder / RESULT_NAME, msgspec.json.encode(result), KIND)


def load(folder: str | os.PathLike[str]) -> TrafficResult:
    path = Path(folder) / RESULT_NAME if Path(folder).is_dir() else Path(folder)
    if not path.exists():
        raise SpectuiError(f"--analyze {folder}: no {RESULT_NAME} there (a folder spectui tune --workload recorded)")
    try:
        return msgspec.json.decode(path.read_bytes(), type=TrafficResult)
    except OSError as exc:
        raise SpectuiError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise SpectuiError(f"{path}: not a tune result ({exc})") from None
