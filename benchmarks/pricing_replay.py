"""Proposal pricing, replayed: the category benchmark's speculative runs predicted in seconds.

    python benchmarks/pricing_replay.py --record [--model embedded|qwen-1.5b] [--set categories|held-out] [--max-tokens 64]
    python benchmarks/pricing_replay.py [--model embedded|qwen-1.5b] [--set ...] [--categories copy,qa] [--deterministic] [--measured FILE.json]
                                        [--curve COSTS.json] [--passes N] [--jitter N] [--traces FILE.json]

Under greedy decoding the target's output does not depend on drafting, so one AR run per
prompt fixes every block the n-gram drafter and the cost-aware K would draft and how much of
each would be accepted (``spectui.tune.replay``). ``--record`` runs the target once per
prompt (``--set``: the category benchmark's, or a held-out set) and keeps each prompt's tokens,
its greedy output, each output token's margin over its runner-up (not read by the replay: the
target's confidence was tried as a signal and did not separate hits from misses) and this
host's verify-cost curves (the run's thread count, and one thread for
``--deterministic``) in ``benchmarks/results/pricing-traces-<model>.json``. Without it, the
recorded traces are replayed in the category benchmark's order (a warm-up run, then five
speculative runs a prompt), the stored calibration carried from run to run as
``engine/host/proposal_prices`` carries it (starting empty: the static prior), and each
prompt's predicted speedup is the median of its five runs'. ``--deterministic`` replays as
that flag runs: the static prior, the one-thread curve, nothing stored.

``--traces`` replays another recording: ``pricing-traces-embedded.json`` holds the Q8_0 copy the
earlier category runs ran; ``pricing-traces-embedded-q4_1.json`` the shipped Q4_1 (recorded with
``SPECTUI_EMBEDDED_WEIGHTS=shipped``, 2026-11-28), whose steeper curve caps what copies repay.

``--curve`` prices by another verify-cost curve (a JSON list, n = 1, 2, ...): kernels cost
differently by host, and the recorded one may not be this host's (the 1.5B's recorded curve
has n = 8 at 5.04 one-token costs; measured here with ``measure_curve``, 5 rounds, it is 6.68,
where the kernels change their batching:
``results/verify-cost-qwen-1.5b-2026-11-27.json``, two such curves averaged). ``--passes`` replays the benchmark several times in a
row, the stored calibration carried over, as a real run starts from what earlier runs stored.

The replay is chaotic: one marginal block decided the other way changes the stored calibration
every later prompt starts from, so a change that is neutral on average moves single prompts by
up to 0.08. ``--jitter N`` replays the benchmark N times, each with the verify-cost curve moved
by up to ``JITTER`` per block size (seeded, so reruns agree), and prints each category's median
and worst averaged over them: a pricing change is read there, not on one replay.

What it does not see: the machine's noise, a run's own per-step overhead, and the measured
costs moving within a run. It is for reading what a pricing change does to every prompt at
once before the half hour the real benchmark takes (``benchmarks/categories.py``), not for
the must-show: ``--measured`` prints a measured run's ratios beside the predicted ones.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from categories import CATEGORIES, PROMPTS, RESULTS, resolve_target
from defaults import config, outcome

from spectui.engine.host.proposal_prices import merge
from spectui.engine.loop.draft_length import VerifyCost
from spectui.engine.loop.length import LengthPolicy
from spectui.metrics.predict import seeded_cost
from spectui.prompts import list_prompts
from spectui.recording.schema import Step
from spectui.tune.ceiling import copy_ceiling
from spectui.tune.replay import replay

#: speculative runs a prompt in the category benchmark (after one warm-up run on the first)
REPS = 5


#: the prompt sets: the category benchmark's, and a held-out one (the project's own prompts
#: and ``benchmarks/unseen``) that a pricing change is checked on before the categories are
SETS = {"categories": (PROMPTS,), "held-out": (PROMPTS.parent, Path(__file__).resolve().parent / "unseen")}


def traces_path(model: str, prompt_set: str = "categories") -> Path:
    return RESULTS / f"pricing-traces-{model}{'' if prompt_set == 'categories' else '-' + prompt_set}.json"


def set_prompts(prompt_set: str) -> list:
    prompts = [p for folder in SETS[prompt_set] for p in list_prompts(folder)]
    order = list(CATEGORIES)
    return sorted(prompts, key=lambda p: (order.index(p.tier) if p.tier in order else len(order), p.name))


def record(model: str, max_tokens: int, prompt_set: str) -> int:
    """Run AR once per prompt of ``prompt_set`` and keep what the replay needs."""
    from spectui.engine.embedded import Engine

    prompts = set_prompts(prompt_set)
    target, name = resolve_target(model)
    flags = ["--max-tokens", str(max_tokens)]
    first = config(prompts[0].path, "spec", target, flags)
    curves: dict[str, list[float]] = {}
    traces: dict[str, list[dict]] = {}
    eog: list[int] = []
    for mode, extra in (("default", flags), ("deterministic", [*flags, "--deterministic"])):
        # --deterministic runs other weights (the shipped file) on one thread: its own outputs
        probe = config(prompts[0].path, "spec", target, extra)
        with Engine.load(probe) as engine:
            # the curve the benchmark's runs start from, measured where the cache falls short
            curves[mode] = list(engine.cost_curve(measure=True, n_max=probe.draft.k_range[1] + 1,
                                                  context=engine.prepare_prompt(probe)[1]))
            traces[mode] = []
            eog = sorted(engine.target.eog_tokens)
            for p in prompts:
                cfg = config(p.path, "ar", target, extra)
                events = list(engine.run(cfg, memory_interval_s=None))
                output = outcome(events)[3]
                # each emitted token's margin over its runner-up (thousandths of a logit)
                margins = [m for e in events if type(e) is Step for m in (e.margins_milli or [])]
                traces[mode].append({"prompt": p.name, "category": p.tier, "tokens": engine.prepare_prompt(cfg)[1],
                                     "output": output, "margins": margins})
                print(f"{mode:13} {p.name:14} {len(output)} tokens", file=sys.stderr)
    path = traces_path(name, prompt_set)
    path.write_text(json.dumps({"model": name, "spec": first.describe(), "max_tokens": max_tokens,
                                "eog": eog, "curves": curves, "traces": traces}))
    print(f"wrote {path}", file=sys.stderr)
    return 0


def predict(data: dict, *, deterministic: bool, categories: list[str] | None = None,
            curve: list[float] | None = None, passes: int = 1,
            length: Callable[[Sequence[float], dict], LengthPolicy] | None = None) -> list[dict]:
    """Each prompt's predicted speedups over the benchmark's runs, in its order; ``curve``:
    relative verify costs to price by instead of the recorded ones; ``passes``: the benchmark
    run this many times in a row, the stored calibration carried over (a real run starts from
    what earlier runs of the model stored), the last one reported; ``length``: a draft length
    under study, made per prompt from the curve and the trace (None: the defaults' own)."""
    mode = "deterministic" if deterministic else "default"
    curve = curve or data["curves"][mode]
    flags = ["--max-tokens", str(data["max_tokens"]), *(["--deterministic"] if deterministic else [])]
    # only the categories a benchmark ran, in its order: what the stored calibration carries
    traces = [t for t in data["traces"][mode] if categories is None or t["category"] in categories]
    # the defaults' draft settings (any prompt file: the prompt does not enter them)
    draft = config(str(PROMPTS / "copy-1.txt"), "spec", "", flags).draft
    stored: dict[str, tuple[float, float]] = {}
    rows = []
    eog = frozenset(data["eog"])

    def one(trace: dict) -> float:
        nonlocal stored
        cost = VerifyCost(draft.k_range[1], curve)
        r = replay(trace["tokens"], trace["output"], cost, draft, data["max_tokens"], prices=None if deterministic else stored,
                   eog=eog, seed=curve, length=length(curve, trace) if length is not None else None)
        if not deterministic:
            stored = merge(stored, r.counts)
        return r.speedup if r.cost else 1.0

    for _ in range(passes):
        rows = []
        one(traces[0])  # the benchmark's warm-up round
        for trace in traces:
            speedups = [one(trace) for _ in range(REPS)]
            # what a drafter that knew which earlier text to copy and where each copy ends would
            # reach on this output and curve (``spectui tune``'s "copying at best")
            ceiling = copy_ceiling(trace["tokens"], trace["output"], seeded_cost(curve), draft.k_range[1])
            rows.append({"prompt": trace["prompt"], "category": trace["category"], "ratio": statistics.median(speedups),
                         "first": speedups[0], "ceiling": ceiling})
    return rows


#: how far ``--jitter`` moves each block size's cost, either way
JITTER = 0.06


def jittered(data: dict, *, deterministic: bool, categories: list[str] | None, curve: list[float] | None,
             rounds: int) -> tuple[dict[str, tuple[float, float]], float]:
    """``predict`` over ``rounds`` jittered copies of the curve: per category, its median and
    worst prompt averaged over them; and the mean over every prompt and round."""
    base = curve or data["curves"]["deterministic" if deterministic else "default"]
    per: dict[str, list[tuple[float, float]]] = {}
    means = []
    for seed in range(rounds):
        rng = random.Random(seed)
        moved = [base[0], *(c * (1 + rng.uniform(-JITTER, JITTER)) for c in base[1:])]
        rows = predict(data, deterministic=deterministic, categories=categories, curve=moved)
        for c in dict.fromkeys(r["category"] for r in rows):
            ratios = [r["ratio"] for r in rows if r["category"] == c]
            per.setdefault(c, []).append((statistics.median(ratios), min(ratios)))
        means.append(statistics.mean(r["ratio"] for r in rows))
    summary = {c: (statistics.mean(m for m, _ in v), statistics.mean(w for _, w in v)) for c, v in per.items()}
    return summary, statistics.mean(means)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="embedded", help="embedded (default) or qwen-1.5b")
    ap.add_argument("--set", default="categories", choices=SETS, help="the category benchmark's prompts, or the held-out ones")
    ap.add_argument("--record", action="store_true", help="run the target once per prompt and keep the traces")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--deterministic", action="store_true", help="replay as --deterministic runs")
    ap.add_argument("--categories", default="", help="comma-separated: replay only these, as categories.py --categories runs them")
    ap.add_argument("--measured", type=Path, help="a categories.py result (.json) to print beside the prediction")
    ap.add_argument("--passes", type=int, default=1,
                    help="replay the benchmark this many times, the stored calibration carried over; report the last")
    ap.add_argument("--curve", type=Path,
                    help="a JSON list of relative verify costs (n = 1, 2, ...) to price by instead of the recorded curve")
    ap.add_argument("--traces", type=Path,
                    help="replay these recorded traces instead of --model's (e.g. results/pricing-traces-embedded-q4_1.json)")
    ap.add_argument("--jitter", type=int, default=0, metavar="N",
                    help="replay N times over jittered cost curves; print the categories' medians averaged")
    args = ap.parse_args()
    if args.record:
        return record(args.model, args.max_tokens, args.set)
    path = args.traces or traces_path(args.model, args.set)
    if not path.is_file():
        print(f"error: no traces at {path}" + ("" if args.traces else ": run with --record first"), file=sys.stderr)
        return 2
    data = json.loads(path.read_text())
    wanted = [c.strip() for c in args.categories.split(",") if c.strip()] or None
    curve = None
    if args.curve is not None:
        try:
            curve = [float(c) for c in json.loads(args.curve.read_text())]
        except (OSError, ValueError, TypeError) as e:
            print(f"error: --curve {args.curve}: not a JSON list of numbers ({e})", file=sys.stderr)
            return 2
    if args.jitter > 0:
        summary, mean = jittered(data, deterministic=args.deterministic, categories=wanted, curve=curve, rounds=args.jitter)
        for c, (median, worst) in summary.items():
            print(f"{CATEGORIES.get(c, c):22} x{median:.3f}  worst x{worst:.2f}  (averaged over {args.jitter} jittered curves)")
        print(f"{'all prompts':22} x{mean:.3f}")
        return 0
    rows = predict(data, deterministic=args.deterministic, categories=wanted, curve=curve, passes=max(args.passes, 1))
    measured = {}
    if args.measured is not None:
        measured = {r["prompt"]: r["ratio"] for r in json.loads(args.measured.read_text())["rows"]}
    for r in rows:
        seen = measured.get(r["prompt"])
        print(f"{r['prompt']:14} {r['category']:10} predicted x{r['ratio']:.2f} (first run x{r['first']:.2f})"
              + (f"  measured x{seen:.2f}" if seen is not None else ""))
    print()
    for c in dict.fromkeys(r["category"] for r in rows):
        words = CATEGORIES.get(c, c)
        mine = [r for r in rows if r["category"] == c]
        if mine:
            ratio, ceiling = statistics.median(r["ratio"] for r in mine), statistics.median(r["ceiling"] for r in mine)
            line = (f"{words:22} x{ratio:.2f}  worst x{min(r['ratio'] for r in mine):.2f}  copying at best x{ceiling:.2f}"
                    f" ({ratio / ceiling:.0%} of it)")
            seen = [measured[r["prompt"]] for r in mine if r["prompt"] in measured]
            print(line + (f"  measured x{statistics.median(seen):.2f}" if seen else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
