"""Do spectui's defaults pay? ``spectui run --mode spec`` with no other flag against AR.

    python benchmarks/defaults.py [--reps 5] [--target PATH] [--tiers unseen,short,medium] [--json FILE]

The speculative side is exactly what a user gets from ``spectui run --mode spec`` (the flags
parsed by spectui's own parser, nothing else given), the AR side the same with ``--mode ar``.
Prompts: the copy-heavy ones in ``benchmarks/unseen/`` (typo fixing, a code rename, grammar
polish, which neither the defaults nor ``spectui tune`` were tuned on) and the ``short`` and
``medium`` tiers of ``prompts/`` (free-form text, where speculation must not cost speed).

Per prompt, AR and speculative runs alternate on one loaded engine; the first round is a
warm-up and dropped; the ratio is the median of the per-round ratios (decode tok/s, prefill
excluded). Greedy, so the speculative output must equal AR's token for token: every round is
checked: past about 256 tokens of context llama.cpp's CPU kernels are not batch-invariant
with several threads (docs/internals/exactness.md), so an output may part from AR at a near-tie there; the
row then says where. The machine is shared: read medians, rerun a prompt whose spread is wide.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from spectui.cli import build_parser
from spectui.cli.run_flags import config_from_args
from spectui.engine.embedded import Engine
from spectui.metrics.stats import summarize
from spectui.prompts import list_prompts
from spectui.recording.schema import Step

UNSEEN = Path(__file__).parent / "unseen"


def prompt_files(tiers: list[str]) -> list[tuple[str, str, str]]:
    """(name, tier, path) of every prompt the tiers name."""
    out = []
    if "unseen" in tiers:
        out += [(p.stem, "unseen copy", str(p)) for p in sorted(UNSEEN.glob("*.txt"))]
    out += [(s.name, s.tier, s.path) for s in list_prompts() if s.tier in tiers]
    return out


def config(path: str, mode: str, target: str, extra: list[str]):
    args = build_parser().parse_args(["run", "--mode", mode, "--prompt-file", path, *(["--target", target] if target else []), *extra])
    return config_from_args(args)


def run(engine: Engine, cfg) -> tuple[float, float, float, list[int]]:
    """(decode tok/s, acceptance, mean K drafted, output tokens) of one run."""
    return outcome(list(engine.run(cfg, memory_interval_s=None)))


def outcome(events: list) -> tuple[float, float, float, list[int]]:
    s = summarize(events)
    steps = [e for e in events if type(e) is Step]
    drafted = [e.drafted for e in steps[1:] if e.drafted]
    return s.decode_tok_s, s.acceptance_rate, statistics.mean(drafted) if drafted else 0.0, [t for e in steps for t in e.tokens]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--target", default="")
    ap.add_argument("--tiers", default="unseen,short,medium")
    ap.add_argument("--spec-flags", default="", help="extra flags for the speculative side (default: none, the point)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    prompts = prompt_files(args.tiers.split(","))
    extra = args.spec_flags.split()
    first = config(prompts[0][2], "spec", args.target, extra)
    print(f"spec defaults: {first.describe()}", file=sys.stderr)
    rows = []
    with Engine.load(first) as engine:
        t = engine.header(first, "", [0]).artifacts.target
        print(f"target: {t.path} ({t.quant}){'; ' + t.origin if t.origin else ''}", file=sys.stderr)
        seeded = engine.cost_curve()
        print(f"cost seed from the cache: {'none' if not seeded else ' '.join(f'{c:.2f}' for c in seeded)}", file=sys.stderr)
        for name, tier, path in prompts:
            ar_cfg, spec_cfg = config(path, "ar", args.target, []), config(path, "spec", args.target, extra)
            ratios, ar_rates, spec_rates, accept, ks, parted = [], [], [], [], [], None
            for rep in range(args.reps + 1):
                # alternate which side goes first: a drift in the machine's speed cancels
                if rep % 2:
                    ar = run(engine, ar_cfg)
                    spec = run(engine, spec_cfg)
                else:
                    spec = run(engine, spec_cfg)
                    ar = run(engine, ar_cfg)
                if ar[3] != spec[3] and parted is None:
                    parted = next((i for i, (a, b) in enumerate(zip(ar[3], spec[3])) if a != b), min(len(ar[3]), len(spec[3])))
                if rep == 0:
                    continue  # warm-up round
                ar_rates.append(ar[0])
                spec_rates.append(spec[0])
                ratios.append(spec[0] / ar[0])
                accept.append(spec[1])
                ks.append(spec[2])
            row = {
                "prompt": name, "tier": tier, "ar_tok_s": statistics.median(ar_rates),
                "spec_tok_s": statistics.median(spec_rates), "ratio": statistics.median(ratios),
                "ratio_min": min(ratios), "ratio_max": max(ratios), "acceptance": statistics.median(accept),
                "mean_k": statistics.median(ks), "identical": parted is None, "parts_at": parted, "tokens": len(ar[3]),
            }
            rows.append(row)
            print(f"{name:28} {tier:12} AR {row['ar_tok_s']:6.1f}  spec {row['spec_tok_s']:6.1f}  "
                  f"x{row['ratio']:.2f} ({row['ratio_min']:.2f}-{row['ratio_max']:.2f})  accept {row['acceptance']:.2f}  "
                  f"K {row['mean_k']:.1f}  {row['tokens']} tok  {'same' if parted is None else f'parts at token {parted}'}",
                  flush=True)
    unseen = [r["ratio"] for r in rows if r["tier"] == "unseen copy"]
    if unseen:
        print(f"unseen copy prompts: median x{statistics.median(unseen):.2f} AR")
    free = [r for r in rows if r["tier"] in ("short", "medium")]
    if free:
        worst = min(free, key=lambda r: r["ratio"])
        print(f"short/medium tiers: worst x{worst['ratio']:.2f} AR ({worst['prompt']})")
    if args.json:
        Path(args.json).write_text(json.dumps({"defaults": first.describe(), "target": {"path": t.path, "quant": t.quant, "origin": t.origin},
                                               "reps": args.reps, "rows": rows}, indent=1))
    return 0 if all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
