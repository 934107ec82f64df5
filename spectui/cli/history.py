"""``spectui history``: runs across time, hosts and models, from an index of recordings.

The work lives in ``spectui.history`` (index, groups, output); this module parses flags, takes
the floors of the latest sweep through ``spectui.lab`` (which history may not import), and
picks the output. numpy, rich and plotext load inside the command.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys

from spectui.cli.parsing import add_charts_arguments
from spectui.errors import SpectuiError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("history", help="runs across time, hosts and models: trends, artifact changes, stale groups")
    p.add_argument("folders", nargs="*", metavar="DIR", help="folders of recordings, searched recursively (default: the recordings folder)")
    p.add_argument("--json", action="store_true", help="one JSON object: every group, its runs and changes")
    p.add_argument("--index", metavar="PATH", default=None, help="the SQLite index file (default: history.sqlite in the user data folder)")
    p.add_argument("--stale-days", type=float, default=14.0, metavar="N", help="flag groups whose newest run is older than this (default 14)")
    p.add_argument("--last", type=int, default=20, metavar="N", help="table rows per group (0 = every run; charts and JSON have all)")
    add_charts_arguments(p, "every number against time")
    p.set_defaults(func=cmd_history)


def sweep_floors(folder: str) -> list:
    """The floors ``spectui report --floors`` takes from a sweep folder, as history's ``FloorLine``."""
    from spectui.history.trend import FloorLine
    from spectui.lab.sweep import load_sweep
    from spectui.lab.sweep_report import floors_from_sweep

    f = floors_from_sweep(*load_sweep(folder))
    return [FloorLine(x.tier, x.drafter, x.k, x.acceptance_floor, x.decode_tok_s_floor, folder) for x in f.floors]


def default_folders() -> list[str]:
    from spectui.recording.writer import recordings_dir

    return [str(recordings_dir())]


def cmd_history(args: argparse.Namespace) -> int:
    import msgspec

    from spectui.history.render import format_history, history_json
    from spectui.history.trend import load_history
    from spectui.workload.history import find_workloads, series_json, series_text, workload_series

    if args.last < 0:
        raise SpectuiError(f"--last must be >= 0, got {args.last}")
    folders = args.folders or default_folders()
    groups, update = load_history(folders, index=args.index, stale_days=args.stale_days, floors_of=sweep_floors)
    workloads = workload_series(find_workloads(folders, update.notes))
    if args.json:
        doc = msgspec.to_builtins(history_json(groups, update, stale_days=args.stale_days))
        doc["workloads"] = series_json(workloads)
        print(json.dumps(doc))
        return 0
    charts = sys.stdout.isatty() if args.charts is None else args.charts
    width = max(60, min(shutil.get_terminal_size((100, 24)).columns, 160))
    print(format_history(groups, update, stale_days=args.stale_days, last=args.last, charts=charts, width=width), end="")
    print(series_text(workloads, last=args.last), end="")
    return 0
