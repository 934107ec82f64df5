"""``spectui workload FILE``: a person's own traffic against warm servers, at 1..N clients.

Every setting (llama-server with a ``--draft runtime:METHOD``, spectui's embedded drafters, or
a server spectui did not start) runs the whole workload at every level of load, next to its
own AR; the table says, per level, throughput, latency, acceptance, the speedup over the same
text and how many requests came out identical to their AR output at one client, and one line
per setting says up to which load speculation pays. ``--json`` prints one object; ``--analyze
DIR`` reads an earlier run's folder again without any model.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.cli.progress import Progress
from spectui.cli.run_flags import add_run_arguments, config_from_args
from spectui.cli.signals import StopOnSignal
from spectui.errors import SpectuiError

if TYPE_CHECKING:
    from spectui.config import RunConfig
    from spectui.workload.plan import Setting
    from spectui.workload.result import WorkloadResult

RUNTIME_PREFIX = "runtime:"
DEFAULT_DRAFT = "runtime:ngram-mod"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("workload", help="your own requests against warm servers at 1..N clients: speedup, its knee, exactness per request")
    p.add_argument("file", metavar="FILE", nargs="?", default=None,
                   help="a JSONL of OpenAI chat/completions requests, a folder of prompt files or recordings, a recording,"
                        " or a shipped workload by name (mixed-12, code-review, chat-followups, document-qa, summaries)")
    add_run_arguments(p)
    p.add_argument("--clients", default="1,2,4", metavar="N,N,...", help="closed-loop clients per level (default 1,2,4)")
    p.add_argument("--rate", default="", metavar="R,R,...", help="open-loop levels: requests a second, Poisson arrivals")
    p.add_argument("--slots", type=int, default=0, metavar="N", help="requests a server serves at once (default: the most clients of any level)")
    p.add_argument("--warmup", type=int, default=0, metavar="N", help="the workload's first N requests sent to each server before measuring")
    p.add_argument("--passes", type=int, default=1, metavar="N", help="times the workload is sent at each level (later passes meet a warmer server)")
    p.add_argument("--sampling", choices=("greedy", "file"), default="greedy",
                   help="greedy (default: every request judged token by token against AR), or each request's own sampling fields")
    p.add_argument("--ar-server", metavar="URL", default="", help="with --server: the same model served without speculation, the AR to pair with")
    p.add_argument("--hosts", metavar="A,B,...", default=None,
                   help="with --server: send the load from these nodes (ssh destinations, spectui installed there), the clients"
                        " spread over them in turn, every request recorded here")
    p.add_argument("--arrival-seed", type=int, default=0, help="the open loop's arrival times (the same for every setting)")
    p.add_argument("--out", default=None, help="folder for the recordings and workload.json (default recordings/workload-<time>)")
    p.add_argument("--json", action="store_true", help="one JSON object: every level of every setting")
    p.add_argument("--headless", action="store_true", help="no workload view: a progress line, then the table")
    p.add_argument("--theme", default=None, help="the workload view's theme: spectui-dark, spectui-light, spectui-256, ...")
    p.add_argument("--analyze", metavar="DIR", default=None, help="print an earlier workload's folder again (no model)")
    p.set_defaults(func=cmd_workload)


def _ints(text: str, flag: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise SpectuiError(f"{flag} {text}: whole numbers, comma-separated") from None
    if any(v < 1 for v in values):
        raise SpectuiError(f"{flag} {text}: each level needs 1 or more")
    return values


def _rates(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise SpectuiError(f"--rate {text}: numbers, comma-separated") from None
    if any(not (math.isfinite(v) and v > 0) for v in values):
        raise SpectuiError(f"--rate {text}: requests a second must be above 0")
    return values


def settings_from(args: argparse.Namespace) -> list[Setting]:
    """One setting per ``--draft`` item, and each family's AR: ``runtime:METHOD`` on
    llama-server, anything else on the embedded engine; ``--server URL`` alone measures that
    server (with ``--ar-server``, beside its AR)."""
    from spectui.workload.plan import EMBEDDED, LLAMA_SERVER, SERVER, Setting

    def config(**changes: object) -> RunConfig:
        ns = argparse.Namespace(**{**vars(args), "prompt": "(each request's own)", "prompt_name": None, "prompt_file": None,
                                   "max_tokens": args.max_tokens or 128, **changes})
        return config_from_args(ns)

    if args.server:
        served = [Setting(f"server {args.server}", SERVER, config(mode=args.mode or "spec"))]
        if args.ar_server:
            served.append(Setting("server AR", SERVER, config(server=args.ar_server, mode="ar")))
        return served
    if args.ar_server:
        raise SpectuiError("--ar-server pairs with --server URL")
    drafts = [d.strip() for d in (args.draft or DEFAULT_DRAFT).split(",") if d.strip()]
    out: list[Setting] = []
    families: list[str] = []
    for d in drafts:
        if d == "defaults":  # spectui's own defaults on the embedded engine, as `spectui run` has them
            out.append(Setting(f"{EMBEDDED} defaults", EMBEDDED, config(draft=None, runtime=None, mode="spec")))
            families += [EMBEDDED] if EMBEDDED not in families else []
            continue
        on_runtime = d.startswith(RUNTIME_PREFIX) or args.runtime == LLAMA_SERVER
        family = LLAMA_SERVER if on_runtime else EMBEDDED
        if on_runtime and not d.startswith(RUNTIME_PREFIX):
            raise SpectuiError(f"--draft {d}: with --runtime llama-server, name its methods (runtime:ngram-mod, ...)")
        label = f"{family} {d.removeprefix(RUNTIME_PREFIX)}"
        out.append(Setting(label, family, config(draft=d, runtime=LLAMA_SERVER if on_runtime else None, mode="spec")))
        if family not in families:
            families.append(family)
    for family in families:
        ar_args = {"draft": DEFAULT_DRAFT, "runtime": LLAMA_SERVER} if family == LLAMA_SERVER else {"draft": None, "runtime": None}
        out.insert(0, Setting(f"{family} AR", family, config(mode="ar", **ar_args)))
    return out


def analyze(args: argparse.Namespace) -> int:
    """An earlier workload's folder printed again, its requests judged again from their
    recordings by this version's judge (what changed is said, and kept in its workload.json)."""
    import msgspec

    from spectui import storage
    from spectui.workload.judge import rejudge
    from spectui.workload.result import RESULT_NAME, load_result
    from spectui.workload.run import RESULT_KIND

    result = load_result(args.analyze)
    folder = Path(args.analyze) if Path(args.analyze).is_dir() else Path(args.analyze).parent
    changed, why_not = rejudge(folder, result)
    if why_not:
        print(f"spectui: not judged again: {why_not}; the verdicts are as recorded", file=sys.stderr)
    elif changed:
        storage.write_atomic(folder / RESULT_NAME, msgspec.json.encode(result), RESULT_KIND)
        print(f"spectui: judged again from the recordings: {len(changed)} verdict(s) changed (kept in {folder / RESULT_NAME})",
              file=sys.stderr)
        for line in changed:
            print(f"  {line}", file=sys.stderr)
    print_result(result, args)
    return 0


def cmd_workload(args: argparse.Namespace) -> int:
    """Exit 0 when every level ran, 130 when a signal cut it short; a server that died: one
    line and exit 2, with every finished request kept."""
    if args.analyze is not None:
        return analyze(args)
    if args.file is None:
        raise SpectuiError("name a workload: spectui workload FILE (a JSONL of requests, or a folder of prompts)")
    from spectui.recording.writer import check_run_folder, new_run_folder
    from spectui.workload.engines import embedded_noise, open_setting
    from spectui.workload.plan import WorkloadPlan
    from spectui.workload.result import RESULT_NAME
    from spectui.workload.run import WorkloadRun
    from spectui.workload.source import read_workload

    clients = _ints(args.clients, "--clients")
    rates = _rates(args.rate)
    hosts = [h.strip() for h in (args.hosts or "").split(",") if h.strip()]
    if hosts and not args.server:
        raise SpectuiError("--hosts sends the load from several nodes to one server: name it with --server URL")
    if hosts and rates:
        raise SpectuiError("--hosts runs closed loops (--clients): a node's stream carries one request at a time")
    if hosts:
        from spectui.remote.ssh import check_host

        for h in hosts:
            check_host(h)
    workload = read_workload(workload_path(args.file), default_max_tokens=args.max_tokens or 128)
    plan = WorkloadPlan(workload=workload, settings=tuple(settings_from(args)), clients=clients, rates=rates, slots=args.slots,
                        warmup=args.warmup, passes=args.passes, keep_sampling=args.sampling == "file", seed=args.arrival_seed)
    plan.check()
    folder = Path(args.out) if args.out else new_run_folder("workload")
    check_run_folder(folder, "workload")
    if (folder / RESULT_NAME).exists():
        raise SpectuiError(f"{folder} holds a workload already; give this one a new folder")
    opener = functools.partial(open_setting, hosts=hosts) if hosts else open_setting
    if not args.headless and not args.json and sys.stdout.isatty() and sys.stdin.isatty():
        from spectui.ui.launch import run_workload_view  # Textual loads only when the view opens

        _, viewed = run_workload_view(plan, folder, opener, noise=embedded_noise, theme=args.theme)
        if viewed is None:
            return 130
        result = viewed
    else:
        with StopOnSignal() as stop, Progress("workload", 1) as bar:
            run = WorkloadRun(plan, folder, opener, stop=stop, noise=embedded_noise,
                              on_progress=lambda done, total, what: bar.update(done, what, total=total))
            result = run()
    print_result(result, args)
    print(f"spectui: workload recorded in {folder}", file=sys.stderr)
    if result.stopped and result.stopped != "interrupted":
        raise SpectuiError(f"workload stopped: {result.stopped}")
    return 0 if result.complete else 130


def workload_path(name: str) -> str:
    """A path as given, else a shipped workload by name (``mixed-12``: prompts/workloads/mixed-12.jsonl)."""
    from spectui.prompts import prompts_dir

    if os.path.exists(name) or os.sep in name:
        return name
    shipped = prompts_dir() / "workloads" / f"{name}.jsonl"
    return str(shipped) if shipped.is_file() else name


def print_result(result: WorkloadResult, args: argparse.Namespace) -> None:
    from spectui.workload.report import format_result
    from spectui.workload.result import to_json

    if getattr(args, "json", False):
        print(json.dumps(to_json(result), indent=1))
        return
    print(format_result(result))
