"""How much of "copying at best" a lookup drafter can reach: the ceiling taken apart on recorded outputs.

    python benchmarks/copy_bounds.py [--traces results/pricing-traces-embedded.json ...] [--categories copy,code,memo]

``spectui tune``'s "copying at best" (``tune/ceiling.copy_ceiling``) credits a block at every
position with the longest run of the coming output found anywhere earlier, and knows where
each run ends. A drafter that copies has neither: it finds its source by the text it has just
written, and learns where a copy ends when a block fails there. This benchmark replays the
committed greedy traces (``pricing_replay.py --record``; no model is loaded, it runs in
seconds) and prices, on each trace's own verify-cost curve, what each piece of that knowledge
is worth. Per category, each row's speedup over AR (medians over the prompts) and its share of
the ceiling:

* **ceiling**: any earlier run of tokens, its end known (tune's "copying at best").
* **context-led, ends known**: only runs that follow an earlier occurrence of the last token
  written (the least a lookup needs to find a source), the best of them, its end known.
* **prompt lookup, ends known**: the run that follows the latest occurrence of the longest
  match (what the n-gram drafter copies), its end known: the best any choice of K could do
  with that source.
* **best rule a prompt, in hindsight**: per prompt, the best of 120 prompt-lookup rules (draft
  ``min(K, a * match)`` tokens where the match is at least ``m``), picked knowing the outcome.
* **best rule a kind, in hindsight**: the one rule with the best median over the category's
  prompts (what knowing the kind of text, and tuning for it, could do).
* **one rule, in hindsight**: the one rule with the best mean over every prompt of the set
  (what the best fixed setting does where the kind of text is not known).
* **defaults**: spectui's defaults as ``pricing_replay.py`` predicts them (the category
  benchmark's order and repetitions, the stored calibration carried).
* **learner**: the same, the draft length learned per position and keyed by how long the
  copy has held (``--learned-k``, ``engine/loop/learned_length.py``), its memory carried.
* **told whether**, **told how long**: the learner told one of the two things the lookup bound
  knows. Told whether: it drafts exactly where the proposal's first token survives, as long as
  it would have (at least one token). Told how long: where it drafts and the proposal's first
  token survives, it drafts exactly the tokens that survive; where it holds back it still
  does, and a proposal that fails at once still costs the block it chose. **Told both**: it
  drafts exactly the tokens that survive, nothing where none do: near the lookup bound (which
  also plans where blocks start), a check that these two things are the whole gap.
  Each category's line ends with the defaults', the learner's and the told learners' share of
  the lookup bound: the lookup bound is reached by knowing both, and what each alone reaches
  says what learning where copies end, or whether they start, could be worth.

The gaps read: ceiling to context-led is copies nothing written points to (the first tokens
of a quote, the text after an edit); context-led to prompt lookup is the choice among
occurrences; prompt lookup to the rules and the defaults is not knowing where a copy ends.
The kind's rule beside the one rule is what knowing the kind of text is worth to a fixed
setting. The told learners bound what a learner can gain on one side without the other.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from categories import CATEGORIES, RESULTS
from pricing_replay import predict

from spectui.engine.loop.learned_length import LearnedLength, SurvivalMemory
from spectui.engine.loop.length import Learned, LengthContext, Outcome
from spectui.metrics.predict import seeded_cost
from spectui.tune.ceiling import copy_ceiling, lookup_bound, lookup_sources, planned_speedup
from spectui.tune.replay import common_prefix

K_MAX = 16
#: the prompt-lookup rules tried per prompt: least match m, most tokens K, tokens per matched one a
RULES = list(itertools.product((1, 2, 3, 4, 6), (2, 3, 4, 8, 12, 16), (0.5, 1.0, 2.0, float(K_MAX))))
TRACES = ("pricing-traces-embedded.json", "pricing-traces-embedded-q4_1.json",
          "pricing-traces-qwen-1.5b.json", "pricing-traces-embedded-held-out.json")
COLUMNS = ("ceiling", "context-led", "lookup", "rule a prompt", "rule a kind", "one rule", "defaults", "learner",
           "told whether", "told how long", "told both")
#: the columns priced against the lookup bound at each category's line end
LEARNED = ("defaults", "learner", "told whether", "told how long", "told both")


class Told:
    """The learner over one trace, told what a drafter cannot know (see the module docstring):
    ``whether`` a proposal's first token survives, ``how long`` it survives, or ``both``. It
    follows the output through the emitted tokens the loop reports, as the learner does."""

    sees_proposal = True

    def __init__(self, learner: LearnedLength, output: Sequence[int], told: str) -> None:
        self.learner, self.output, self.told = learner, output, told
        self.k_max = learner.k_max
        self.at = 1  # the output position the next proposal starts at (0 came from the prefill)

    def propose(self, context: LengthContext) -> int:
        k = self.learner.propose(context)
        proposal = context.proposal
        if proposal is None:
            return k
        n = min(len(proposal.tokens), self.k_max, context.room)
        survives = common_prefix(proposal.tokens[:n], self.output[self.at:])
        if self.told == "whether":
            return max(k, 1) if survives else 0
        if self.told == "how long":
            return survives if k and survives else k
        return survives  # both: every surviving token, in a block each step (the bound plans, so it may do better)

    def observe(self, outcome: Outcome) -> None:
        self.learner.observe(outcome)
        self.at += len(outcome.emitted)

    def learned(self) -> Learned:
        return self.learner.learned()


def learned_ratios(data: dict, told: str = "") -> dict[str, float]:
    """Each prompt's predicted speedup under the learner (told ``whether``, ``how long`` or
    ``both``, or nothing), its memory carried from prompt to prompt as the defaults carry theirs."""
    memory = SurvivalMemory()

    def make(seed: Sequence[float], trace: dict) -> LearnedLength | Told:
        learner = LearnedLength(seed=seed, memory=memory)
        return Told(learner, trace["output"], told) if told else learner

    return {r["prompt"]: r["ratio"] for r in predict(data, deterministic=False, length=make)}


def context_keepable(hist: Sequence[int], ahead: Sequence[int]) -> int:
    """The most of ``ahead`` a copy can keep from after any earlier occurrence of the last token."""
    last = hist[-1]
    return max((common_prefix(hist[s + 1:s + 1 + K_MAX], ahead) for s in range(len(hist) - 1) if hist[s] == last), default=0)


def rule_speedup(prompt: Sequence[int], output: Sequence[int], sources: list[tuple[int, int]],
                 cost: Callable[[int], float], m: int, k: int, a: float) -> float:
    """One prompt-lookup rule run over the output (greedy: the output does not depend on it)."""
    hist = [*prompt, *output]
    i, spent = 1, 0.0
    while i < len(output):
        length, start = sources[i]
        n = min(k, int(a * length)) if length >= m and start >= 0 else 0
        tokens = hist[start:min(start + n, len(prompt) + i)] if n else []
        spent += cost(len(tokens) + 1)
        i += min(common_prefix(tokens, output[i:]) + 1, len(output) - i)
    return (len(output) - 1) / spent


def bounds(trace: dict, cost: Callable[[int], float]) -> tuple[dict[str, float], dict[tuple, float]]:
    """The bounds on one trace, and every rule's speedup on it."""
    prompt, output = trace["tokens"], trace["output"]
    text = [*prompt, *output]
    sources = [(0, -1), *lookup_sources(text, len(prompt) + 1)]
    context = [0] + [context_keepable(text[:len(prompt) + i], output[i:i + K_MAX]) for i in range(1, len(output))]
    rules = {r: rule_speedup(prompt, output, sources, cost, *r) for r in RULES}
    return {
        "ceiling": copy_ceiling(prompt, output, cost, K_MAX),
        "context-led": planned_speedup(context, cost, K_MAX),
        "lookup": lookup_bound(prompt, output, cost, K_MAX),
        "rule a prompt": max(rules.values()),
    }, rules


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", type=Path, nargs="*", help="recorded traces (default: the four committed sets)")
    ap.add_argument("--categories", default="", help="comma-separated: only these categories (default: all)")
    args = ap.parse_args()
    wanted = {c.strip() for c in args.categories.split(",") if c.strip()}
    for path in args.traces or [RESULTS / name for name in TRACES]:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            print(f"error: {path}: not a recorded trace file ({e})", file=sys.stderr)
            return 2
        cost = seeded_cost(data["curves"]["default"])
        defaults = {r["prompt"]: r["ratio"] for r in predict(data, deterministic=False)}
        learned = {"learner": learned_ratios(data), **{f"told {told}": learned_ratios(data, told)
                                                        for told in ("whether", "how long", "both")}}
        rows: dict[str, list[dict[str, float]]] = {}
        rules: dict[str, list[dict[tuple, float]]] = {}
        for trace in data["traces"]["default"]:
            if not wanted or trace["category"] in wanted:
                row, each = bounds(trace, cost)
                rows.setdefault(trace["category"], []).append({**row, "defaults": defaults[trace["prompt"]],
                                                               **{c: ratios[trace["prompt"]] for c, ratios in learned.items()}})
                rules.setdefault(trace["category"], []).append(each)
        every = [each for kind in rules.values() for each in kind]
        one = max(RULES, key=lambda r: statistics.mean(each[r] for each in every))
        for category, mine in rows.items():
            kind = max(RULES, key=lambda r: statistics.median(each[r] for each in rules[category]))
            for row, each in zip(mine, rules[category]):
                row["rule a kind"], row["one rule"] = each[kind], each[one]
        print(f"{Path(path).name} ({data['model']}, {data['max_tokens']} tokens a prompt): speedup over AR (medians over the"
              " prompts), and share of the ceiling; the worst prompt under the kind's rule / the one rule / the defaults /"
              " the learner")
        print(f"  the one rule here: m = {one[0]}, K = {one[1]}, a = {one[2]:g}")
        print(f"  {'category':22} " + "  ".join(f"{c:>13}" for c in COLUMNS))
        for category, mine in rows.items():
            medians = {c: statistics.median(r[c] for r in mine) for c in COLUMNS}
            cells = [f"x{medians[c]:.2f}" + ("" if c == "ceiling" else f" ({medians[c] / medians['ceiling']:.0%})") for c in COLUMNS]
            worst = " / ".join(f"x{min(r[c] for r in mine):.2f}" for c in ("rule a kind", "one rule", "defaults", "learner"))
            of_lookup = ", ".join(f"{c} {medians[c] / medians['lookup']:.0%}" for c in LEARNED)
            print(f"  {CATEGORIES.get(category, category):22} " + "  ".join(f"{cell:>13}" for cell in cells)
                  + f"  worst {worst}; of lookup: {of_lookup}")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
