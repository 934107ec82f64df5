"""What exactness costs: recording top-2 margins, and ``--deterministic``.

    python benchmarks/exactness_cost.py [--reps 7] [--target PATH] [--json FILE]

1. Margins: a greedy run records each emitted token's margin over its runner-up
   (``spectui.engine.loop.decode.top_two``). The same decode loop runs with and without it on one
   loaded engine, alternating which goes first, AR and speculative (n-gram, cost-aware K);
   the cost is the median of the per-round ratios of decode time. The budget is
   1% of decode time on the embedded model.
2. ``--deterministic`` (one thread, flash attention on, K priced by the seed alone) against
   the defaults (every core): decode tok/s of AR and of speculation under each, alternating,
   medians, and whether speculative output equals AR under each.

Greedy throughout. The first round is a warm-up and dropped. The machine is shared: read
medians and the spread.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from spectui.cli import build_parser
from spectui.cli.run_flags import config_from_args
from spectui.config import RunConfig
from spectui.engine.embedded import Engine
from spectui.engine.loop.decode import decode, top_two
from spectui.engine.loop.draft_length import DraftLength
from spectui.engine.loop.sampling import Sampler
from spectui.metrics.stats import summarize
from spectui.recording.schema import Step

PROMPTS = ("load-code-continuation", "medium-reasoning")


def config(prompt: str, mode: str, target: str, extra: list[str]) -> RunConfig:
    argv = ["run", "--mode", mode, "--prompt-name", prompt, *(["--target", target] if target else []), *extra]
    return config_from_args(build_parser().parse_args(argv))


def decode_seconds(engine: Engine, cfg: RunConfig, *, margins: bool) -> float:
    """Wall time of the decode loop after the prefill (the part margins could slow)."""
    _, tokens = engine.prepare_prompt(cfg)
    drafter = engine.make_drafter(cfg)
    events = decode(
        engine.target,
        tokens,
        sampler=Sampler(cfg.sampling),
        max_tokens=cfg.max_tokens,
        drafter=drafter,
        draft_length=DraftLength(cfg.draft.length) if drafter is not None else None,
        margins=margins,
    )
    next(events)  # the prefill
    t0 = time.perf_counter()
    n = sum(len(ev.tokens) for ev in events if type(ev) is Step)
    return (time.perf_counter() - t0) / max(n - 1, 1)


def margins_cost(engine: Engine, cfg: RunConfig, reps: int) -> dict:
    ratios = []
    for rep in range(reps + 1):
        order = (True, False) if rep % 2 else (False, True)
        t = {m: decode_seconds(engine, cfg, margins=m) for m in order}
        if rep:
            ratios.append(t[True] / t[False])
    return {"overhead_pct": 100 * (statistics.median(ratios) - 1), "min_pct": 100 * (min(ratios) - 1), "max_pct": 100 * (max(ratios) - 1)}


def top_two_us(engine: Engine, cfg: RunConfig, calls: int = 2000) -> float:
    """Microseconds of one ``top_two`` on a real row of logits: the margins' whole cost per
    emitted token, free of the scheduling noise a decode-time ratio carries."""
    _, tokens = engine.prepare_prompt(cfg)
    engine.target.truncate(0)
    row = engine.target.eval(tokens, all_logits=False)[-1].copy()
    best = int(row.argmax())
    t0 = time.perf_counter()
    for _ in range(calls):
        top_two(row, best)
    return (time.perf_counter() - t0) / calls * 1e6


def run(engine: Engine, cfg: RunConfig) -> tuple[float, list[int]]:
    events = list(engine.run(cfg, memory_interval_s=None))
    return summarize(events).decode_tok_s, [t for e in events if type(e) is Step for t in e.tokens]


def deterministic_cost(prompt: str, target: str, reps: int) -> dict:
    sides = {"default": [], "deterministic": ["--deterministic"]}
    cfgs = {(s, m): config(prompt, m, target, flags) for s, flags in sides.items() for m in ("ar", "spec")}
    engines = {s: Engine.load(cfgs[(s, "ar")]) for s in sides}
    rates: dict[tuple[str, str], list[float]] = {k: [] for k in cfgs}
    same = {s: True for s in sides}
    try:
        for rep in range(reps + 1):
            order = list(cfgs) if rep % 2 else list(reversed(cfgs))
            outs = {k: run(engines[k[0]], cfgs[k]) for k in order}
            for s in sides:
                same[s] &= outs[(s, "ar")][1] == outs[(s, "spec")][1]
            if rep:
                for k, (rate, _) in outs.items():
                    rates[k].append(rate)
    finally:
        for e in engines.values():
            e.close()
    med = {f"{s}_{m}_tok_s": statistics.median(v) for (s, m), v in rates.items()}
    return {**med, "identical": same, "spec_speedup": {s: med[f"{s}_spec_tok_s"] / med[f"{s}_ar_tok_s"] for s in sides}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--target", default="")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    out: dict = {"reps": args.reps, "margins": {}, "deterministic": {}}
    first = config(PROMPTS[0], "ar", args.target, [])
    with Engine.load(first) as engine:
        us = top_two_us(engine, first)
        ar_tok_s = run(engine, first)[0]
        out["top_two_us"], out["ar_tok_s"] = us, ar_tok_s
        print(f"margins  top_two {us:.1f} us per emitted token = {100 * us * 1e-6 * ar_tok_s:.2f}% of an AR token"
              f" ({1e3 / ar_tok_s:.2f} ms at {ar_tok_s:.1f} tok/s)", flush=True)
        for prompt in PROMPTS:
            for mode in ("ar", "spec"):
                row = margins_cost(engine, config(prompt, mode, args.target, []), args.reps)
                out["margins"][f"{prompt}/{mode}"] = row
                print(f"margins  {prompt:24} {mode:4}  {row['overhead_pct']:+.2f}% of decode time"
                      f" ({row['min_pct']:+.2f} .. {row['max_pct']:+.2f})", flush=True)
    for prompt in PROMPTS:
        row = deterministic_cost(prompt, args.target, args.reps)
        out["deterministic"][prompt] = row
        print(f"determ.  {prompt:24} default AR {row['default_ar_tok_s']:.1f} spec {row['default_spec_tok_s']:.1f} tok/s"
              f" (same: {row['identical']['default']}) | deterministic AR {row['deterministic_ar_tok_s']:.1f}"
              f" spec {row['deterministic_spec_tok_s']:.1f} tok/s (same: {row['identical']['deterministic']})", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
