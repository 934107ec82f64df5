"""A sweep's table per tier, its CSV, its plotext charts, and the floors a runbook keeps.

Floors (``spectui report --floors DIR``): for each tier, at the point a sweep recommends (the
knee of the K curve, else the base K; in a grid, the knee of the drafter whose curve went
highest; a sweep without a K knob gives no floors), the worst a healthy run
did: the acceptance and decode tok/s floors are the 5th percentiles over that point's runs
(taken as an observed value: with fewer than 20 runs, their minimum), and the swap ceiling is the largest swap growth
seen, rounded up to the next 64 MiB (so a sweep that never swapped allows 64 MiB).
``spectui diff --floors FILE`` checks a new run against the floors of its tier.
"""

from __future__ import annotations

import csv
import io
import math

import msgspec

from spectui.charts import Axis, Panel, Series, render
from spectui.errors import SpectuiError
from spectui.format import num_or_na, text_table
from spectui.lab.sweep import SweepResult
from spectui.lab.sweep_table import SweepRow, drafter_label
from spectui.metrics.conditions import MachineLoad
from spectui.metrics.stats import Summary, nanpercentile

_MIB = 2**20
SWAP_SLACK = 64 * _MIB

COLUMNS = [
    ("point", lambda r: r.label),
    ("runs", lambda r: str(r.runs)),
    ("accept p50", lambda r: "AR" if r.knob == "ar" else num_or_na(r.acceptance_p50, ".3f")),
    ("tok/s p50", lambda r: num_or_na(r.tok_s_p50, ".1f")),
    ("tok/s p95", lambda r: num_or_na(r.tok_s_p95, ".1f")),
    ("ITL p95", lambda r: num_or_na(r.itl_p95_ms, ".1f")),
    ("ITL p99", lambda r: num_or_na(r.itl_p99_ms, ".1f")),
    ("TTFT ms", lambda r: num_or_na(r.ttft_ms, ".0f")),
    ("peak MiB", lambda r: f"{r.peak_rss_bytes / _MIB:.0f}"),
    # a row measured on a shared machine (``metrics.conditions``) says so: its speedup is the load's
    ("speedup", lambda r: num_or_na(r.speedup, ".2f") + "x" + (f" SHARED {r.other_load or 0:.0%}" if r.disturbed else "")),
    ("95% CI", lambda r: "" if r.knob == "ar" or r.speedup_ci_low != r.speedup_ci_low else f"{r.speedup_ci_low:.2f}-{r.speedup_ci_high:.2f}"),
]


def format_table(result: SweepResult) -> str:
    """One table per tier (a dashed rule under its header), its columns as wide as the widest
    tier's so the tiers line up, then the tier's knee."""
    names = [name for name, _ in COLUMNS]
    tiers = list(dict.fromkeys(r.tier for r in result.rows))
    cells = {tier: [[get(r) for _, get in COLUMNS] for r in result.rows if r.tier == tier] for tier in tiers}
    widths = [max([len(names[i])] + [len(row[i]) for rows in cells.values() for row in rows]) for i in range(len(COLUMNS))]
    right = set(range(1, len(COLUMNS)))
    lines = []
    for tier in tiers:
        prompts = sorted({run.prompt for run in result.runs if run.tier == tier})
        lines.append(f"== tier {tier} ({', '.join(prompts)}) ==")
        lines.append(text_table(names, cells[tier], right=right, indent=0, rules_before={0}, min_widths=widths))
        lines.extend(f"knee: {knee.detail}" for knee in result.knees if knee.tier == tier)
        lines.append("")
    shared = [r for r in result.rows if r.disturbed]
    if shared:
        worst = MachineLoad(max(r.other_load or 0.0 for r in shared))
        lines.append(f"{worst.text()} at worst: {len(shared)} rows measured while other processes held the CPU; "
                     "their speedups are that load's, not this machine's: run the sweep again on a quiet machine")
    done = len(result.runs)
    total = result.plan.total_runs
    lines.append(
        f"{done} of {total} runs in {result.elapsed_s:.0f} s{'' if result.complete else ' (incomplete)'}; "
        f"recordings in {result.folder}"
    )
    return "\n".join(lines)


def format_csv(result: SweepResult) -> str:
    buf = io.StringIO()
    fields = list(SweepRow.__struct_fields__)
    writer = csv.writer(buf)
    writer.writerow(fields)
    for r in result.rows:
        writer.writerow([getattr(r, f) for f in fields])
    return buf.getvalue()


def format_charts(result: SweepResult, width: int = 72, height: int = 14, *, colour: bool = False) -> str:
    """Speedup and acceptance (in percent) against K, a line per tier (and per drafter of a
    grid) (``spectui.charts``; plain text unless ``colour``)."""
    curves = list(dict.fromkeys((r.tier, r.drafter) for r in result.rows if r.knob == "k"))
    if not curves:
        return ""
    ks = sorted({int(r.value) for r in result.rows if r.knob == "k"})
    panels = []
    for field, title, factor in (("speedup", "speedup vs AR (1 = AR)", 1.0), ("acceptance_p50", "acceptance p50 %", 100.0)):
        series = []
        for tier, drafter in curves:
            pts = sorted((int(r.value), getattr(r, field) * factor) for r in result.rows
                         if r.tier == tier and r.drafter == drafter and r.knob == "k")
            label = f"{tier} {drafter_label(drafter)}" if drafter else tier
            series.append(Series([k for k, _ in pts], [v for _, v in pts], label=label))
        panels.append(Panel(title, series, x=Axis(ticks=ks, label="K")))
    return render(panels, width=width * 2, height=height, cols=2, colour=colour)


# -- floors -----------------------------------------------------------------------------------------


class Floor(msgspec.Struct, kw_only=True):
    tier: str
    point: str  # e.g. "K=4"
    mode: str  # "spec" or "ar"
    drafter: str
    k: int
    acceptance_floor: float
    decode_tok_s_floor: float
    swap_growth_ceiling_mb: float
    runs: int


class Floors(msgspec.Struct, kw_only=True):
    source: str
    host: str
    floors: list[Floor]


def _p5(values: list[float]) -> float:
    # "lower": an observed value at or below the 5th percentile (the minimum under 20 runs), so
    # every run a floor was taken from meets it
    return nanpercentile(values, 5, method="lower")


def floors_from_sweep(result: SweepResult, summaries: dict[int, Summary], host: str = "") -> Floors:
    base = result.plan.base
    out = []
    for tier in dict.fromkeys(r.tier for r in result.runs):
        # a grid has a knee per drafter: the one whose curve went highest
        knee = max((k for k in result.knees if k.tier == tier), key=lambda k: k.best_speedup, default=None)
        # no K beat AR here: the floors are still the best K's (what this host does, if it is
        # run), never none at all, which made `report --floors` depend on the machine's speed
        k = (knee.knee_k if knee.knee_k is not None else knee.best_k or 0) if knee is not None else base.draft.fixed_k or 0
        drafter = knee.drafter if knee is not None else ""
        members = [r for r in result.runs if r.tier == tier and r.knob == "k" and r.drafter == drafter and int(r.value) == k]
        if not members:  # no K knob in this sweep: no point ran the base configuration itself
            continue
        ss = [summaries[r.index] for r in members]
        swap = max(s.swap_delta_bytes for s in ss)
        out.append(
            Floor(
                tier=tier,
                point=members[0].point.label,
                mode="spec",
                drafter=drafter or base.draft.flag,  # "ngram", a draft model or a runtime's method, as --drafters names it
                k=k,
                acceptance_floor=math.floor(_p5([s.acceptance_rate for s in ss]) * 100) / 100,
                decode_tok_s_floor=math.floor(_p5([s.decode_tok_s for s in ss]) * 10) / 10,
                swap_growth_ceiling_mb=(max(0, swap) // SWAP_SLACK + 1) * SWAP_SLACK / _MIB,
                runs=len(ss),
            )
        )
    return Floors(source=result.folder, host=host, floors=out)


def format_floors(f: Floors) -> str:
    rows = [
        [
            x.tier,
            f"{x.drafter} K={x.k}: acceptance >= {x.acceptance_floor:.2f}, decode >= {x.decode_tok_s_floor:.1f} tok/s, "
            f"swap growth <= {x.swap_growth_ceiling_mb:.0f} MiB ({x.runs} runs)",
        ]
        for x in f.floors
    ]
    head = f"# spectui floors from {f.source}{f' on {f.host}' if f.host else ''}"
    return "\n".join([head, text_table(None, rows, indent=0)] if rows else [head])


def read_floors(path: str) -> Floors:
    try:
        with open(path, "rb") as f:
            return msgspec.json.decode(f.read(), type=Floors)
    except OSError as exc:
        raise SpectuiError(f"cannot read floors {path}: {exc.strerror or exc}") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise SpectuiError(f"{path} is not a floors file (spectui report --floors DIR --json): {exc}") from None


class FloorCheck(msgspec.Struct, kw_only=True):
    name: str
    passed: bool
    value: float
    limit: float
    text: str


def check_floors(floors: Floors, tier: str, drafter: str, k: int, s: Summary) -> tuple[Floor | None, list[FloorCheck]]:
    """A run's checks against the floor of its tier and configuration (None: no such floor)."""
    floor = next((x for x in floors.floors if x.tier == tier and x.drafter == drafter and x.k == k), None)
    if floor is None:
        floor = next((x for x in floors.floors if x.tier == tier), None)
    if floor is None:
        return None, []
    swap_mb = s.swap_delta_bytes / _MIB
    checks = [  # a NaN value (nothing drafted, no decode) compares False: it fails its floor
        FloorCheck(
            name="acceptance",
            passed=s.acceptance_rate >= floor.acceptance_floor,
            value=s.acceptance_rate,
            limit=floor.acceptance_floor,
            text=f"acceptance {num_or_na(s.acceptance_rate, '.3f')} >= floor {floor.acceptance_floor:.2f}",
        ),
        FloorCheck(
            name="decode tok/s",
            passed=s.decode_tok_s >= floor.decode_tok_s_floor,
            value=s.decode_tok_s,
            limit=floor.decode_tok_s_floor,
            text=f"decode {num_or_na(s.decode_tok_s, '.1f')} tok/s >= floor {floor.decode_tok_s_floor:.1f}",
        ),
        FloorCheck(
            name="swap",
            passed=swap_mb <= floor.swap_growth_ceiling_mb,
            value=swap_mb,
            limit=floor.swap_growth_ceiling_mb,
            text=f"swap growth {swap_mb:.0f} MiB <= ceiling {floor.swap_growth_ceiling_mb:.0f} MiB",
        ),
    ]
    return floor, checks
