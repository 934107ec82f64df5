"""``spectui soak``: decode back to back for a while and judge the memory trend.

Exit 0 when the soak passes, 1 when memory grew (see ``spectui.lab.soak``), 2 on bad input.
``--analyze DIR`` re-reads a soak folder and prints the same report without any model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spectui.errors import SpectuiError


def add_parsers(sub: argparse._SubParsersAction) -> None:
    from spectui.cli import add_run_arguments
    from spectui.lab.soak import SoakThresholds  # msgspec and the recording modules: --help stays cheap

    t = SoakThresholds()
    soak = sub.add_parser(
        "soak",
        help="decode back to back for a duration; fail if memory grows (RSS slope) or swap keeps rising",
        description="Without --prompt/--prompt-file/--prompt-name, cycles through every prompt in prompts/ "
        "but quality-*, each with its own token ceiling (--max-tokens overrides them all).",
    )
    add_run_arguments(soak)
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
    soak.add_argument("--analyze", metavar="DIR", default=None, help="no decoding: analyse an earlier soak's folder")
    soak.add_argument("--json", action="store_true", help="one JSON object (the folder and the report)")


def _progress_printer(duration_s: float):  # noqa: ANN202 - a callback for run_soak
    import psutil

    process = psutil.Process()
    tty = sys.stderr.isatty()
    last = [-1e9]

    def show(elapsed_s: float, sessions: int, tokens: int) -> None:
        # a terminal gets one line redrawn in place; a log gets a line every 10 s
        if not tty and elapsed_s - last[0] < 10:
            return
        last[0] = elapsed_s
        rss = process.memory_info().rss / 2**20
        line = f"spectui: soak {elapsed_s:5.0f}/{duration_s:g} s | {sessions} sessions | {tokens} tokens | RSS {rss:.1f} MiB"
        sys.stderr.write(f"\r{line}\x1b[K" if tty else line + "\n")
        sys.stderr.flush()

    return show


def cmd_soak(args: argparse.Namespace) -> int:
    import msgspec

    from spectui.lab.soak import SoakThresholds, analyze_folder, format_soak_report
    from spectui.recording.writer import new_run_folder

    thresholds = SoakThresholds(window_s=args.window, max_slope_mib_min=args.max_slope_mb_min, min_growth_mib=args.min_growth_mb)
    thresholds.validate()
    if args.analyze is not None:
        if args.out is not None:
            raise SpectuiError("--analyze reads an earlier soak's folder; --out names a new one: give one of them")
        folder = Path(args.analyze)
    else:
        folder = Path(args.out) if args.out is not None else new_run_folder("soak")
        _soak(args, folder)
    report = analyze_folder(folder, thresholds)
    if args.json:
        doc = {"folder": str(folder), **msgspec.to_builtins(report)}
        print(msgspec.json.encode(doc).decode())
    else:
        print(format_soak_report(report, folder))
    return 0 if report.passed else 1


def _soak(args: argparse.Namespace, folder: Path) -> None:
    """Decode into ``folder`` until the duration ends or a signal stops it."""
    from spectui.cli import _StopOnSignal, config_from_args
    from spectui.engine.session import Engine
    from spectui.lab.soak import run_soak, session_configs, soak_prompts
    from spectui.recording.writer import check_run_folder

    if not args.duration > 0:
        raise SpectuiError(f"--duration must be > 0 seconds, got {args.duration:g}")
    config = config_from_args(args)
    one_prompt = args.prompt is not None or args.prompt_file is not None or args.prompt_name is not None
    configs = [config] if one_prompt else session_configs(config, soak_prompts(), args.max_tokens)
    check_run_folder(folder, "soak")
    show = _progress_printer(args.duration)
    with Engine.load(config) as engine, _StopOnSignal() as stop:
        run = run_soak(engine, configs, duration_s=args.duration, folder=folder, stop=stop, progress=show)
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    if run.stopped:
        print(f"spectui: soak stopped after {run.elapsed_s:.1f} of {args.duration:g} s; the report covers what ran", file=sys.stderr)
    print(f"spectui: {len(run.paths)} sessions recorded to {folder}", file=sys.stderr)


COMMANDS = {"soak": cmd_soak}
