"""``spectui tune``: measure what makes speculation pay on this machine, recommend a setting
per prompt tier, and check the recommendation against real runs. ``--runtime llama-server``:
the runtime's own methods and K values, measured by runs (``spectui.tune.runtime``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from spectui.cli import tune_traffic
from spectui.cli.host_flag import add_host_argument, without_host
from spectui.cli.inputs import read_recordings
from spectui.cli.parsing import add_charts_arguments, output_path
from spectui.cli.progress import Progress
from spectui.cli.run_flags import add_run_arguments, config_from_args, gave_prompt
from spectui.drafting import RUNTIME_PREFIX
from spectui.errors import SpectuiError

if TYPE_CHECKING:  # imported on use: tune's engine parts load only when it runs
    from spectui.config import RunConfig
    from spectui.engine.host.weights import WeightChoice, WeightRow
    from spectui.recording.reader import Recording
    from spectui.tune.result import TuneResult

DEFAULT_TIERS = "copy,code,memo,medium,short"
#: tune's token budget per prompt unless --max-tokens says otherwise: enough blocks to
#: measure acceptance, short enough for a run of about a minute on the embedded model
TUNE_TOKENS = 160
#: check rounds per prompt unless --reps says otherwise
CHECK_ROUNDS = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="measure verify cost and acceptance here; recommend and check a setting per prompt tier"
                                    " (--runtime llama-server: its own methods and K values, measured)")
    add_run_arguments(p)
    add_host_argument(p)
    p.add_argument("--tiers", default=DEFAULT_TIERS, help=f"prompt tiers from prompts/ (default {DEFAULT_TIERS})")
    p.add_argument("--from", dest="from_dir", metavar="DIR", help="acceptance from the greedy recordings in DIR instead of new runs")
    p.add_argument("--reps", type=int, default=None,
                   help=f"check rounds per prompt, AR and recommended alternating (0: no check; default {CHECK_ROUNDS}); "
                        "--runtime: rounds of its measured pass (at least 1; default 1)")
    p.add_argument("--weights", action="store_true",
                   help="also measure the curve of a small probe requantized to Q4_0, Q4_1, Q8_0, Q4_K_M and F16")
    p.add_argument("--probe-target", action="store_true",
                   help="with --weights: requantize your target itself as the probe instead of the small embedded model "
                        "(its width decides which kernels it gets; each copy is cached and takes about its size on disk)")
    p.add_argument("--write-quant", nargs=2, metavar=("TYPE", "OUT"), type=str,
                   help="write the target requantized to TYPE (e.g. Q4_0) at OUT, then stop")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    tune_traffic.add_arguments(p)
    add_charts_arguments(p, "the verify-cost curve and the predicted speedups")
    p.set_defaults(func=cmd_tune)


def cmd_tune(args: argparse.Namespace) -> int:
    if tune_traffic.wanted(args) and not args.host:
        return tune_traffic.cmd_tune_workload(args)
    if args.host:
        return _tune_on_node(args)
    if args.write_quant:
        return _write_quant(args)
    if args.reps is not None and args.reps < 0:
        raise SpectuiError("--reps must be >= 0")
    if args.probe_target and not args.weights:
        raise SpectuiError("--probe-target chooses the model --weights probes: add --weights")
    config = config_from_args(args)
    if config.backend.name == "server":
        raise SpectuiError("tune measures the engines spectui runs; for a server someone else runs, compare runs instead: "
                           "spectui compare --server URL")
    if not config.sampling.greedy:
        raise SpectuiError("tune measures greedy decoding (acceptance replays exactly); drop --temperature")
    if config.backend.is_runtime:
        return _tune_runtime(args, config)
    from spectui.prompts import PromptSpec, list_prompts
    from spectui.tune import runner, store

    if gave_prompt(args):
        specs = [PromptSpec(name=config.prompt_name or "given", tier=config.prompt_tier or "given", max_tokens=config.max_tokens,
                            text=config.prompt)]
    else:
        tiers = [t for t in args.tiers.split(",") if t]
        known = {s.tier for s in list_prompts()}
        unknown = sorted(set(tiers) - known)
        if unknown:
            raise SpectuiError(f"no prompt tier {', '.join(unknown)}; prompts/ has {', '.join(sorted(known))}")
        specs = [s for s in list_prompts() if s.tier in tiers]
    recordings = _recordings(args.from_dir) if args.from_dir else None
    plan = runner.TunePlan(specs=specs, max_tokens=args.max_tokens or TUNE_TOKENS, reps=CHECK_ROUNDS if args.reps is None else args.reps,
                           model_k=args.k if args.k is not None else runner.MODEL_PROBE_K,
                           recordings=recordings, source=args.from_dir or "runs")
    # one step per phase (spectui.cli.progress: a bar in a terminal, a line each otherwise)
    with Progress("tune", plan.phases(config) + (5 if args.weights else 0)) as progress:
        weights = choice = None
        if args.weights:  # first: the embedded default's choice it makes is what tune then measures
            weights, choice = _probe_weights(args, config, specs[0].text, progress.advance)
        result = runner.run_tune(config, plan, progress.advance)
        store.save_result(result)
    _print(result, weights, choice, args)
    return 0


def _tune_runtime(args: argparse.Namespace, config: RunConfig) -> int:
    """``--runtime``: the runtime's methods at the K values each reads, measured against its own
    AR on one prompt per tier (``spectui.tune.runtime``); ``--draft runtime:A,runtime:B`` and
    ``--k`` narrow the pass to those methods and that K."""
    from spectui.lab.sweep import split_drafters
    from spectui.prompts import PromptSpec, list_prompts
    from spectui.tune import runtime

    name = config.backend.name
    if name not in runtime.MEASURED_METHODS:
        raise SpectuiError(f"tune measures the methods of {', '.join(runtime.MEASURED_METHODS)}; for {name}, compare a setting "
                           f"against its own AR: spectui compare --runtime {name} --draft runtime:METHOD")
    for flag, given in (("--from", args.from_dir), ("--weights", args.weights)):
        if given:
            raise SpectuiError(f"{flag} is the embedded engine's (spectui's own drafters and kernels); drop it with --runtime")
    methods = [m.removeprefix(RUNTIME_PREFIX) for m in split_drafters(args.draft)] if args.draft else list(runtime.MEASURED_METHODS[name])
    from spectui.runtime.methods import RuntimeMethod

    for method in methods:  # an unknown method is one line before a server starts
        RuntimeMethod.parse(method, k=args.k, lookup=args.lookup or None)
    if gave_prompt(args):
        specs = [PromptSpec(name=config.prompt_name or "given", tier=config.prompt_tier or "given", max_tokens=config.max_tokens,
                            text=config.prompt)]
    else:
        tiers = [t for t in args.tiers.split(",") if t]
        by_tier = {s.tier: s for s in sorted(list_prompts(), key=lambda s: s.name, reverse=True)}  # the first by name wins
        unknown = sorted(set(tiers) - set(by_tier))
        if unknown:
            raise SpectuiError(f"no prompt tier {', '.join(unknown)}; prompts/ has {', '.join(sorted(by_tier))}")
        specs = [by_tier[t] for t in dict.fromkeys(tiers)]
    # --k: that K alone; else each of TUNE_KS and the runtime's own
    cands = runtime.candidates(methods, (args.k,) if args.k is not None else runtime.TUNE_KS, runtime_default=args.k is None)
    rounds = max(1, args.reps or 1)  # a round is every setting on every prompt: one unless asked
    with Progress(f"tune {name}", rounds * len(cands) * len(specs)) as progress:  # a step: a setting and its AR on a prompt
        result = runtime.measure(config, specs, cands, rounds=rounds, max_tokens=args.max_tokens or runtime.RUNTIME_TOKENS,
                                 progress=progress.advance)
    print(json.dumps(runtime.to_json(result), indent=1) if args.json else runtime.format_text(result))
    return 0


def _probe_weights(
    args: argparse.Namespace, config: RunConfig, text: str, progress: Callable[[str], None],
) -> tuple[list[WeightRow], WeightChoice | None]:
    """The probe's rows and, when the probe is the embedded model, the weight type the embedded
    default runs in on this machine from now on (stored: ``engine.weights``)."""
    from spectui.engine.host.weights import choose_weights, probe_weights, shipped_type, store_choice

    weights = probe_weights(config.backend, text, progress=progress, source=(config.target or None) if args.probe_target else None)
    if args.probe_target:
        return weights, None
    choice = choose_weights(weights, shipped_type(), by="spectui tune --weights")
    store_choice(config.backend, choice)
    return weights, choice


def _tune_on_node(args: argparse.Namespace) -> int:
    """``--host``: tune runs on the node, whose verify costs and acceptance it measures and
    keeps (the node's runs read them there); its report is printed here."""
    from spectui.remote.ssh import run_on_node

    if args.from_dir or args.prompt_file or args.write_quant:
        raise SpectuiError("with --host, tune runs on the node: --from, --prompt-file and --write-quant would name files there;"
                           " run it on the node itself (ssh NODE spectui tune ...)")
    config_from_args(args)  # bad flags are refused here, before connecting
    from spectui.cli import build_parser
    from spectui.cli.profiles import words_for_node

    words = without_host(sys.argv[1:])
    # the node has no copy of this machine's config files: what they set goes as flags
    returncode = run_on_node(args.host, words_for_node(build_parser(), words[words.index("tune"):], args))
    if returncode == 255:  # after a good handshake: the link dropped mid-way
        print(f"spectui: error: the connection to node {args.host} was lost; what tune measured there so far stays there", file=sys.stderr)
        return 1
    return returncode


def _print(result: TuneResult, weights: list[WeightRow] | None, choice: WeightChoice | None, args: argparse.Namespace) -> None:
    from spectui.tune import report

    if args.json:
        doc = report.to_json(result)
        if weights is not None:
            doc["weights"] = report.finite([
                {"quant": w.quant, "path": w.path, "probe": w.source, "size_bytes": w.size_bytes, "unit_us": w.curve.unit_us,
                 "relative": list(w.curve.relative), "batched": w.batched, "ideal_speedup_k8": w.ideal_speedup()}
                for w in weights])
        if choice is not None:
            doc["embedded_weights"] = {"quant": choice.quant, "shipped": choice.shipped, "reason": choice.reason()}
        print(json.dumps(doc, indent=1, allow_nan=False))
        return
    print(report.format_text(result))
    if weights is not None:
        print()
        print(format_weights(weights, result))
    if choice is not None:
        from spectui.engine.host.weights import ENV

        print(f"  the embedded default runs as {choice.quant} on this machine from now on: {choice.reason()};"
              f" {ENV}=shipped runs the file as shipped")
    if args.charts or (args.charts is None and sys.stdout.isatty()):
        print()
        print(report.format_charts(result, colour=sys.stdout.isatty()))


def format_weights(weights: list[WeightRow], result: TuneResult) -> str:
    from spectui.format import size, text_table
    from spectui.tune.weights import weights_summary

    sizes = (2, 4, 8, 16)
    rows = [[w.quant, size(w.size_bytes), f"{w.curve.unit_us / 1000:.1f} ms", *(f"{w.curve.cost(n):.2f}" for n in sizes),
             f"{w.rows_per_cost:.1f}", f"{w.ideal_speedup():.2f}x", "yes" if w.batched else "no"] for w in weights]
    probed = os.path.basename(weights[0].source) if weights else "?"
    lines = [f"weight types on this machine ({probed} requantized; n tokens at once, in one-token evaluations)",
             text_table(["weights", "size", "1 token", *(f"n={n}" for n in sizes), "rows/unit at 16", "ideal K=8", "batched"],
                        rows, right=set(range(1, 9)), rules_before={0})]
    lines += [f"  {s}" for s in weights_summary(weights, result.quant, result.curve)]
    return "\n".join(lines)


def _recordings(folder: str) -> list[Recording]:
    if not os.path.isdir(folder):
        raise SpectuiError(f"--from: no such folder: {folder}")
    paths = sorted(os.path.join(d, f) for d, _, files in os.walk(folder) for f in files if f.endswith(".spectui"))
    if not paths:
        raise SpectuiError(f"--from: no recordings (*.spectui) in {folder}")
    return read_recordings(paths)


def _write_quant(args: argparse.Namespace) -> int:
    from spectui.engine.host.quantize import ftype, quantize
    from spectui.models.registry import resolve_model

    kind, out = args.write_quant
    ftype(kind)  # an unknown type is refused before anything is read
    try:
        output_path(out)
    except argparse.ArgumentTypeError as exc:
        raise SpectuiError(f"--write-quant: {exc}") from None
    if os.path.exists(out):
        raise SpectuiError(f"--write-quant: {out} exists; tune never overwrites a model")
    src = resolve_model(args.target)
    quantize(src, out, kind)
    print(f"wrote {out}: {os.path.basename(src)} requantized to {kind.upper()} ({os.path.getsize(out) / 2**20:.0f} MiB)")
    return 0
