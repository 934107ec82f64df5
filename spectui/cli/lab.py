"""Many runs into one folder: ``spectui sweep`` and ``spectui soak``.

The sweep: the plan from the flags, a progress line (or the dashboard's sweep view), then the
table per tier, the knee and charts; ``--json`` / ``--csv`` for machines. The soak: decode back
to back for a while and judge the memory trend; exit 0 when it passes, 1 when memory grew (see
``spectui.lab.soak``). Both take ``--analyze DIR`` to re-read an earlier folder without any
model, and both run through ``spectui.lab``, which records every session with
``record_session``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.cli.host_flag import add_host_argument, host_engines
from spectui.cli.parsing import add_charts_arguments, add_old_spelling
from spectui.cli.progress import Progress
from spectui.cli.run_flags import add_run_arguments, config_from_args, gave_prompt
from spectui.cli.signals import StopOnSignal
from spectui.errors import SpectuiError
from spectui.format import counted

if TYPE_CHECKING:
    from spectui.config import RunConfig
    from spectui.lab.sweep import SweepPlan, SweepProgress, SweepResult
    from spectui.lab.sweep_table import SweepPoint
    from spectui.prompts import PromptSpec


def register(sub: argparse._SubParsersAction) -> None:
    _register_sweep(sub)
    _register_soak(sub)


# -- sweep ----------------------------------------------------------------------------------


def _register_sweep(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="AR, then one knob at a time (K, temperature, top-k, drafter), repeated, per prompt tier")
    add_run_arguments(p)
    add_host_argument(p)
    p.add_argument("--hosts", metavar="A,B,...", default=None,
                   help="the same plan on each node in turn (ssh destinations), headless, each into its own subfolder of --out")
    p.add_argument("--parallel", action="store_true", help="with --hosts: every node at once (each runs its own engine)")
    p.add_argument("--tiers", default="", help="comma-separated prompt tiers (default: every tier but quality)")
    p.add_argument("--prompts", default="", help="comma-separated prompt names (default: every prompt of the tiers)")
    p.add_argument("--k-values", default="2,3,4,6,8", help="draft lengths to sweep ('' for none; default 2,3,4,6,8)")
    p.add_argument("--temperatures", default="", help="temperatures to sweep, e.g. 0.5,1.0")
    p.add_argument("--top-k-values", default="", help="top-k values to sweep, e.g. 10,40")
    p.add_argument("--drafters", default="",
                   help="drafters to sweep: 'ngram' and/or draft GGUF paths; with --runtime, its methods (runtime:ngram-mod,runtime:ngram-simple)")
    p.add_argument("--grid", action="store_true",
                   help="every drafter of --drafters at every K of --k-values (a runtime method that fixes its own K: once),"
                        " not one knob at a time; several runtime methods in --draft mean the same")
    p.add_argument("--reps", type=int, default=3, metavar="N", help="runs of every point per prompt (default 3)")
    add_old_spelling(p, "--repeats", "reps", type=int)
    p.add_argument("--out", default=None, help="folder for the recordings and sweep.json (default recordings/sweep-<time>)")
    p.add_argument("--headless", action="store_true", help="no sweep view: a progress line, then the table")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="one JSON object: plan, runs, rows, knees")
    fmt.add_argument("--csv", action="store_true", help="the rows as CSV")
    add_charts_arguments(p, "speedup and acceptance against K")
    p.add_argument("--analyze", metavar="DIR", default=None, help="rebuild the table of an earlier sweep from its recordings")
    p.add_argument("--theme", default=None, help="the sweep view's theme: spectui-dark, spectui-light, spectui-256, ...")
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    """Exit 0 when every run of the plan ran, 130 when a signal cut the sweep short."""
    if args.analyze is not None:
        from spectui.lab.sweep import load_sweep

        result, _ = load_sweep(args.analyze)
        print_sweep(result, args)
        return 0
    hosts = sweep_hosts(args)
    plan, prompts = sweep_plan(args)
    from spectui.recording.writer import check_run_folder, new_run_folder

    folder = Path(args.out) if args.out else new_run_folder("sweep")
    check_run_folder(folder, "sweep")
    if len(hosts) > 1:
        from spectui.cli.sweep_nodes import sweep_nodes

        return sweep_nodes(plan, prompts, folder, [str(h) for h in hosts], args, print_sweep)
    if not args.headless and not args.json and not args.csv and sys.stdout.isatty() and sys.stdin.isatty():
        from spectui.ui.launch import run_sweep_view  # Textual loads only when the view opens

        return run_sweep_view(plan, prompts, str(folder), max_tokens=args.max_tokens, theme=args.theme, load_engine=host_engines(args.host))

    result = headless_sweep(plan, prompts, folder, args, host=args.host)
    print_sweep(result, args)
    return 0 if result.complete else 130


def headless_sweep(plan: SweepPlan, prompts: list[PromptSpec], folder: Path, args: argparse.Namespace, *, host: str | None) -> SweepResult:
    """The plan into ``folder`` with a progress line, here or on ``host``."""
    from spectui.lab.sweep import run_sweep

    load_engine = host_engines(host)
    with StopOnSignal() as stop, Progress("sweep" if not host else f"sweep on {host}", 1) as bar:

        def on_run(progress: SweepProgress, _result: SweepResult) -> None:
            bar.update(progress.done, progress.current, total=progress.total)

        return run_sweep(plan, prompts, folder, max_tokens=args.max_tokens, stop=stop, on_run=on_run, load_engine=load_engine)


def sweep_hosts(args: argparse.Namespace) -> list[str | None]:
    """The nodes a sweep runs on: ``--hosts`` in order, ``--host``, or this machine ([None])."""
    if args.hosts is not None and args.host:
        raise SpectuiError("--host or --hosts, not both")
    if args.parallel and args.hosts is None:
        raise SpectuiError("--parallel runs the nodes of --hosts at once: name them with --hosts A,B")
    if args.hosts is None:
        return [args.host]
    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
    if not hosts or len(set(hosts)) != len(hosts):
        raise SpectuiError(f"--hosts {args.hosts!r}: name each node once, comma-separated")
    return hosts


def sweep_plan(args: argparse.Namespace) -> tuple[SweepPlan, list[PromptSpec]]:
    """The plan the flags describe and its prompts; ``--max-tokens`` (None: each prompt's own
    ceiling) is applied per run by ``run_sweep``."""
    import msgspec

    from spectui.lab.sweep import SweepPlan, make_points, select_prompts
    from spectui.prompts import list_prompts

    if args.reps < 1:
        raise SpectuiError(f"--reps must be >= 1, got {args.reps}")
    if gave_prompt(args):
        raise SpectuiError("a sweep runs prompts from prompts/: choose them with --tiers or --prompts")
    args.prompt = "sweep"  # the base configuration's prompt is replaced per run
    drafters, grid = _methods_in_draft(args)
    base = msgspec.structs.replace(config_from_args(args), mode="spec", prompt_tier="", prompt_name="")
    prompts = select_prompts(list_prompts(), args.tiers, args.prompts)
    points = make_points(
        k_values=args.k_values, temperatures=args.temperatures, top_k_values=args.top_k_values, drafters=drafters, grid=grid,
    )
    _check_runtime_points(base, points, prompts[0])
    plan = SweepPlan(
        base=base,
        prompts=[p.name for p in prompts],
        tiers={p.name: p.tier for p in prompts},
        points=points,
        repeats=args.reps,
    )
    return plan, prompts


def _methods_in_draft(args: argparse.Namespace) -> tuple[str, bool]:
    """The drafter axis and whether it is a grid: ``--draft runtime:a,runtime:b`` (several
    runtime methods, each with its prefix) sweeps each at every K, as ``--drafters ... --grid``;
    the base configuration then drafts with the first."""
    from spectui.drafting import RUNTIME_PREFIX
    from spectui.lab.sweep import split_drafters

    methods = split_drafters(args.draft or "") if (args.draft or "").startswith(RUNTIME_PREFIX) else []
    if len(methods) < 2:
        return args.drafters, args.grid
    if args.drafters:
        raise SpectuiError("name the methods to sweep once: several in --draft, or --drafters")
    args.draft = methods[0]
    return ",".join(methods), True


def _check_runtime_points(base: RunConfig, points: list[SweepPoint], prompt: PromptSpec) -> None:
    """On llama-server, every point's method is read before the first server starts: an unknown
    method or a setting that cannot work is one line, not a failure half-way through the sweep."""
    from spectui.lab.sweep import point_config

    if base.backend.name != "llama-server":  # its methods table (spectui.runtime.methods) is llama-server's
        return
    from spectui.runtime.session import method_of

    for point in points:
        method_of(point_config(base, point, prompt))


def print_sweep(result: SweepResult, args: argparse.Namespace) -> None:
    import msgspec

    from spectui.lab.sweep_report import format_charts, format_csv, format_table

    if args.json:
        print(msgspec.json.encode(result).decode())
    elif args.csv:
        print(format_csv(result), end="")
    else:
        print(format_table(result))
        charts = format_charts(result) if args.charts or (args.charts is None and sys.stdout.isatty()) else ""
        if charts:
            print(charts)


# -- soak -----------------------------------------------------------------------------------


def _register_soak(sub: argparse._SubParsersAction) -> None:
    from spectui.lab.soak import SoakThresholds  # msgspec and the recording modules: --help stays cheap

    t = SoakThresholds()
    soak = sub.add_parser(
        "soak",
        help="decode back to back for a duration; fail if memory grows (RSS slope) or swap keeps rising",
        description="Without --prompt/--prompt-file/--prompt-name, cycles through every prompt in prompts/ "
        "but quality-*, each with its own token ceiling (--max-tokens overrides them all).",
    )
    add_run_arguments(soak)
    add_host_argument(soak)
    soak.add_argument("--duration", type=float, default=600.0, metavar="S", help="seconds of decoding (default 600)")
    soak.add_argument("--window", type=float, default=t.window_s, metavar="S", help=f"report window in seconds (default {t.window_s:g})")
    soak.add_argument("--out", metavar="DIR", default=None, help="folder for the recordings (default: recordings/soak-<time>/)")
    soak.add_argument(
        "--max-slope-mb-min",
        type=float,
        default=t.max_slope_mib_min,
        metavar="X",
        help=f"fail above this RSS slope, MiB per minute (default {t.max_slope_mib_min:g})",
    )
    soak.add_argument(
        "--min-growth-mb",
        type=float,
        default=t.min_growth_mib,
        metavar="X",
        help=f"...and only when the trend also added more than this many MiB (default {t.min_growth_mib:g})",
    )
    soak.add_argument(
        "--min-window-acceptance",
        type=float,
        default=t.min_window_acceptance,
        metavar="X",
        help=f"acceptance drift: a window below this acceptance is low (default {t.min_window_acceptance:g})",
    )
    soak.add_argument(
        "--max-low-windows",
        type=int,
        default=t.max_low_windows,
        metavar="N",
        help=f"fail after more than N consecutive low windows (default {t.max_low_windows})",
    )
    soak.add_argument("--analyze", metavar="DIR", default=None, help="no decoding: analyse an earlier soak's folder")
    soak.add_argument("--json", action="store_true", help="one JSON object (the folder and the report)")
    soak.set_defaults(func=cmd_soak)


def cmd_soak(args: argparse.Namespace) -> int:
    """Exit 0 when the soak passes; 1 when memory grew, the envelope broke or acceptance drifted
    (see ``spectui.lab.soak_analysis.judge``); 2 on bad input."""
    import msgspec

    from spectui.lab.soak import SoakThresholds, analyze_folder, format_soak_report
    from spectui.recording.writer import new_run_folder

    thresholds = SoakThresholds(
        window_s=args.window,
        max_slope_mib_min=args.max_slope_mb_min,
        min_growth_mib=args.min_growth_mb,
        min_window_acceptance=args.min_window_acceptance,
        max_low_windows=args.max_low_windows,
    )
    thresholds.validate()
    if args.analyze is not None:
        if args.out is not None:
            raise SpectuiError("--analyze reads an earlier soak's folder; --out names a new one: give one of them")
        folder = Path(args.analyze)
    else:
        folder = Path(args.out) if args.out is not None else new_run_folder("soak")
        soak(args, folder)
    report = analyze_folder(folder, thresholds)
    if args.json:
        print(msgspec.json.encode({"folder": str(folder), **msgspec.to_builtins(report)}).decode())
    else:
        print(format_soak_report(report, folder))
    return 0 if report.passed else 1


def soak(args: argparse.Namespace, folder: Path) -> None:
    """Decode into ``folder`` until the duration ends or a signal stops it."""
    from spectui.lab.soak import run_soak, session_configs, soak_prompts
    from spectui.recording.writer import check_run_folder
    from spectui.sessions.open import open_engine

    if not args.duration > 0:
        raise SpectuiError(f"--duration must be > 0 seconds, got {args.duration:g}")
    config = config_from_args(args)
    configs = [config] if gave_prompt(args) else session_configs(config, soak_prompts(), args.max_tokens)
    check_run_folder(folder, "soak")  # before loading a model: a taken folder is the cheaper error
    # run_soak checks every configuration against the engine, then records each session
    with open_engine(config, host=args.host) as engine, StopOnSignal() as stop, Progress("soak", args.duration, unit="s", every_s=10) as bar:
        run = run_soak(engine, configs, duration_s=args.duration, folder=folder, stop=stop, progress=_soak_progress(bar))
    if run.stopped:
        print(f"spectui: soak stopped after {run.elapsed_s:.1f} of {args.duration:g} s; the report covers what ran", file=sys.stderr)
    print(f"spectui: {len(run.paths)} sessions recorded to {folder}", file=sys.stderr)


def _soak_progress(bar: Progress) -> Callable[[float, int, int], None]:  # run_soak's progress callback
    """Seconds soaked of the duration, with the sessions, tokens and this process's RSS so far
    (a terminal redraws the bar; a log gets a line every 10 s)."""
    import psutil

    process = psutil.Process()

    def show(elapsed_s: float, sessions: int, tokens: int) -> None:
        rss = process.memory_info().rss / 2**20
        bar.update(min(elapsed_s, bar.total), f"{counted(sessions, 'session')} | {tokens} tokens | RSS {rss:.1f} MiB")

    return show
