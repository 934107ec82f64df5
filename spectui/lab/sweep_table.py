"""``spectui sweep``'s table, from the runs it recorded: a row per tier and point, each run's
speedup against the AR run of the same prompt in the same round, and the knee of each K curve.

Per tier and point (all from ``summarize`` of each run's events):

* acceptance P50: median over runs of accepted / drafted;
* decode tok/s P50 and P95 over runs (tokens after the first over the time since the first);
* ITL p95 / p99: the median over runs of each run's own percentile;
* TTFT: median over runs; peak memory: the largest peak RSS of any run; swap: the largest
  swap growth of any run;
* speedup vs AR: the median over runs of (run tok/s / tok/s of the AR run of the same prompt
  in the same round), over the same text (greedy runs whose outputs part are both timed up to
  where they part), with a 95% percentile-bootstrap interval of that median
  (``spectui.metrics.stats.median_ci``: ``BOOTSTRAP_RESAMPLES`` resamples, ``BOOTSTRAP_SEED``).

The knee of the K curve, per tier (and per drafter of a grid): the smallest K whose speedup is
within 2% of the best K's (past it, a longer draft buys nothing measurable); when no K beats AR,
there is no knee.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import msgspec

from spectui.drafting import RUNTIME_PREFIX
from spectui.metrics.conditions import MachineLoad
from spectui.metrics.same_text import Output, speedup
from spectui.metrics.stats import Summary, median_ci, nanmedian, nanpercentile

KNEE_TOLERANCE = 0.02


class SweepPoint(msgspec.Struct, frozen=True):
    knob: str  # "ar" for the baseline, else one of KNOBS
    value: str
    #: a grid's K point: the drafter this K is for ("": the base configuration's)
    drafter: str = ""

    @property
    def label(self) -> str:
        if self.knob == "ar":
            return "AR"
        if self.knob == "k" and self.drafter:
            return f"{drafter_label(self.drafter)} K={self.value}"
        if self.knob == "drafter" and self.value.startswith(RUNTIME_PREFIX):
            return drafter_label(self.value)  # a runtime's method, as its K points name it
        return {"k": "K", "temperature": "temp", "top_k": "top-k"}.get(self.knob, self.knob) + "=" + self.value


def drafter_label(source: str) -> str:
    """A drafter as a sweep's rows name it: a runtime's method without its prefix, a draft
    model by its file name, ``ngram`` as it is."""
    return source.removeprefix(RUNTIME_PREFIX) if source.startswith(RUNTIME_PREFIX) else os.path.basename(source)



class SweepRun(msgspec.Struct, kw_only=True):
    """One recorded run of the sweep (an entry of ``sweep.json``)."""

    index: int
    round: int
    tier: str
    prompt: str
    knob: str
    value: str
    file: str  # relative to the sweep folder
    drafter: str = ""  # a grid's K point: its drafter

    @property
    def point(self) -> SweepPoint:
        return SweepPoint(self.knob, self.value, self.drafter)


class SweepRow(msgspec.Struct, kw_only=True):
    tier: str
    knob: str
    value: str
    label: str
    runs: int
    acceptance_p50: float
    tok_s_p50: float
    tok_s_p95: float
    itl_p95_ms: float
    itl_p99_ms: float
    ttft_ms: float
    peak_rss_bytes: int
    swap_growth_bytes: int
    speedup: float
    speedup_ci_low: float
    speedup_ci_high: float
    drafter: str = ""  # a grid's K point: its drafter
    #: the busiest share of all cores other processes held during the row's runs (or their AR
    #: runs), and whether that made the machine shared (``metrics.conditions.MachineLoad``):
    #: the row's speedup is then the load's, not the machine's
    other_load: float | None = None
    disturbed: bool = False


class Knee(msgspec.Struct, kw_only=True):
    tier: str
    best_k: int | None
    best_speedup: float
    knee_k: int | None  # None: no K beats AR
    detail: str
    drafter: str = ""  # a grid: whose K curve ("": the base configuration's)


def aggregate(runs: Sequence[SweepRun], summaries: dict[int, Summary],
              outputs: dict[int, Output] | None = None,
              loads: dict[int, MachineLoad] | None = None) -> tuple[list[SweepRow], list[Knee]]:
    """The table: a row per tier and point. A run's speedup is against the AR run of the same
    round and prompt, over the same text (``outputs``, greedy runs: two outputs that part are
    timed up to where they part; without them, the whole runs' decode rates)."""
    ar_run = {(r.round, r.prompt): r.index for r in runs if r.knob == "ar"}
    groups: dict[tuple[str, SweepPoint], list[SweepRun]] = {}
    for r in runs:
        groups.setdefault((r.tier, r.point), []).append(r)

    def ratio(r: SweepRun, s: Summary) -> float | None:
        base = ar_run.get((r.round, r.prompt))
        if base is None or not summaries[base].decode_tok_s > 0:
            return None
        if outputs is not None and r.index in outputs and base in outputs and r.point.knob != "temperature":
            return speedup(outputs[r.index], outputs[base], greedy=True)
        return s.decode_tok_s / summaries[base].decode_tok_s

    rows = []
    for (tier, point), members in groups.items():
        ss = [summaries[r.index] for r in members]
        rates = [s.decode_tok_s for s in ss]
        ratios = [x for x in (ratio(r, s) for r, s in zip(members, ss)) if x is not None]
        low, high = median_ci(ratios)
        load = MachineLoad(None)
        for r in members:  # a pair is as disturbed as its busier side: the run or its AR run
            for i in (r.index, ar_run.get((r.round, r.prompt))):
                if loads is not None and i in loads:
                    load = load.worst(loads[i])
        rows.append(
            SweepRow(
                tier=tier,
                knob=point.knob,
                value=point.value,
                label=point.label,
                runs=len(members),
                acceptance_p50=nanmedian(s.acceptance_rate for s in ss),
                tok_s_p50=nanmedian(rates),
                tok_s_p95=nanpercentile(rates, 95),
                itl_p95_ms=nanmedian(s.itl_p95_ms for s in ss),
                itl_p99_ms=nanmedian(s.itl_p99_ms for s in ss),
                ttft_ms=nanmedian(s.ttft_ms for s in ss),
                peak_rss_bytes=max(s.peak_rss_bytes for s in ss),
                swap_growth_bytes=max(s.swap_delta_bytes for s in ss),
                speedup=nanmedian(ratios),
                speedup_ci_low=low,
                speedup_ci_high=high,
                drafter=point.drafter,
                other_load=load.share,
                disturbed=load.shared,
            )
        )
    return rows, knees(rows)


def knees(rows: Sequence[SweepRow]) -> list[Knee]:
    """The knee of each K curve: one per tier, or per tier and drafter in a grid."""
    out = []
    for tier, drafter in dict.fromkeys((r.tier, r.drafter) for r in rows if r.knob == "k"):
        curve = sorted(
            (int(r.value), r.speedup) for r in rows if r.tier == tier and r.drafter == drafter and r.knob == "k" and r.speedup == r.speedup
        )
        if not curve:
            continue
        who = f"{drafter_label(drafter)}: " if drafter else ""
        best_k, best = max(curve, key=lambda kv: kv[1])
        if best <= 1.0:
            out.append(Knee(tier=tier, best_k=best_k, best_speedup=best, knee_k=None,
                            detail=f"{who}no K beats AR (best {best:.2f}x at K={best_k})", drafter=drafter))
            continue
        knee_k = next(k for k, v in curve if v >= best * (1 - KNEE_TOLERANCE))
        out.append(
            Knee(
                tier=tier,
                best_k=best_k,
                best_speedup=best,
                knee_k=knee_k,
                detail=f"{who}K={knee_k} is within {KNEE_TOLERANCE:.0%} of the best ({best:.2f}x at K={best_k})",
                drafter=drafter,
            )
        )
    return out
