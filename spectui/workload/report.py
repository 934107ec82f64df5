"""A workload's figures as rows of text: the one table the command prints and the view shows."""

from __future__ import annotations

import math

from spectui.format import num, text_table
from spectui.workload.result import BATCHED, DEFECT, IDENTICAL, NEAR_TIE, UNJUDGED, LevelResult, WorkloadResult

HEADER = ["load", "setting", "pass", "out tok/s", "speedup", "TTFT p50", "ITL p50/p95/p99 ms", "queue p50", "accept",
          "identical/near-tie/batched/defect/unjudged", "server CPU s", "RSS MiB", "J/token"]
RIGHT = frozenset({3, 4, 5, 7, 8, 10, 11, 12})
NOTE = ("speedup: over the same text, each request up to where it parts from its AR twin at that load; exactness: "
        "against the same request's AR output at one client (batched: AR under the same load parts there too); "
        "SHARED N%: other processes held N% of the CPU over the level, its figures are that load's, not the machine's")


def load_label(clients: int, rate: float) -> str:
    return str(clients) if clients else f"{rate:g}/s"


def level_row(lv: LevelResult) -> list[str]:
    c = lv.counts
    return [
        load_label(lv.clients, lv.rate), lv.setting, str(lv.pass_no + 1), num(lv.output_tok_s),
        ("AR" if lv.ar else num(lv.speedup, ".2f", "x")) + (f" SHARED {lv.other_load:.0%}" if lv.disturbed else ""),
        num(lv.ttft_ms_p50, ".0f", " ms"),
        "/".join(num(v, ".1f") for v in (lv.itl_ms_p50, lv.itl_ms_p95, lv.itl_ms_p99)), num(lv.queue_ms_p50, ".0f", " ms"),
        num(lv.acceptance * 100 if lv.drafted > 0 else None, ".0f", "%"),
        "reference" if lv.ar and (lv.clients, lv.rate, lv.pass_no) == (1, 0.0, 0)
        else "/".join(str(c.get(k, 0)) for k in (IDENTICAL, NEAR_TIE, BATCHED, DEFECT, UNJUDGED)),
        num(lv.server_cpu_s, ".1f"), num(lv.server_rss_mib, ".0f"), num(lv.joules_per_token, ".3f"),
    ]


def headline(result: WorkloadResult) -> str:
    energy = f"; energy: {result.energy}" if result.energy else ""
    return (f"workload {result.workload}: {result.n_requests} requests, {result.sampling}; {result.slots} slot(s) a server, "
            f"warm-up {result.warmup}, {result.passes} pass(es) a level{energy}")


def partings(result: WorkloadResult, limit: int = 10) -> list[str]:
    """One line per request that parted from its reference, the first ``limit`` of them."""
    parted = [(lv, r) for lv in result.levels for r in lv.requests if r.exact in (DEFECT, NEAR_TIE, BATCHED, UNJUDGED) and r.why]
    lines = [f"{lv.setting} at {load_label(lv.clients, lv.rate)}, request {r.index}: {r.exact}: {r.why}" for lv, r in parted[:limit]]
    if len(parted) > limit:
        lines.append(f"... and {len(parted) - limit} more partings (--json lists every request)")
    return lines


def speedup_bars(result: WorkloadResult, width: int = 24) -> list[str]:
    """Each setting's speedup against load as bars (1.0x marked), last pass of each level."""
    lines = []
    for setting in result.settings:
        levels = [lv for lv in result.levels if lv.setting == setting and not lv.ar and lv.pass_no == result.passes - 1]
        if not levels:
            continue
        lines.append(setting)
        top = max([2.0, *(lv.speedup for lv in levels if math.isfinite(lv.speedup))])
        for lv in levels:
            filled = round(width * lv.speedup / top) if math.isfinite(lv.speedup) else 0
            one = round(width / top)
            bar = "".join("█" if i < filled else ("│" if i == one else " ") for i in range(width))
            lines.append(f"  {load_label(lv.clients, lv.rate):>6} {bar} {num(lv.speedup, '.2f', 'x')}")
    return lines


def format_result(result: WorkloadResult) -> str:
    rows = [level_row(lv) for lv in result.levels]
    out = [headline(result), text_table(HEADER, rows, right=RIGHT), f"  {NOTE}"]
    out += [f"  {line}" for line in result.knees.values()]
    out += [f"  {line}" for line in partings(result)]
    if not result.complete:
        out.append(f"  incomplete: {result.stopped or 'stopped'}")
    return "\n".join(out)
