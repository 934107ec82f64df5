"""``spectui tune --workload FILE``: the runtime setting that pays on a person's own requests,
at their load, checked on requests the search never saw (``spectui.workload.tuning``);
``--analyze DIR`` prints a recorded tune again without a model. Every bad input is one line
before anything is written. In a terminal the tune view shows it as it runs
(``spectui.ui.tune_traffic_view``); ``--headless``, ``--json`` or no terminal: a progress line.
Either way the result is then printed the same."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.cli.run_flags import config_from_args
from spectui.cli.signals import StopOnSignal
from spectui.errors import SpectuiError

if TYPE_CHECKING:
    from spectui.config import RunConfig
    from spectui.tune.traffic_report import TrafficResult
    from spectui.tune.traffic_space import Applicable
    from spectui.workload.tuning import TrafficTune  # the workload's runner loads engines: imported on use

#: the whole tune's minutes unless --budget says otherwise
BUDGET_MIN = 15.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workload", metavar="FILE", default=None,
                   help="tune the runtime's settings on your own requests (anything spectui workload reads, or a shipped"
                        " workload by name): search on half of them, report on the other half")
    p.add_argument("--clients", type=int, default=None, metavar="N", help="--workload: the load to tune for, closed-loop clients (default 1)")
    p.add_argument("--rate", type=float, default=None, metavar="R", help="--workload: the load to tune for, requests a second (Poisson)")
    p.add_argument("--budget", type=float, default=BUDGET_MIN, metavar="MINUTES",
                   help=f"--workload: minutes for the whole tune, search and check (default {BUDGET_MIN:g})")
    p.add_argument("--save-profile", metavar="NAME", default=None,
                   help="--workload: write the advised setting as [profile.NAME] into your own config file")
    p.add_argument("--out", metavar="DIR", default=None, help="--workload: the folder for everything it records (default recordings/tune-<time>)")
    p.add_argument("--headless", action="store_true", help="--workload: no tune view: a progress line, then the result")
    p.add_argument("--theme", default=None, help="--workload: the tune view's theme: spectui-dark, spectui-light, spectui-256, ...")
    p.add_argument("--analyze", metavar="DIR", default=None, help="print a recorded tune --workload folder again (no model)")


def wanted(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "workload", None) or getattr(args, "analyze", None))


def cmd_tune_workload(args: argparse.Namespace) -> int:
    from spectui.tune.traffic_report import load

    if args.analyze:
        _print(load(args.analyze), args, args.analyze)
        return 0
    tune = prepare(args)
    if viewed(args):
        from spectui.ui.launch import run_tune_traffic_view  # Textual loads only when the view opens

        code, shown = run_tune_traffic_view(tune, theme=getattr(args, "theme", None))
        if shown is None:
            return code
        result = shown
    else:
        with StopOnSignal() as stop:
            tune.stop = stop
            result = tune()
    _print(result, args, str(tune.folder))
    if args.save_profile and not result.stopped.startswith("stopped"):
        _save_profile(args, result, tune.draft_model)
    return 0 if result.complete else 130


def viewed(args: argparse.Namespace) -> bool:
    """The tune view, as ``spectui workload`` decides: in a terminal, unless --headless or --json."""
    return not getattr(args, "headless", False) and not args.json and sys.stdout.isatty() and sys.stdin.isatty()


def prepare(args: argparse.Namespace) -> TrafficTune:
    """Everything checked, nothing written: the tune, ready to run."""
    from spectui.cli.workload import workload_path
    from spectui.recording.writer import check_run_folder, new_run_folder
    from spectui.tune.traffic_search import check_budget, min_budget_s
    from spectui.tune.traffic_space import build_space
    from spectui.workload.source import read_workload
    from spectui.workload.tuning import TrafficTune, halves, tokens

    clients = 1 if args.clients is None else args.clients
    if clients < 1:
        raise SpectuiError(f"--clients {clients}: the load to tune for needs 1 client or more")
    rate = 0.0
    if args.rate is not None:
        if args.clients is not None:
            raise SpectuiError("--clients or --rate: tune for one load at a time")
        if not (math.isfinite(args.rate) and args.rate > 0):
            raise SpectuiError(f"--rate {args.rate:g}: requests a second must be above 0")
        rate = args.rate
    if not (math.isfinite(args.budget) and args.budget > 0):
        raise SpectuiError(f"--budget {args.budget:g}: minutes above 0")
    if args.runtime not in (None, "llama-server"):
        raise SpectuiError(f"tune --workload tunes llama-server's methods and knobs; --runtime {args.runtime} has one method"
                           " (compare it on your workload: spectui workload FILE --runtime mlx-lm)")
    if args.save_profile is not None:
        _check_profile_name(args.save_profile)
    workload = read_workload(workload_path(args.workload), default_max_tokens=args.max_tokens or 128)
    tuning, check = halves(workload)  # too few to split: one line, before the runtime is looked for
    check_budget(args.budget * 60, min_budget_s(tokens(tuning), tokens(check), 1))
    config = _base_config(args)
    where, draft_model = _applicable(config, args)
    methods = [m.strip().removeprefix("runtime:") for m in (args.draft or "").split(",") if m.strip()]
    cands = build_space(where, methods=methods)
    by_method: dict[str, int] = {}
    for c in cands:
        key = c.method if len(c.types) == 1 else "chains of two"
        by_method[key] = by_method.get(key, 0) + 1
    folder = Path(args.out) if args.out else new_run_folder("tune")
    check_run_folder(folder, "tune")
    tune = TrafficTune(base=config, workload=workload, candidates=cands, folder=folder, budget_s=args.budget * 60,
                       clients=clients, rate=rate, draft_model=draft_model, space_by_method=by_method,
                       progress=lambda line: print(f"spectui tune: {line}", file=sys.stderr, flush=True))
    if (folder / "tune-traffic.json").exists():
        raise SpectuiError(f"{folder} holds a tune already; give this one a new folder")
    return tune


def _base_config(args: argparse.Namespace) -> RunConfig:
    ns = argparse.Namespace(**{**vars(args), "prompt": "(each request's own)", "prompt_name": None, "prompt_file": None,
                               "max_tokens": args.max_tokens or 128, "draft": None, "runtime": "llama-server", "mode": "spec",
                               "k": None, "lookup": 0, "n_min": None, "p_min": None})
    config = config_from_args(ns)
    if not config.sampling.greedy:
        raise SpectuiError("tune --workload measures greedy decoding (every request judged token by token); drop --temperature")
    return config


def _applicable(config: RunConfig, args: argparse.Namespace) -> tuple[Applicable, str]:
    """The binary's ``--spec-type`` list and the models': which methods apply. A runtime that is
    not there is one line (tune does not build one: ``spectui runtime build`` does)."""
    from spectui.engine.host.weights import resolve_target
    from spectui.models.gguf import read_gguf
    from spectui.runtime.build import BuildError, find_server
    from spectui.runtime.llama_server import accepted_types
    from spectui.runtime.methods import no_nextn_reason
    from spectui.tune.traffic_space import Applicable

    try:
        binary = find_server(config.backend.runtime_binary or None, build=False)
    except BuildError as exc:
        raise SpectuiError(f"the runtime is not there: {exc}") from None
    accepted = accepted_types(binary.path)
    if not accepted:
        raise SpectuiError(f"{binary.path} lists no --spec-type: a llama-server older than llama.cpp's speculative types")
    target = resolve_target(config.target, config.backend).path
    draft_model = ""
    arch = ""
    if args.draft_model:
        from spectui.cli.run_flags import model_path

        draft_model = model_path(args.draft_model)
        arch = read_gguf(draft_model).architecture or "*"
    return Applicable(accepted=accepted, draft_arch=arch, nextn=not no_nextn_reason(read_gguf(target))), draft_model


def _check_profile_name(name: str) -> None:
    import re

    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
        raise SpectuiError(f"--save-profile {name!r}: a profile name is letters, digits, - and _")
    from spectui.profiles import read_config
    from spectui.tune.traffic_profile import user_file

    f = read_config(user_file(), "user") if user_file().exists() else None
    if f is not None and name in f.data.get("profile", {}):
        raise SpectuiError(f"--save-profile {name}: {user_file()} has [profile.{name}] already; pick another name")


def _save_profile(args: argparse.Namespace, result: TrafficResult, draft_model: str) -> None:
    from spectui.tune.traffic_profile import save_profile
    from spectui.tune.traffic_report import advised

    pick = advised(result)
    path = save_profile(args.save_profile, None if pick is None else pick.candidate, draft_model=draft_model,
                        target=args.target or "", why=f"spectui tune --workload {result.workload} at {result.load}")
    print(f"spectui: [profile.{args.save_profile}] written to {path} (use it: --profile {args.save_profile})", file=sys.stderr)


def _print(result: TrafficResult, args: argparse.Namespace, folder: str) -> None:
    from spectui.tune.traffic_report import format_text, to_json

    if args.json:
        print(json.dumps(to_json(result), indent=1, allow_nan=False))
    else:
        print(format_text(result, folder))
