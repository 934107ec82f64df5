"""Is ``spectui tune --workload``'s search honest? Its pick against the exhaustive grid of the
same space, on the same workload at the same load, both judged on the check half.

    python benchmarks/tune_traffic.py [--workload document-qa] [--clients 1] [--budget 8] [--threads 2]
        [--draft runtime:ngram-mod,...] [--target GGUF --draft-model GGUF] [--json FILE]

1. **The tune**, as ``spectui tune --workload`` runs it (the same parser, the same space, the
   same split): successive halving on the tuning half within ``--budget`` minutes, then the
   check half. Its wall time is the tune's time.
2. **The grid**: AR and every candidate of the space on the check half at the same load, each
   measured as the tune's check measures its few (each setting on its own server, warmed with
   the tuning half, twice, the second time in the other order, a request's time the two runs'
   mean). Its wall time is the grid's time: what measuring every setting on that many requests
   with the check's evidence costs.

3. **Head to head**: the grid's best is flattered by its own luck, even with two runs a
   setting (the largest of 83 noisy figures: 1.22x in the grid, 0.996x head to head on
   mixed-12 at 2 clients, results/tune-traffic-2026-12-04b.txt). So
   the grid's best, the tuned setting and the advised one run again on the check half with AR,
   ``--rounds`` times in alternating order, each round paired with its own AR; the share that
   counts is the median of the tuned setting's speedups over the median of the grid's best's.

Reported: the tuned setting's check-half speedup as a share of the grid's best, both read from
the grid (one run, the same conditions: the tune's own check figure is printed beside it) and
head to head, the best runtime default on the check half, whether the grid's best beats AR by
the noise margin (``spectui.tune.runtime.GAIN``; else the right advice is "run AR"), and the
two times (the head-to-head rounds are in neither).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from spectui.cli import build_parser
from spectui.cli.profiles import parse_args
from spectui.cli.tune_traffic import prepare
from spectui.tune.runtime import GAIN
from spectui.tune.traffic_report import AR, DEFAULT, TUNED, CheckRow, advice, advised, load, noise_words, row_interval, run_spread
from spectui.tune.traffic_space import Candidate
from spectui.workload.result import pair_speedup
from spectui.workload.tuning import TrafficTune


@dataclass
class Figure:
    """One setting of the grid on the check half."""

    speedup: float
    ci: tuple[float, float]
    exact: dict[str, int]
    default: bool  # a method as the runtime ships it


def grid(tune: TrafficTune, folder: Path, chunk: int) -> tuple[dict[str, Figure], float]:
    """AR and every candidate on the check half at the tune's load, each measured as the tune's
    check measures (``TrafficTune.measure_twice``: two runs, the second in the other order, a
    request's time their mean): each label's speedup, its 95% interval (the requests' and this
    host's run-to-run spread, pooled over the whole grid), and the exactness counts. ``chunk``
    candidates at a time, each chunk with its own AR: a workload keeps every server of a run up
    at once, and 27 servers of the 1.5B (with its draft) did not fit in 24 GiB (the 28th was not
    ready within 180 s). One run a setting would make the grid's best the luckiest of eighty-odd
    single draws and the grid half the evidence the check gives its few settings."""
    t0 = time.monotonic()
    rows: list[tuple[CheckRow, CheckRow]] = []  # (a setting, its chunk's AR)
    for i in range(0, len(tune.candidates), chunk):
        part = tune.candidates[i:i + chunk]
        where = folder / f"part{i // chunk + 1}" if chunk < len(tune.candidates) else folder
        measured = tune.measure_twice([(AR, None)] + [(DEFAULT if c.is_default else "candidate", c) for c in part], where)
        ar = next((r for r in measured if r.role == AR), None)
        if ar is None:
            raise SystemExit("tune_traffic: AR on the check half did not run")
        rows += [(r, ar) for r in measured if r.role != AR]
    spread = run_spread([r for r, _ in rows] + list({id(ar): ar for _, ar in rows}.values()))
    out: dict[str, Figure] = {}
    for row, ar in rows:
        c = Candidate.from_dict(row.candidate or {})
        out[row.label] = Figure(row.value, row_interval(row, spread, ar.runs), row.counts(), c.is_default and len(c.types) == 1)
    return out, time.monotonic() - t0


def head_to_head(tune: TrafficTune, candidates: list[Candidate], folder: Path, rounds: int) -> dict[str, float]:
    """Each candidate's median speedup over ``rounds`` runs of the check half, AR and the
    candidates in one order, then the reverse (each round paired with its own AR, the servers
    warmed with the tuning half as the grid's are)."""
    speedups: dict[str, list[float]] = {c.label(): [] for c in candidates}
    ar_setting = tune._setting(None)
    for i in range(rounds):
        here = folder / f"round{i + 1}"
        if i % 2 == 0:
            levels = tune.run_settings(tune.check, [ar_setting] + [tune._setting(c) for c in candidates], here, judged=False,
                                       warm=tune.tuning)
        else:  # AR last on the way back: a run puts its AR first, so AR runs on its own after the candidates
            levels = tune.run_settings(tune.check, [tune._setting(c) for c in candidates[::-1]], here, judged=False, warm=tune.tuning)
            levels += tune.run_settings(tune.check, [ar_setting], here / "AR", judged=False, warm=tune.tuning)
        ar = tune._at_load(levels, ar_setting.label)
        for c in candidates:
            level = tune._at_load(levels, tune._setting(c).label)
            if ar is not None and level is not None:
                pair_speedup(level, ar)
                speedups[c.label()].append(level.speedup)
    return {label: statistics.median(v) if v else math.nan for label, v in speedups.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="document-qa")
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--budget", type=float, default=8.0, help="the tune's minutes")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--draft", default=None, help="the methods to tune (default: every one the binary lists that applies)")
    ap.add_argument("--target", default=None)
    ap.add_argument("--draft-model", default=None)
    ap.add_argument("--out", default=None, help="the folder for both runs (default recordings/tune-traffic-bench-<time>)")
    ap.add_argument("--rounds", type=int, default=3, help="head-to-head rounds of the grid's best, the tuned and the advised")
    ap.add_argument("--grid-chunk", type=int, default=12, help="grid settings run at once, each chunk with its own AR")
    ap.add_argument("--tuned", default=None, metavar="DIR",
                    help="read the tune from this folder (an earlier run's tune/) instead of tuning again; its time is its own")
    ap.add_argument("--grid-from", default=None, metavar="FILE",
                    help="the grid's figures and time from an earlier run's --json (same workload, load and space) instead of"
                         " measuring it again (half an hour); head to head is measured afresh either way")
    ap.add_argument("--json", default=None, metavar="FILE")
    a = ap.parse_args()

    root = Path(a.out or f"recordings/tune-traffic-bench-{time.strftime('%Y%m%d-%H%M%S')}")
    argv = ["tune", "--workload", a.workload, "--clients", str(a.clients), "--budget", str(a.budget),
            "--threads", str(a.threads), "--out", str(root / ("tune-unused" if a.tuned else "tune"))]
    argv += ["--draft", a.draft] if a.draft else []
    argv += ["--target", a.target] if a.target else []
    argv += ["--draft-model", a.draft_model] if a.draft_model else []
    args = parse_args(build_parser(), argv)
    tune = prepare(args)
    print(f"space {len(tune.candidates)}, tuning half {len(tune.tuning.requests)} requests, check half {len(tune.check.requests)}",
          file=sys.stderr)

    if a.tuned:  # the search and check an earlier run of this benchmark timed
        result = load(a.tuned)
        tune_s = result.search_s + result.check_s
    else:
        t0 = time.monotonic()
        result = tune()
        tune_s = time.monotonic() - t0
    tuned = result.row(TUNED)
    if tuned is None:
        raise SystemExit(f"tune_traffic: the tune ended without a pick: {result.stopped}")
    print(f"tune: {advice(result)} ({tune_s:.0f} s)", file=sys.stderr)

    if a.grid_from:
        earlier = json.loads(Path(a.grid_from).read_text())
        if (earlier["workload"], earlier["clients"], earlier["space"]) != (a.workload, a.clients, len(tune.candidates)):
            raise SystemExit(f"tune_traffic: {a.grid_from} is a grid of another workload, load or space")
        figures = {label: Figure(f["speedup"], tuple(f["ci"]), f["exact"], f["default"]) for label, f in earlier["grid"].items()}
        grid_s = float(earlier["grid_s"])
    else:
        figures, grid_s = grid(tune, root / "grid", a.grid_chunk)
    ranked = sorted(figures.items(), key=lambda kv: -kv[1].speedup if math.isfinite(kv[1].speedup) else math.inf)
    best_label, best = ranked[0]
    mine = figures[tuned.label].speedup if tuned.label in figures else math.nan
    defaults = [(label, f.speedup) for label, f in figures.items() if f.default]
    best_default_label, best_default = max(((lbl, s) for lbl, s in defaults if math.isfinite(s)), key=lambda d: d[1],
                                           default=("", math.nan))
    share = mine / best.speedup if best.speedup > 0 else math.nan
    by_label = {c.label(): c for c in tune.candidates}
    pick = advised(result)
    # the grid's best default too: "never worse than the best default" is a claim one grid run cannot carry
    contenders = list(dict.fromkeys(lbl for lbl in (best_label, tuned.label, pick.label if pick else "", best_default_label)
                                    if lbl in by_label))
    again = head_to_head(tune, [by_label[lbl] for lbl in contenders], root / "head-to-head", a.rounds) if a.rounds else {}
    h2h_share = again.get(tuned.label, math.nan) / again.get(best_label, math.nan) if again else math.nan
    # "run AR" deploys AR: 1.0x by definition, against the grid's best as measured head to head
    advised_s = (again.get(pick.label, math.nan) if pick else 1.0) if again else math.nan
    advised_share = advised_s / again.get(best_label, math.nan) if again else math.nan

    def beats(speedup: float) -> str:  # the grid's one run is the max of many noisy ones: head to head says more
        return "not measured" if not math.isfinite(speedup) else "yes" if speedup >= GAIN else "no: run AR"

    lines = [f"workload {a.workload} at {a.clients} client(s), {len(tune.check.requests)} check-half requests,"
             f" space {len(tune.candidates)}",
             f"tune: {tune_s:.0f} s (search {result.search_s:.0f} + check {result.check_s:.0f}); grid: {grid_s:.0f} s"
             f" ({tune_s / grid_s:.0%} of the grid's time)",
             f"the check's runs: {noise_words(result)}",
             f"tuned {tuned.label}: {mine:.3f}x in the grid (its own check: {tuned.value:.3f}x)",
             f"grid's best {best_label}: {best.speedup:.3f}x; tuned at {share:.1%} of it",
             f"head to head ({a.rounds} rounds, alternating, medians): "
             + ", ".join(f"{lbl} {v:.3f}x" for lbl, v in again.items())
             + f"; tuned at {h2h_share:.1%} of the grid's best, advised at {advised_share:.1%}",
             f"best default: {best_default_label} {best_default:.3f}x in the grid; tuned {'BELOW' if mine < best_default else 'at or above'}"
             f" it there, head to head {again.get(tuned.label, math.nan) / again.get(best_default_label, math.nan):.1%} of it",
             f"grid's best beats AR by the margin ({GAIN:.2f}x): {beats(best.speedup)} in the grid,"
             f" {beats(again.get(best_label, math.nan))} head to head; the tune advised: {advice(result)}",
             "", f"{'setting':<44} {'speedup':>8}  95% CI       exactness"]
    for label, f in ranked:
        lo, hi = f.ci
        mark = " (tuned)" if label == tuned.label else " (default)" if f.default else ""
        lines.append(f"{label + mark:<44} {f.speedup:>7.3f}x  {lo:.2f}-{hi:.2f}    {f.exact}")
    print("\n".join(lines))
    if a.json:
        Path(a.json).write_text(json.dumps({
            "workload": a.workload, "clients": a.clients, "space": len(tune.candidates), "tune_s": tune_s, "grid_s": grid_s,
            "tuned": tuned.label, "tuned_in_grid": mine, "tuned_own_check": tuned.value, "grid_best": best_label,
            "grid_best_speedup": best.speedup, "share": share,
            "head_to_head": again, "head_to_head_share": h2h_share, "advised": pick.label if pick else "AR",
            "advised_share": advised_share, "best_default": best_default,
            "defaults": [{"setting": label, "speedup": s} for label, s in defaults if label in figures],
            "advice": advice(result), "grid": {label: asdict(f) for label, f in figures.items()}},
            indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
