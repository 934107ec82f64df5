"""How far can speculation go on this machine? A perfect drafter against spectui's drafters.

    python benchmarks/ceiling.py [--reps 5] [--target GGUF] [--also-quant F16,Q4_0]
                                 [--tiers unseen,repeated] [--json FILE]

The *oracle* drafter knows the answer: it proposes AR's own greedy output, so every draft is
accepted (until a near-tie parts the runs, after which it proposes nothing). Run through
spectui's decode loop at the fixed K whose block costs least per row on the curve measured in
the same run, it measures the most any drafter could give on this
prompt, these weights and this CPU: what is left after that is the cost of verifying a
block. Beside it, in the same alternating rounds: AR, ``spectui run --mode spec`` with no
other flag (the default: n-gram, cost-aware K), and the suffix drafter (with its memory of
earlier answers on the repeated tier, seeded by the warm-up round, as in ``peers.py``).

``curve says`` is the oracle's speedup from the verify-cost curve alone
(``spectui.tune.ceiling.perfect_ceiling``): when it and the measured oracle agree, the curve
is the whole story and no drafting policy can beat it. ``copy ceiling`` is the best a
*copying* drafter (prompt lookup, the suffix drafter) could do (``copy_ceiling``): every draft
copies the longest earlier run (from the prompt, the output so far, and on the repeated tier
the previous answer) and stops exactly where the copy does. Real drafters do not know where a
copy stops; they sit below it. ``spectui tune`` shows the same two ceilings per tier.

Prompts: ``benchmarks/unseen/`` (copy-heavy, unseen by tune and the defaults) and the
``repeated`` tier of ``prompts/``. Ratios are per round (each against the AR run of its own
round), medians after one dropped warm-up round; weight formats are compared by ratios only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import quant
from defaults import config, outcome, prompt_files, run
from peers import verify_cost_curve

from spectui.drafting import Fixed
from spectui.engine.drafters.suffix_memory import SuffixMemory
from spectui.engine.embedded import Engine
from spectui.engine.loop.decode import decode
from spectui.engine.loop.draft_length import DraftLength
from spectui.engine.loop.sampling import Sampler
from spectui.engine.protocol import Draft
from spectui.tune.ceiling import copy_ceiling, perfect_ceiling

#: the longest block the oracle may draft (spectui's K ceiling)
ORACLE_K = 16


class OracleDrafter:
    """Proposes the continuation of a known output (AR's, for the same prompt): a drafter no
    real one can beat. Once the run's own tokens leave that output it proposes nothing."""

    name = "oracle"
    free = True

    def __init__(self, answer: Sequence[int]) -> None:
        self.answer = list(answer)
        self.start = 0

    def reset(self, prompt: Sequence[int]) -> None:
        self.start = len(prompt)

    def propose(self, history: Sequence[int], k: int) -> Draft:
        done = len(history) - self.start
        if list(history[self.start:]) != self.answer[:done]:
            return Draft([])
        return Draft(self.answer[done:done + k], match=4)

    def close(self) -> None:
        pass


def prompt_tokens(engine: Engine, cfg) -> list[int]:
    return engine.prepare_prompt(cfg)[1]


def best_block(curve: dict[int, float]) -> int:
    """The K whose block of K + 1 rows costs least per row on ``curve`` (all kept)."""
    return max(range(1, ORACLE_K + 1), key=lambda k: (k + 1) / curve[k + 1])


def run_oracle(engine: Engine, cfg, answer: list[int], k: int) -> tuple[float, float, float, list[int]]:
    """Like ``defaults.run``, with the oracle drafting at a fixed ``k`` in spectui's loop."""
    prompt = prompt_tokens(engine, cfg)
    return outcome(list(decode(engine.target, prompt, sampler=Sampler(cfg.sampling), max_tokens=cfg.max_tokens,
                               drafter=OracleDrafter(answer), draft_length=DraftLength(Fixed(k=k)))))


def bench_weights(weights: quant.Weights, prompts: list[tuple[str, str, str]], reps: int, tmp: str) -> list[dict]:
    rows = []
    first = config(prompts[0][2], "spec", weights.path, [])
    with Engine.load(first) as engine:
        _, ptokens = engine.prepare_prompt(first)
        one_ms, curve = verify_cost_curve(engine, ptokens, range(1, ORACLE_K + 2), reps=max(5, 2 * reps))
        oracle_k = best_block(curve)
        print(f"[{weights.quant}] one token {one_ms:.1f} ms; curve " +
              " ".join(f"{n}:{curve[n]:.2f}" for n in (2, 4, 8, 12, 17)) + f"; the oracle drafts K={oracle_k}", file=sys.stderr)
        vocab = engine.target.artifacts().vocab_sha256 or engine.target.artifacts().sha256
        for name, tier, path in prompts:
            repeated = tier == "repeated"
            engine._suffix_memory = SuffixMemory(vocab, path=Path(tmp) / f"{weights.quant}-{name}.msgpack")
            ar_cfg = config(path, "ar", weights.path, [])
            default_cfg = config(path, "spec", weights.path, [])
            suffix_cfg = config(path, "spec", weights.path, ["--draft", "suffix", *([] if repeated else ["--no-draft-memory"])])
            ratios: dict[str, list[float]] = {"oracle": [], "default": [], "suffix": []}
            accept: dict[str, list[float]] = {"default": [], "suffix": []}
            ar_rates: list[float] = []
            parted: dict[str, int | None] = {}
            answer: list[int] = []
            for rep in range(reps + 1):
                ar_rate, _, _, answer = run(engine, ar_cfg)
                sides = {
                    "oracle": lambda: run_oracle(engine, ar_cfg, answer, oracle_k),  # noqa: B023 - called in this iteration
                    "default": lambda: run(engine, default_cfg),  # noqa: B023 - called in this iteration
                    "suffix": lambda: run(engine, suffix_cfg),  # noqa: B023 - called in this iteration
                }
                order = list(sides) if rep % 2 else list(reversed(sides))  # drift cancels
                for side in order:
                    rate, acc, _, tokens = sides[side]()
                    if tokens != answer and side not in parted:
                        parted[side] = next((i for i, (a, b) in enumerate(zip(tokens, answer)) if a != b), len(tokens))
                    if rep:
                        ratios[side].append(rate / ar_rate)
                        if side in accept:
                            accept[side].append(acc)
                if rep:
                    ar_rates.append(ar_rate)
            # what a copying drafter could reach: the prompt, and on the repeated tier the
            # answer it saw in the warm-up round too (the suffix drafter's memory)
            copy_from = prompt_tokens(engine, ar_cfg) + (answer if repeated else [])
            row = {
                "weights": weights.quant, "prompt": name, "tier": tier, "tokens": len(answer), "oracle_k": oracle_k,
                "curve": curve,
                "ar_tok_s": statistics.median(ar_rates),
                "predicted_oracle": perfect_ceiling(len(answer), curve.__getitem__, ORACLE_K),
                "copy_ceiling": copy_ceiling(copy_from, answer, curve.__getitem__, ORACLE_K),
                **{f"{s}_x": statistics.median(v) for s, v in ratios.items()},
                **{f"{s}_spread": [min(v), max(v)] for s, v in ratios.items()},
                **{f"{s}_acceptance": statistics.median(v) for s, v in accept.items()},
                "parted": parted,
            }
            rows.append(row)
            print(f"{weights.quant:6} {name:28} {tier:9} {len(answer):4} tok  AR {row['ar_tok_s']:6.1f} tok/s  "
                  f"oracle x{row['oracle_x']:.2f} (curve says x{row['predicted_oracle']:.2f})  copy ceiling x{row['copy_ceiling']:.2f}  "
                  f"default x{row['default_x']:.2f}  suffix{' +memory' if repeated else ''} x{row['suffix_x']:.2f}"
                  + (f"  parted: {parted}" if parted else ""), flush=True)
        engine._suffix_memory = None
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--target", default=None)
    ap.add_argument("--also-quant", default="", help="requantized copies to measure too (F16,Q4_0,...)")
    ap.add_argument("--tiers", default="unseen,repeated")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    prompts = prompt_files(args.tiers.split(","))
    tmp = tempfile.mkdtemp(prefix="spectui-ceiling-")
    rows = []
    t0 = time.perf_counter()
    for weights in quant.weight_formats(args.target, args.also_quant, log=lambda m: print(m, file=sys.stderr)):
        rows += bench_weights(weights, prompts, args.reps, tmp)
    print(f"\nmedians of {args.reps} alternating rounds, {time.perf_counter() - t0:.0f} s; x = decode speed against AR in the same round")
    for fmt in dict.fromkeys(r["weights"] for r in rows):
        mine = [r for r in rows if r["weights"] == fmt]
        for tier in dict.fromkeys(r["tier"] for r in mine):
            tr = [r for r in mine if r["tier"] == tier]
            print(f"{fmt:6} {tier:12} median: oracle x{statistics.median(r['oracle_x'] for r in tr):.2f}  "
                  f"copy ceiling x{statistics.median(r['copy_ceiling'] for r in tr):.2f}  "
                  f"default x{statistics.median(r['default_x'] for r in tr):.2f}  "
                  f"suffix x{statistics.median(r['suffix_x'] for r in tr):.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"reps": args.reps, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
