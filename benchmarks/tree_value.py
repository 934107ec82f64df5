"""Would verifying a second candidate pay? The suffix drafter's runner-up against its rows' cost.

    python benchmarks/tree_value.py [--target GGUF] [--also-quant F16] [--tiers unseen,copy,repeated]

Tree verification (several continuations in one target evaluation) pays when the drafter's
second choice is often right where its first is wrong, and extra rows are nearly free. Both
are measured here, on AR's greedy output (fixed by greedy decoding, so no speculative run is
needed): the suffix drafter (its memory holding the previous answer on the repeated tier) is
replayed with the cost-aware K over the output, and at every block with a rejected token its
second most frequent continuation at that point is checked. A second branch there would have
kept that token and as much more as the history lets it copy (``longest_copies``), up to
the block's length.

``free branch`` is the replay's speedup if those rescued tokens cost nothing: more than any
tree can get. ``one row more`` charges each block one extra row, from the verify-cost curve
measured here: less than a real tree pays, which cannot know where the draft will fail and
must branch at every position it wants to cover. The issue's rule: build it
only if this shows it pays.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import quant
from defaults import config, prompt_files, run
from peers import verify_cost_curve

from spectui.drafting import CostAware, DraftConfig, Lookup
from spectui.engine.drafters.suffix import SuffixDrafter
from spectui.engine.embedded import Engine
from spectui.tune.ceiling import longest_copies
from spectui.tune.replay import replay

K_MAX = 16


def runner_up(drafter: SuffixDrafter, kept: list[int]) -> int | None:
    """The second most frequent token after the history's longest repeated context followed
    by ``kept`` (the drafted tokens the target accepted): where the draft went wrong."""
    index = drafter.index
    v, n = index.repeat()
    for t in kept:
        if not n:
            return None
        v, n = index.step(v, n, t) or (0, 0)
    if not n:
        return None
    ranked = sorted(index.continuations(v).items(), key=lambda kv: -kv[1])
    return ranked[1][0] if len(ranked) > 1 else None


def replay_with_branch(prompt: list[int], output: list[int], cost, seed) -> dict:
    """The cost-aware suffix replay (``tune.replay``), and what a second branch at the point
    where each block went wrong adds."""
    copies = longest_copies(prompt, output, K_MAX)
    extra = {"cost": 0.0, "rescued": 0, "missed": 0, "second_right": 0}

    def branch(drafter, i: int, draft: list[int], got: int) -> None:
        extra["cost"] += cost(len(draft) + 2) - cost(len(draft) + 1)
        if got < len(draft):  # a branch where it went wrong: the runner-up, then copying on
            extra["missed"] += 1
            if runner_up(drafter, draft[:got]) == output[i + got]:
                extra["second_right"] += 1
                extra["rescued"] += min(len(draft) - got, max(copies[i + got], 1))

    draft = DraftConfig(drafter=Lookup(name="suffix", memory=False), length=CostAware(k_max=K_MAX))
    r = replay(prompt, output, cost, draft, on_block=branch, seed=seed)
    return {
        "blocks": r.blocks, "missed": extra["missed"], "second_right": extra["second_right"],
        "single": r.speedup, "free_branch": (r.tokens + extra["rescued"]) / r.cost,
        "one_row_more": (r.tokens + extra["rescued"]) / (r.cost + extra["cost"]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default=None)
    ap.add_argument("--also-quant", default="F16")
    ap.add_argument("--tiers", default="unseen,copy,repeated")
    args = ap.parse_args()
    prompts = prompt_files(args.tiers.split(","))
    for weights in quant.weight_formats(args.target, args.also_quant, log=lambda m: print(m, file=sys.stderr)):
        rows = []
        with Engine.load(config(prompts[0][2], "ar", weights.path, [])) as engine:
            _, first = engine.prepare_prompt(config(prompts[0][2], "ar", weights.path, []))
            _, curve = verify_cost_curve(engine, first, range(1, K_MAX + 3), reps=7)
            seed = tuple(curve[n] for n in range(1, K_MAX + 2))
            for name, tier, path in prompts:
                cfg = config(path, "ar", weights.path, [])
                _, prompt = engine.prepare_prompt(cfg)
                *_, output = run(engine, cfg)
                history = prompt + output if tier == "repeated" else prompt  # memory: the previous answer
                r = replay_with_branch(history, output, curve.__getitem__, seed)
                rows.append(r)
                print(f"{weights.quant:5} {name:28} blocks {r['blocks']:3}  rejected {r['missed']:3}  "
                      f"runner-up right {r['second_right']:2}  single x{r['single']:.2f}  free branch x{r['free_branch']:.2f}  "
                      f"one row more x{r['one_row_more']:.2f}", flush=True)
        missed = sum(r["missed"] for r in rows)
        right = sum(r["second_right"] for r in rows)
        print(f"{weights.quant:5} curve n=2 {curve[2]:.2f}, n=9 {curve[9]:.2f}; runner-up right in {right} of {missed} missed "
              f"drafted tokens; median single x{statistics.median(r['single'] for r in rows):.2f}, free branch "
              f"x{statistics.median(r['free_branch'] for r in rows):.2f}, one row more "
              f"x{statistics.median(r['one_row_more'] for r in rows):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
