"""A conversation's follow-up with the KV cache kept vs the same turn from an empty cache.

    python benchmarks/chat_prefix_reuse.py [--reps 7] [--target PATH] [--json FILE] [spectui run flags]

Each conversation is two turns (a first message, then a follow-up). Per round: turn 1 then
turn 2 of the conversation (turn 2 keeps turn 1's cache, ``Prefill.n_cached``), and the same
turn 2 as a single run (``conversation=""``: the whole prompt evaluated). The order of the two
alternates from round to round; the first round is a warm-up and dropped. Reported: TTFT of
turn 2 both ways (medians and spread), the ratio, the prompt tokens each evaluated, and the
turn's acceptance (speculative, the cost-aware n-gram K by default).

The machine is shared: read medians and the spread.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import msgspec

from spectui.cli import build_parser
from spectui.cli.run_flags import config_from_args
from spectui.config import RunConfig
from spectui.engine.embedded import Engine
from spectui.metrics.stats import summarize
from spectui.sessions.conversation import Conversation

ROOT = Path(__file__).resolve().parents[1]

CONVERSATIONS = {
    "code, then repeat it": (
        "Write a Python function that returns the squares of a list of numbers.",
        "Repeat the function you just wrote exactly, word for word.",
    ),
    "pasted file, then a question": (
        "Here is a file:\n\n" + (ROOT / "spectui" / "engine" / "decode.py").read_text()[:6000] + "\n\nWhat does it do?",
        "Which function in it would you test first, and why?",
    ),
}


def run(engine: Engine, config: RunConfig) -> dict:
    events = list(engine.run(config, memory_interval_s=None))
    s = summarize(events)
    return {"ttft_ms": s.ttft_ms, "evaluated": s.n_prompt_tokens - s.n_cached_tokens, "prompt": s.n_prompt_tokens,
            "acceptance": s.acceptance_rate, "reply": events}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", default=None)
    args, rest = ap.parse_known_args()
    base = config_from_args(build_parser().parse_args(["run", "--max-tokens", "64", *rest]))
    out = {}
    with Engine.load(base) as engine:
        for name, (first, follow_up) in CONVERSATIONS.items():
            # the follow-up's conversation: turn 1 and its (greedy, so fixed) reply
            probe = Conversation(id="probe")
            t1 = probe.next_config(base, first)
            probe.add(t1, run(engine, msgspec.structs.replace(t1, conversation=""))["reply"])
            single = msgspec.structs.replace(probe.next_config(base, follow_up), conversation="")
            warm, cold = [], []
            for r in range(args.reps + 1):
                for which in ("warm", "cold") if r % 2 == 0 else ("cold", "warm"):
                    if which == "warm":  # turn 1 builds the cache, turn 2 keeps it
                        conv = Conversation(id=f"bench-{r}")
                        t1 = conv.next_config(base, first)
                        conv.add(t1, run(engine, t1)["reply"])
                        result = run(engine, conv.next_config(base, follow_up))
                    else:
                        result = run(engine, single)
                    if r:  # round 0 warms up
                        (warm if which == "warm" else cold).append(result)
            w = statistics.median(x["ttft_ms"] for x in warm)
            c = statistics.median(x["ttft_ms"] for x in cold)
            out[name] = {
                "warm_ttft_ms": w, "cold_ttft_ms": c, "ratio": c / w,
                "warm_spread": [min(x["ttft_ms"] for x in warm), max(x["ttft_ms"] for x in warm)],
                "cold_spread": [min(x["ttft_ms"] for x in cold), max(x["ttft_ms"] for x in cold)],
                "warm_evaluated": warm[0]["evaluated"], "cold_evaluated": cold[0]["evaluated"], "prompt": cold[0]["prompt"],
                "turn2_acceptance": statistics.median(x["acceptance"] for x in warm),
            }
            o = out[name]
            print(
                f"{name}: turn 2 TTFT {w:.1f} ms with the cache kept ({o['warm_evaluated']} of {o['prompt']} prompt tokens evaluated)"
                f" vs {c:.1f} ms from empty ({o['cold_evaluated']}): {o['ratio']:.1f}x;"
                f" spread {o['warm_spread'][0]:.1f}-{o['warm_spread'][1]:.1f} / {o['cold_spread'][0]:.1f}-{o['cold_spread'][1]:.1f} ms;"
                f" turn 2 acceptance {o['turn2_acceptance']:.3f}",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
