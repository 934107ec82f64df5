"""spectui's own loops against llama-server's speculation, on the same model, prompts and kernels.

    python benchmarks/runtimes.py [--reps 5] [--threads 2] [--max-tokens 128] [--llama-server PATH] [--json FILE]

Rows, each as a ratio of its own AR (decode tok/s, prefill excluded): spectui's embedded n-gram
(cost-aware K, the default) and draft-model (a Q8_0 requantized copy of the embedded model,
K=4) loops against llama-server's ngram-mod (its defaults) and draft-simple (the same draft
file, n-max 4), over the copy-heavy and free-form prompts of ``prompts/``. The llama-server
is built from the llama.cpp that the installed llama-cpp-python vendors (``spectui runtime
build``), so both sides run the same kernels on the same GGUF.

Every server stays up for the whole benchmark (one per setting: llama-server takes its
speculative settings at start), and the settings alternate round by round, the first round a
warm-up that is dropped; a row's ratio is the median over rounds of (tok/s) / (its AR's tok/s
in that round), over the same text: where a row's output parts from its AR's, both are timed up
to where they part. Greedy: every speculative output is checked against its AR output, and a
parting is printed with where it is and why (a near-tie within the backend's calibrated noise,
or more; a server run without margins at the parting stays unclassified, said as such). The
machine is shared: read medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict

from spectui.cli import build_parser
from spectui.cli.run_flags import config_from_args
from spectui.compare.divergence import RunOutput, judge_outputs
from spectui.compare.speedup import decode_steps, parting
from spectui.engine.host.quantize import cached_copy
from spectui.models.registry import embedded_model_path
from spectui.recording.reader import Recording
from spectui.sessions.open import open_engine

PROMPTS = ["copy-quote-paragraph", "copy-refactor-rename", "load-typo-fix", "load-code-continuation", "short-greeting",
           "medium-reasoning"]


def _rec(events: list) -> Recording:
    return Recording(header=events[0], events=events, truncated=False, truncated_at=None, complete=True)


def _rate(events: list, limit: int | None) -> float:
    tokens, seconds = decode_steps(_rec(events), limit)
    return float(tokens.sum() / seconds.sum()) if seconds.sum() > 0 else float("nan")


def _cause(ar: list, other: list, index: int) -> str:
    """Why the outputs part: the one judge's verdict and its reason, as spectui diff says it."""
    cause = judge_outputs(RunOutput.of(ar), RunOutput.of(other), index=index)
    return cause.line if cause is not None else "not judged (sampled)"


def settings(draft: str, server: str) -> dict[str, list[str]]:
    runtime = ["--runtime", "llama-server", *(["--llama-server", server] if server else [])]
    return {
        "embedded AR": ["--mode", "ar"],
        "embedded n-gram (cost-aware K)": ["--draft", "ngram"],
        "embedded draft model K=4": ["--draft", draft, "--k", "4"],
        "llama-server AR": [*runtime, "--mode", "ar"],
        "llama-server ngram-mod": [*runtime, "--draft", "runtime:ngram-mod"],
        "llama-server draft-simple n-max 4": [*runtime, "--draft", "runtime:draft-simple", "--draft-model", draft, "--k", "4"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--llama-server", default="")
    ap.add_argument("--prompts", default=",".join(PROMPTS))
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    draft = str(cached_copy(embedded_model_path(), "Q8_0"))
    rows = settings(draft, a.llama_server)
    prompts = a.prompts.split(",")
    common = ["--max-tokens", str(a.max_tokens), "--threads", str(a.threads)]
    configs = {(name, p): config_from_args(build_parser().parse_args(["run", "--prompt-name", p, *common, *flags]))
               for name, flags in rows.items() for p in prompts}
    engines = {}
    try:
        for name in rows:  # one engine (a server, or the embedded models) per setting, kept up
            engines[name] = open_engine(configs[name, prompts[0]])
        speed: dict[tuple[str, str], list[float]] = {}
        ar_events: dict[str, list] = {}
        #: each row's AR rate over the same text as the row's own, round by round
        base_at: dict[tuple[str, str], list[float]] = defaultdict(list)
        for rnd in range(a.reps + 1):
            for p in prompts:
                for name in rows:
                    events = list(engines[name].run(configs[name, p]))
                    base = name.split(" ")[0] + " AR"
                    if name == base:
                        ar_events[p] = events
                    parted = parting(_rec(ar_events[p]), _rec(events)) if name != base else -1
                    if parted >= 0:
                        print(f"round {rnd} {p}: {name} parts from {base} at token {parted}: {_cause(ar_events[p], events, parted)}",
                              file=sys.stderr)
                    if rnd:
                        # over the same text: two outputs that part are timed up to where they part
                        limit = parted if parted >= 0 else None
                        speed.setdefault((name, p), []).append(_rate(events, limit))
                        if name != base:
                            base_at[name, p].append(_rate(ar_events[p], limit))
                print(f"round {rnd} {p} done", file=sys.stderr, flush=True)
    finally:
        for engine in engines.values():
            engine.close()
    result = {}
    print(f"{'setting':36} " + " ".join(f"{p[:14]:>14}" for p in prompts))
    for name in rows:
        base = name.split(" ")[0] + " AR"
        ratios = [statistics.median(s / b for s, b in zip(speed[name, p], base_at[name, p] if name != base else speed[base, p]))
                  for p in prompts]
        ar = [statistics.median(speed[base, p]) for p in prompts]
        result[name] = {"ratio_of_own_ar": dict(zip(prompts, ratios)), "own_ar_tok_s": dict(zip(prompts, ar))}
        print(f"{name:36} " + " ".join(f"{r:>13.2f}x" for r in ratios))
    if a.json:
        with open(a.json, "x") as f:
            json.dump({"reps": a.reps, "threads": a.threads, "max_tokens": a.max_tokens, "rows": result}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
