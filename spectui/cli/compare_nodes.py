"""``spectui compare --hosts A,B``: the same session (prompt and settings) on node A and node B,
side by side.

Each node runs the session on its own engine, one after the other (two "nodes" that share a
machine or a link must not measure each other's load), recorded here into ``OUT/<node>.spectui``
with the node's host facts and fingerprints in the header. Then, in a terminal, the dashboard's
compare screen opens on the two recordings (node A the baseline column, node B the candidate);
headless (``--headless``, or no terminal) the two runs print as ``spectui diff`` prints them:
what differs between the nodes (host, runtime, model files), both runs' numbers side by side,
and whether their outputs agree token by token; ``--json`` gives that as one object.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from spectui.cli.common import StopOnSignal, config_from_args, host_engines
from spectui.cli.progress import Progress
from spectui.cli.sweep_nodes import node_folder
from spectui.errors import SpectuiError


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


def _compare(hosts: list[str], config, folder: Path, args: argparse.Namespace, headless: bool) -> int:  # noqa: ANN001 - a RunConfig
    from spectui.recording.reader import read_recording
    from spectui.sessions.record import record_session

    paths = [folder / (node_folder(Path(), host).name + ".spectui") for host in hosts]
    with StopOnSignal() as stop, Progress("compare", 2) as bar:
        for n, (host, path) in enumerate(zip(hosts, paths)):
            bar.update(n, f"on {host}")
            factory = host_engines(host)
            assert factory is not None
            with factory(config) as engine:
                for _ in record_session(engine, config, path, stop=stop):
                    pass
            if stop.is_set():
                return 130
        bar.update(2, "done")
    recordings = [read_recording(p) for p in paths]
    cut = [f"{h}: {r.events[-1].error}" for h, r in zip(hosts, recordings) if getattr(r.events[-1], "error", "")]
    if headless:
        _print_diff(recordings, args)
    else:
        from spectui.ui.launch import run_compare

        code = run_compare([str(p) for p in paths], record=False, theme=args.theme)
        if code:
            return code
    for line in cut:  # a connection lost mid-run: the run is kept, cut short
        print(f"spectui: error: cut short on node {line}", file=sys.stderr)
    return 1 if cut else 0


def _print_diff(recordings: list, args: argparse.Namespace) -> None:
    import msgspec

    from spectui.compare.diff import diff_recordings, format_diff_text

    d = diff_recordings(*recordings, force=True)  # two nodes' model files may differ: the table says so
    if args.json:
        print(msgspec.json.encode(d).decode())
    else:
        print(format_diff_text(d))
