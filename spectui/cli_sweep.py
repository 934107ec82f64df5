"""``spectui sweep``: the plan from the flags, a progress line (or the dashboard's sweep view),
then the table per tier, the knee, charts; ``--json`` / ``--csv`` for machines."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spectui.errors import SpectuiError


def add_parsers(sub: argparse._SubParsersAction) -> None:
    from spectui.cli import add_run_arguments

    p = sub.add_parser("sweep", help="AR, then one knob at a time (K, temperature, top-k, drafter), repeated, per prompt tier")
    add_run_arguments(p)
    p.add_argument("--tiers", default="", help="comma-separated prompt tiers (default: every tier but quality)")
    p.add_argument("--prompts", default="", help="comma-separated prompt names (default: every prompt of the tiers)")
    p.add_argument("--k-values", default="2,3,4,6,8", help="draft lengths to sweep ('' for none; default 2,3,4,6,8)")
    p.add_argument("--temperatures", default="", help="temperatures to sweep, e.g. 0.5,1.0")
    p.add_argument("--top-k-values", default="", help="top-k values to sweep, e.g. 10,40")
    p.add_argument("--drafters", default="", help="drafters to sweep: 'ngram' and/or draft GGUF paths")
    p.add_argument("--repeats", type=int, default=3, help="runs of every point per prompt (default 3)")
    p.add_argument("--out", default=None, help="folder for the recordings and sweep.json (default recordings/sweep-<time>)")
    p.add_argument("--headless", action="store_true", help="no sweep view: a progress line, then the table")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="one JSON object: plan, runs, rows, knees")
    fmt.add_argument("--csv", action="store_true", help="the rows as CSV")
    p.add_argument("--no-charts", action="store_true", help="leave out the plotext charts")
    p.add_argument("--analyze", metavar="DIR", default=None, help="rebuild the table of an earlier sweep from its recordings")
    p.add_argument("--theme", default=None)


def _plan(args: argparse.Namespace):  # -> (SweepPlan, prompts, max_tokens)
    import msgspec

    from spectui.cli import config_from_args
    from spectui.lab.sweep import SweepPlan, make_points, select_prompts
    from spectui.prompts import list_prompts

    if args.repeats < 1:
        raise SpectuiError(f"--repeats must be >= 1, got {args.repeats}")
    if args.prompt is not None or args.prompt_file is not None or args.prompt_name is not None:
        raise SpectuiError("a sweep runs prompts from prompts/: choose them with --tiers or --prompts")
    args.prompt = "sweep"  # the base configuration's prompt is replaced per run
    base = msgspec.structs.replace(config_from_args(args), mode="spec", prompt_tier="", prompt_name="")
    prompts = select_prompts(list_prompts(), args.tiers, args.prompts)
    points = make_points(
        k_values=args.k_values, temperatures=args.temperatures, top_k_values=args.top_k_values, drafters=args.drafters
    )
    plan = SweepPlan(
        base=base,
        prompts=[p.name for p in prompts],
        tiers={p.name: p.tier for p in prompts},
        points=points,
        repeats=args.repeats,
    )
    return plan, prompts, args.max_tokens


def format_progress(p) -> str:  # noqa: ANN001 - SweepProgress
    eta = "" if p.eta_s != p.eta_s else f" ETA {int(p.eta_s) // 60}m{int(p.eta_s) % 60:02d}s"
    return f"[{p.done}/{p.total}] {p.done / max(1, p.total):4.0%}{eta}  {p.current}"


def _print(result, args: argparse.Namespace) -> None:  # noqa: ANN001 - SweepResult
    import msgspec

    from spectui.lab.sweep_report import format_charts, format_csv, format_table

    if args.json:
        print(msgspec.json.encode(result).decode())
    elif args.csv:
        print(format_csv(result), end="")
    else:
        print(format_table(result))
        if not args.no_charts:
            charts = format_charts(result)
            if charts:
                print(charts)


def cmd_sweep(args: argparse.Namespace) -> int:
    from spectui.cli import _StopOnSignal

    if args.analyze is not None:
        from spectui.lab.sweep import load_sweep

        result, _ = load_sweep(args.analyze)
        _print(result, args)
        return 0
    plan, prompts, max_tokens = _plan(args)
    from spectui.recording.writer import check_run_folder, new_run_folder

    folder = Path(args.out) if args.out else new_run_folder("sweep")
    check_run_folder(folder, "sweep")
    if not args.headless and not args.json and not args.csv and sys.stdout.isatty() and sys.stdin.isatty():
        from spectui.ui.sweep import run_sweep_view

        return run_sweep_view(plan, prompts, folder, max_tokens=max_tokens, theme=args.theme)

    from spectui.lab.sweep import run_sweep

    tty = sys.stderr.isatty()

    def on_run(progress, _result) -> None:  # noqa: ANN001
        line = format_progress(progress)
        sys.stderr.write(("\r\x1b[2K" + line) if tty else line + "\n")
        sys.stderr.flush()

    with _StopOnSignal() as stop:
        result = run_sweep(plan, prompts, folder, max_tokens=max_tokens, stop=stop, on_run=on_run)
    if tty:
        sys.stderr.write("\n")
    _print(result, args)
    return 0 if result.complete else 130


COMMANDS = {"sweep": cmd_sweep}
