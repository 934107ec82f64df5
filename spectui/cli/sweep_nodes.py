"""``spectui sweep --hosts a,b,c``: one frozen plan on several nodes, in turn or ``--parallel``.

Each node runs the whole plan on its own engine into ``OUT/<node>/`` (a folder name made from
the ssh destination), recorded here as every ``--host`` run is. In turn, one node after the
other; with ``--parallel``, every node at once, one thread each: the engines run on the nodes,
so this machine only reads their streams and writes their recordings (running two "nodes" that
are really this machine is slow, and measures each other's load). One progress line counts the
runs of all nodes; the tables, one per node, come at the end.

A node that fails (unreachable, refused, its connection lost mid-run) costs only its own
results: the others run on, their tables are printed, and the failure is one line on stderr
naming the node; the exit status is then 1. A signal stops every node after its current step
(exit 130), keeping what each recorded.
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.cli.host_flag import host_engines
from spectui.cli.progress import Progress
from spectui.cli.signals import StopOnSignal
from spectui.errors import SpectuiError
from spectui.format import terminal_safe

if TYPE_CHECKING:
    from spectui.lab.sweep import SweepPlan, SweepProgress, SweepResult
    from spectui.prompts import PromptSpec

#: How often the main thread wakes while nodes run in parallel (signals are handled there).
_JOIN_POLL_S = 0.2


@dataclass
class NodeSweep:
    """One node's part of the sweep: its folder, what it recorded, and why it failed ("": it did not)."""

    host: str
    folder: Path
    result: SweepResult | None = None
    error: str = ""


def node_folder(folder: Path, host: str) -> Path:
    """A node's subfolder: its ssh destination as a folder name (user@host:port, ssh:// URLs)."""
    return folder / (re.sub(r"[^A-Za-z0-9._+-]+", "-", host).strip("-.") or "node")


def sweep_nodes(plan: SweepPlan, prompts: list[PromptSpec], folder: Path, hosts: list[str], args: argparse.Namespace,
                print_sweep: Callable[[SweepResult, argparse.Namespace], None]) -> int:  # fmt: skip
    """Exit 0 when every node ran the whole plan, 1 when a node failed, 130 when a signal cut it
    short. ``print_sweep`` prints one node's table (``spectui.cli.lab``'s, handed in: lab starts
    this module)."""
    import msgspec

    from spectui.recording.writer import check_run_folder

    nodes = [NodeSweep(host, node_folder(folder, host)) for host in hosts]
    for node in nodes:
        check_run_folder(node.folder, "sweep")
    how = "at once" if args.parallel else "in turn"
    with StopOnSignal() as stop, Progress(f"sweep on {len(nodes)} nodes {how}", plan.total_runs * len(nodes)) as bar:
        counter = _Counter(bar, hosts)
        if args.parallel:
            _in_parallel(nodes, plan, prompts, args, stop, counter)
        else:
            for node in nodes:
                if stop.is_set():
                    break
                _sweep_node(node, plan, prompts, args, stop, counter)
    ran = [(n, n.result) for n in nodes if n.result is not None]
    if args.json:
        doc = {"nodes": {n.host: result for n, result in ran}, "failed": {n.host: n.error for n in nodes if n.error}}
        print(msgspec.json.encode(doc).decode())
    else:
        for n, result in ran:
            print(f"== node {n.host} ({n.folder}){' (failed: see below)' if n.error else ''}")
            print_sweep(result, args)
    for n in nodes:
        if n.error:
            print(f"spectui: error: the sweep on node {n.host} failed: {terminal_safe(n.error)}", file=sys.stderr)
    if stop.is_set():
        return 130
    return 1 if any(n.error for n in nodes) else 0


class _Counter:
    """The runs done on every node, on one progress line (nodes report from their threads)."""

    def __init__(self, bar: Progress, hosts: list[str]) -> None:
        self.bar = bar
        self.done = dict.fromkeys(hosts, 0)
        self.lock = threading.Lock()

    def __call__(self, host: str, progress: SweepProgress) -> None:
        with self.lock:
            self.done[host] = progress.done
            self.bar.update(sum(self.done.values()), f"{host}: {progress.current}" if progress.current else f"{host} done")


def _in_parallel(nodes: list[NodeSweep], plan: SweepPlan, prompts: list[PromptSpec], args: argparse.Namespace,
                 stop: threading.Event, counter: _Counter) -> None:  # fmt: skip
    threads = [
        threading.Thread(target=_sweep_node, args=(n, plan, prompts, args, stop, counter), name=f"spectui-sweep-{n.host}", daemon=True)
        for n in nodes
    ]  # daemon: a second Ctrl-C (KeyboardInterrupt here) must not wait for a stuck node
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(_JOIN_POLL_S)


def _sweep_node(node: NodeSweep, plan: SweepPlan, prompts: list[PromptSpec], args: argparse.Namespace,
                stop: threading.Event, counter: _Counter) -> None:  # fmt: skip
    """The plan on one node; whatever goes wrong stays this node's (its one line in ``error``)."""
    from spectui.lab.sweep import run_sweep

    def on_run(progress: SweepProgress, _result: SweepResult) -> None:
        counter(node.host, progress)

    try:
        node.result = run_sweep(
            plan, prompts, node.folder, max_tokens=args.max_tokens, stop=stop, on_run=on_run, load_engine=host_engines(node.host)
        )
    except SpectuiError as exc:
        node.error = str(exc)
    except Exception as exc:  # noqa: BLE001 - in a thread: the other nodes' results must still be printed
        node.error = f"{type(exc).__name__}: {exc}"
    else:
        if not node.result.complete and not stop.is_set():
            node.error = _cut_short(node.folder, len(node.result.runs), plan.total_runs)
    if node.result is None and node.error:
        node.result = _recorded_so_far(node.folder)
    if node.result is not None and not node.result.runs and node.error:
        node.result = None  # failed before its first run: no table to print


def _recorded_so_far(folder: Path) -> SweepResult | None:
    """What a node recorded before it failed, from its folder's manifest (None: nothing)."""
    from spectui.lab.sweep import MANIFEST, load_sweep

    if not (folder / MANIFEST).is_file():
        return None
    try:
        return load_sweep(folder)[0]
    except SpectuiError:
        return None


def _cut_short(folder: Path, index: int, total: int) -> str:
    """Why a node's sweep stopped early though nobody asked: its last run's end (the recording
    of a cut run is kept on disk, out of the table)."""
    from spectui.recording.reader import read_recording
    from spectui.recording.schema import End

    why = ""
    for path in sorted(folder.glob(f"{index:04d}-*.spectui")):
        try:
            end = read_recording(path).events[-1]
        except (SpectuiError, OSError, IndexError):
            continue
        if type(end) is End and end.error:
            why = f": {end.error}"
    return f"cut short after {index} of {total} runs{why}"
