"""What a speculative step costs beyond the target's evaluation: proposing, pricing, learning.

    python benchmarks/step_overhead.py [--model embedded|qwen-1.5b] [--rounds 5] [--learned]

Where nothing pays, the cost-aware K holds every proposal back and the run decodes as AR,
but each step still asks the n-gram drafter for a proposal (``NgramDrafter.propose``), prices
it (``DraftLength.k_for``) and follows it on the emitted tokens (``DraftLength.update``). On a
fast target that is what "do no harm" loses. Measured in the engine on the embedded model
(``Step.draft_us`` and a timer around ``update``, ``qa-1``, where every proposal is held back;
three runs each): 83-105 + 58-78 us a step against an 11-14 ms token before the cost table
(``VerifyCost.table``) and the n-gram index in lists, 70-78 + 47-52 us after (about 1.1% of a
token). This script on the same host: 48-52 us a step before, 38-41 after.

This replays the category benchmark's recorded greedy outputs
(``results/pricing-traces-<model>.json``, ``pricing_replay.py --record``) through the loop's
own step (``loop.propose.propose_step``, then the draft length's ``observe``), the one a run
and tune's replays call, with each step's verify timing taken from the recorded curve and
jittered by up to 10% (a real run's timings move, and the cost table is rebuilt when a size's
median does), and prints the median over ``--rounds`` rounds of the microseconds a step
spends in them. No model is loaded: it is the Python around the target, alone.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time

import msgspec
from categories import PROMPTS
from defaults import config
from pricing_replay import traces_path

from spectui.drafting import CostAware, Pricing
from spectui.engine.loop.length import Outcome
from spectui.engine.loop.length_choice import length_policy
from spectui.engine.loop.propose import propose_step
from spectui.tune.replay import common_prefix, lookup_drafter

#: a step's verify time, before its jitter: the embedded model's one-token step on a 2-core CPU
UNIT_US = 11_000.0


def one_run(trace: dict, draft, curve: list[float], budget: int, rng: random.Random,  # noqa: ANN001 - a DraftConfig
            eog: frozenset[int]) -> tuple[int, int]:
    """(nanoseconds spent proposing, pricing and learning; steps) over one recorded output."""
    drafter = lookup_drafter(draft)
    drafter.reset(trace["tokens"])
    length = length_policy(draft.length, Pricing(seed=tuple(curve)))
    out = trace["output"]
    history = [*trace["tokens"], out[0]]
    i, n, spent, steps = 1, len(out), 0, 0
    clock = time.perf_counter_ns
    while i < n:
        room = budget - i - 1
        t0 = clock()
        k, proposal = propose_step(drafter, length, history, room, eog)
        t1 = clock()
        tokens = proposal.tokens
        got = common_prefix(tokens, out[i:])
        emitted = min(got + 1, n - i)
        verify_us = UNIT_US * curve[min(len(tokens), len(curve) - 1)] * rng.uniform(0.9, 1.1)
        t2 = clock()
        length.observe(Outcome(k, len(tokens), got, verify_us, proposal.match, emitted=out[i : i + emitted]))
        spent += (t1 - t0) + (clock() - t2)
        steps += 1
        history.extend(out[i : i + emitted])
        i += emitted
    return spent, steps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="embedded", help="embedded (default) or qwen-1.5b: whose recorded outputs")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--learned", action="store_true", help="the learned draft length (--learned-k) instead of the default")
    args = ap.parse_args()
    path = traces_path(args.model)
    if not path.is_file():
        print(f"error: no recorded traces at {path} (run pricing_replay.py --record --model {args.model})", file=sys.stderr)
        return 2
    data = json.loads(path.read_text())
    curve = data["curves"]["default"]
    draft = config(str(PROMPTS / "copy-1.txt"), "spec", "", ["--max-tokens", str(data["max_tokens"])]).draft
    if args.learned:
        assert isinstance(draft.length, CostAware)
        draft = msgspec.structs.replace(draft, length=msgspec.structs.replace(draft.length, rule="learned"))
    per_round = []
    for _ in range(max(args.rounds, 1)):
        rng = random.Random(1)  # the same jitter every round
        spent = steps = 0
        for trace in data["traces"]["default"]:
            ns, n = one_run(trace, draft, curve, data["max_tokens"], rng, frozenset(data["eog"]))
            spent, steps = spent + ns, steps + n
        per_round.append(spent / steps / 1000)
    print(f"{args.model}{' (learned K)' if args.learned else ''}: {statistics.median(per_round):.1f} us a step proposing, pricing and learning "
          f"(median of {len(per_round)} rounds: {', '.join(f'{r:.1f}' for r in per_round)}; {steps} steps a round)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
