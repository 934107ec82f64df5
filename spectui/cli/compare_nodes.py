"""``spectui compare --hosts A,B``: the same session (prompt and settings) on node A and node B,
side by side.

Each node runs the session on its own engine, one after the other (two "nodes" that share a
machine or a link must not measure each other's load), recorded here into ``OUT/<node>.spectui``
with the node's host facts and fingerprints in the header. In a terminal both stream live into
the dashboard's compare screen (node A the baseline column, node B the candidate), and ``r``
there runs them again (``-2``, ``-3``... recordings); headless (``--headless``, or no terminal)
the two runs print as ``spectui diff`` prints them: what differs between the nodes (host,
runtime, model files), both runs' numbers side by side, and whether their outputs agree token
by token; ``--json`` gives that as one object.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.cli.host_flag import host_engines
from spectui.cli.progress import Progress
from spectui.cli.run_flags import config_from_args
from spectui.cli.signals import StopOnSignal
from spectui.cli.sweep_nodes import node_folder
from spectui.errors import SpectuiError
from spectui.format import terminal_safe

if TYPE_CHECKING:
    from spectui.config import RunConfig
    from spectui.recording.reader import Recording


def compare_hosts(args: argparse.Namespace) -> list[str]:
    """The two nodes of ``--hosts``, refused in one line unless two distinct ones."""
    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
    if len(hosts) != 2 or hosts[0] == hosts[1]:
        raise SpectuiError(f"--hosts {args.hosts!r}: name two nodes, comma-separated (node A, then node B)")
    if args.files:
        raise SpectuiError("--hosts runs the session on two nodes: give no recordings (to compare two files: spectui compare A B)")
    if args.host:
        raise SpectuiError("--host or --hosts, not both")
    if args.interleave:
        raise SpectuiError("--interleave runs two sessions on one engine here; with --hosts each node runs its own, one after the other")
    return hosts


def cmd_compare_nodes(args: argparse.Namespace) -> int:
    """Exit 0 when both nodes ran the session, 130 when a signal stopped it (what ran is kept)."""
    hosts = compare_hosts(args)
    config = config_from_args(args)
    headless = args.headless or args.json or not (sys.stdout.isatty() and sys.stdin.isatty())
    if args.no_record:
        with tempfile.TemporaryDirectory(prefix="spectui-compare-") as tmp:
            return _compare(hosts, config, Path(tmp), args, headless)
    from spectui.recording.writer import check_run_folder, new_run_folder

    folder = Path(args.out) if args.out else new_run_folder("compare-nodes")
    check_run_folder(folder, "comparison")
    return _compare(hosts, config, folder, args, headless)


def _compare(hosts: list[str], config: RunConfig, folder: Path, args: argparse.Namespace, headless: bool) -> int:
    from spectui.recording.reader import read_recording
    from spectui.recording.schema import End

    if headless:
        paths = [folder / (node_folder(Path(), host).name + ".spectui") for host in hosts]
        if _in_turn(hosts, config, paths):
            return 130
        recordings = [read_recording(p) for p in paths]
        _print_diff(recordings, args)
    else:
        code, paths = _live(hosts, config, folder, args)
        if code:
            return code
        recordings = [read_recording(p) for p in paths if p.exists()]
    ends = [(r, r.events[-1]) for r in recordings]
    cut = [f"{r.header.node}: {end.error}" for r, end in ends if type(end) is End and end.error]
    for line in cut:  # a connection lost mid-run: the run is kept, cut short
        print(f"spectui: error: cut short on node {terminal_safe(line)}", file=sys.stderr)
    return 1 if cut else 0


def _in_turn(hosts: list[str], config: RunConfig, paths: list[Path]) -> bool:
    """Record the session on each node in turn into ``paths``; True when a signal stopped it."""
    from spectui.sessions.record import record_session

    with StopOnSignal() as stop, Progress("compare", 2) as bar:
        for n, (host, path) in enumerate(zip(hosts, paths)):
            bar.update(n, f"on {host}")
            factory = host_engines(host)
            assert factory is not None
            with factory(config) as engine:
                for _ in record_session(engine, config, path, stop=stop):
                    pass
            if stop.is_set():
                return True
        bar.update(2, "done")
    return False


def _live(hosts: list[str], config: RunConfig, folder: Path, args: argparse.Namespace) -> tuple[int, list[Path]]:
    """The dashboard on node A (its own engine service) beside node B's, which starts the pair
    when it opens; the exit code and the recordings made, in the order they were made."""
    from spectui.recording.writer import free_path
    from spectui.sessions.runner import SessionRunner
    from spectui.ui.launch import run_compare
    from spectui.ui.runs.pairs import NodePair

    made: list[Path] = []

    def namer(host: str) -> Callable[[RunConfig], Path]:  # a RecordingNamer (spectui.ui.runs.base)
        stem = node_folder(Path(), host).name

        def name(_config: RunConfig) -> Path:
            made.append(free_path(folder, stem))  # called on the engine thread right before the file is made
            return made[-1]

        return name

    versus = NodePair(SessionRunner(host_engines(hosts[1])), record_to=(namer(hosts[0]), namer(hosts[1])))
    code = run_compare([], config=config, engine_factory=host_engines(hosts[0]), versus=versus, theme=args.theme)
    return code, made


def _print_diff(recordings: list[Recording], args: argparse.Namespace) -> None:
    import msgspec

    from spectui.compare.diff import diff_recordings
    from spectui.compare.diff_format import format_diff_text

    d = diff_recordings(*recordings, force=True)  # two nodes' model files may differ: the table says so
    if args.json:
        print(msgspec.json.encode(d).decode())
    else:
        print(format_diff_text(d))
