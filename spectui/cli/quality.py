"""``spectui quality``: the quality mini-set, AR against speculative.

Every prompt that carries a quality check (the ``prompts/quality-*`` files; see
``spectui.quality``) runs AR and then with the configured speculative setup, ``--repeats``
times with seeds ``seed, seed + 1, ...`` when sampling. Each session is recorded, read back and
graded by ``grade_recording``, the same function the gate uses, so the table printed here and
a later ``spectui gate`` on these files cannot disagree.

Greedy runs once per prompt and mode: repeats would be the same tokens. Greedy speculative
output is the target's own output, so AR and speculative pass rates are identical by
construction; the command checks that the tokens really are identical and says so.

Exit 0 when every session ran (pass rates are reported, not judged: ``spectui gate`` judges),
1 when a session ended in an engine error, 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.cli.host_flag import add_host_argument
from spectui.cli.parsing import JoinComma, add_old_spelling
from spectui.cli.progress import Progress
from spectui.cli.run_flags import add_run_arguments, config_from_args
from spectui.cli.signals import StopOnSignal
from spectui.errors import SpectuiError
from spectui.format import terminal_safe

if TYPE_CHECKING:
    import threading

    from spectui.config import RunConfig
    from spectui.prompts import PromptSpec
    from spectui.quality import PassRate
    from spectui.sessions.protocol import EngineProtocol

MODES = ("ar", "spec")


def register(sub: argparse._SubParsersAction) -> None:
    q = sub.add_parser(
        "quality",
        help="pass rates of the quality mini-set (JSON / tool-call prompts), AR vs speculative",
        description="Runs every prompt in prompts/ that has a quality check, AR and then speculative "
        "(--draft, --k, ... say how; --mode is ignored), records each session and prints the pass "
        "rates with 95% Wilson intervals. --prompt-name NAME runs one prompt, like --prompts NAME.",
    )
    add_run_arguments(q)
    add_host_argument(q)
    q.add_argument("--prompts", default="", metavar="A,B", help="comma-separated quality prompts to run (default: all of them)")
    add_old_spelling(q, "--only", "prompts", nargs="+", metavar="NAME", action=JoinComma)
    q.add_argument("--reps", type=int, default=1, metavar="N", help="sampled runs per prompt and mode, seeds seed..seed+N-1 (default 1)")
    add_old_spelling(q, "--repeats", "reps", type=int)
    q.add_argument("--out", metavar="DIR", default=None, help="folder for the recordings (default: recordings/quality-<time>/)")
    q.add_argument("--json", action="store_true", help="one JSON object (every run, per-prompt and overall rates)")
    q.set_defaults(func=cmd_quality)


def cmd_quality(args: argparse.Namespace) -> int:
    import msgspec

    from spectui.recording.writer import check_run_folder, new_run_folder

    if args.prompt is not None or args.prompt_file is not None:
        raise SpectuiError("quality runs the prompts/ quality set; choose among them with --prompts A,B")
    if args.server:  # a server decodes in one mode of its own: no AR/spec pair here
        raise SpectuiError("quality runs AR and speculative on the embedded engine; --server is not supported")
    if args.reps < 1:
        raise SpectuiError(f"--reps must be >= 1, got {args.reps}")
    only = [n for n in args.prompts.split(",") if n] + ([args.prompt_name] if args.prompt_name is not None else [])
    specs = select_prompts(only or None)
    folder = Path(args.out) if args.out is not None else new_run_folder("quality")
    check_run_folder(folder, "quality run")
    spec_config = mode_configs(args, specs[0])["spec"]  # validates every flag before a model loads
    greedy = spec_config.sampling.greedy
    if greedy and args.reps > 1:
        print(f"spectui: greedy: --reps {args.reps} ignored, every repeat would decode the same tokens", file=sys.stderr)
    runs, stopped = run_quality(args, specs, folder)
    report = quality_report(runs, specs, greedy)
    report["folder"] = str(folder)
    report["speculative"] = spec_config.label()
    report["stopped"] = stopped
    if args.json:
        print(msgspec.json.encode(report).decode())
    else:
        s = spec_config.sampling
        sampling = "greedy" if greedy else f"temperature {s.temperature:g}, seeds {s.seed}..{s.seed + args.reps - 1}"
        print(format_quality_report(report, f"spectui quality: {len(specs)} prompts, AR vs {spec_config.label()}, {sampling}"))
        if stopped:
            print("stopped early: the table covers the sessions that ran")
    print(f"spectui: {len(runs)} sessions recorded to {folder}", file=sys.stderr)
    return 1 if any(r.error for r in runs) else 0


# -- what to run ---------------------------------------------------------------------------


def select_prompts(only: list[str] | None) -> list[PromptSpec]:
    from spectui.prompts import list_prompts, prompts_dir

    specs = [s for s in list_prompts() if s.check]
    if not specs:
        raise SpectuiError(f"no prompt with a quality check in {prompts_dir()}: a quality prompt's header has '# check: json' "
                           "with '# keys: NAME:TYPE, ...', or '# check: tool-call' with '# tools: NAME(ARG:TYPE, ...)'")
    if not only:
        return specs
    by_name = {s.name: s for s in specs}
    unknown = [n for n in only if n not in by_name]
    if unknown:
        raise SpectuiError(f"no quality prompt named {', '.join(unknown)} (known: {', '.join(by_name)})")
    return [by_name[n] for n in dict.fromkeys(only)]


def mode_configs(args: argparse.Namespace, spec: PromptSpec) -> dict[str, RunConfig]:
    """The AR and speculative configurations for one prompt, through the same path as
    ``spectui run --prompt-name NAME`` so the recordings are what a plain run would make."""
    import msgspec

    ns = argparse.Namespace(**{**vars(args), "prompt_name": spec.name, "prompt": None, "prompt_file": None, "mode": "spec"})
    spec_config = config_from_args(ns)
    return {"ar": msgspec.structs.replace(spec_config, mode="ar"), "spec": spec_config}


# -- running -------------------------------------------------------------------------------


@dataclass
class QualityRun:
    prompt: str
    mode: str  # "ar" | "spec"
    seed: int
    passed: bool
    reason: str
    recording: str
    tokens: list[int] = field(default_factory=list, repr=False)
    error: str = ""  # the engine's, when the session ended in an error


def run_quality(args: argparse.Namespace, specs: list[PromptSpec], folder: Path) -> tuple[list[QualityRun], bool]:
    """Run, record and grade every prompt x mode x repeat; (runs, stopped by a signal)."""
    import msgspec

    from spectui.recording.writer import SUFFIX
    from spectui.sessions.open import open_engine

    plans = [(spec, mode_configs(args, spec)) for spec in specs]
    first = plans[0][1]["spec"]
    repeats = 1 if first.sampling.greedy else args.reps
    runs: list[QualityRun] = []
    total = len(plans) * repeats * len(MODES)
    with open_engine(first, host=args.host) as engine, StopOnSignal() as stop, Progress("quality", total) as bar:
        for _, configs in plans:
            for config in configs.values():
                engine.check(config)  # too long for the context: refuse before running any
        for spec, configs in plans:
            for i in range(repeats):
                for mode in MODES:
                    if stop.is_set():
                        return runs, True
                    config = configs[mode]
                    if not config.sampling.greedy:
                        sampling = msgspec.structs.replace(config.sampling, seed=config.sampling.seed + i)
                        config = msgspec.structs.replace(config, sampling=sampling)
                    path = folder / f"{spec.name}.{mode}.seed{config.sampling.seed}{SUFFIX}"
                    bar.update(len(runs), f"{spec.name} {mode} seed {config.sampling.seed}")
                    run = record_and_grade(engine, config, path, stop)
                    if stop.is_set():  # cut short: its output would fail for the wrong reason
                        return runs, True
                    runs.append(run)
                    mark = "pass" if run.passed else "FAIL"
                    bar.note(f"spectui: {spec.name} {mode} seed {run.seed}: {mark} ({run.reason})")
                    if run.error:
                        bar.note(f"spectui: error: the engine failed: {terminal_safe(run.error)}")
    return runs, stop.is_set()


def record_and_grade(engine: EngineProtocol, config: RunConfig, path: Path, stop: threading.Event) -> QualityRun:
    """One session recorded to ``path``, then graded from the file (as the gate will grade it)."""
    from spectui.recording.output import grade_recording, output_tokens
    from spectui.recording.reader import read_recording
    from spectui.recording.schema import End
    from spectui.sessions.record import record_session

    for _ in record_session(engine, config, path, stop=stop):
        pass
    rec = read_recording(path)
    result = grade_recording(rec)
    assert result is not None  # every selected prompt carries a check
    end = rec.events[-1]
    return QualityRun(
        prompt=config.prompt_name,
        mode=config.mode,
        seed=config.sampling.seed,
        passed=result.passed,
        reason=result.reason,
        recording=str(path),
        tokens=output_tokens(rec.events)[0],
        error=end.error if type(end) is End and end.reason == "error" else "",
    )


# -- reporting -----------------------------------------------------------------------------


def _rates(runs: list[QualityRun]) -> dict[str, PassRate]:
    from spectui.quality import PassRate

    return {m: PassRate(sum(r.passed for r in runs if r.mode == m), sum(r.mode == m for r in runs)) for m in MODES}


def _rate_doc(p: PassRate) -> dict:
    lo, hi = p.interval
    return {"passed": p.passed, "n": p.n, "rate": p.rate, "ci_low": lo, "ci_high": hi}


def _pairs(runs: list[QualityRun]) -> tuple[int, int]:
    """(AR/spec pairs with identical tokens, pairs): a pair is one prompt and seed."""
    by_key: dict[tuple[str, int], dict[str, QualityRun]] = {}
    for r in runs:
        by_key.setdefault((r.prompt, r.seed), {})[r.mode] = r
    pairs = [p for p in by_key.values() if len(p) == 2]
    return sum(p["ar"].tokens == p["spec"].tokens for p in pairs), len(pairs)


def quality_report(runs: list[QualityRun], specs: list[PromptSpec], greedy: bool) -> dict:
    from spectui.quality import difference_interval, difference_points

    def row(name: str, check: str, subset: list[QualityRun]) -> dict:
        rates = _rates(subset)
        low, high = difference_interval(rates["ar"], rates["spec"])
        failures = {
            m: dict(Counter(r.reason for r in subset if r.mode == m and not r.passed).most_common()) for m in MODES
        }
        return {
            "prompt": name,
            "check": check,
            "ar": _rate_doc(rates["ar"]),
            "spec": _rate_doc(rates["spec"]),
            "difference_points": difference_points(rates["ar"], rates["spec"]),
            "difference_ci_points": [low, high],
            "failures": failures,
        }

    identical, pairs = _pairs(runs)
    return {
        "greedy": greedy,
        "prompts": [row(s.name, s.check, [r for r in runs if r.prompt == s.name]) for s in specs],
        "overall": row("overall", "", runs),
        "identical_pairs": identical,
        "pairs": pairs,
        "runs": [
            {k: v for k, v in vars(r).items() if k != "tokens"} | {"n_tokens": len(r.tokens)} for r in runs
        ],
    }


def _rate_cell(d: dict) -> str:
    from spectui.quality import PassRate

    return str(PassRate(d["passed"], d["n"]))  # "3/4 75% [30%-95%]", or "n/a" with no runs


def _difference_cell(d: dict) -> str:
    from spectui.format import NA, missing

    pts = d["difference_points"]
    if missing(pts):
        return NA
    low, high = d["difference_ci_points"]
    return f"{pts:+.1f} pt [{low:+.0f}, {high:+.0f}]"


def format_quality_report(report: dict, header: str) -> str:
    from spectui.format import text_table

    rows = [
        [r["prompt"], r["check"].split(";")[0], _rate_cell(r["ar"]), _rate_cell(r["spec"]), _difference_cell(r)]
        for r in [*report["prompts"], report["overall"]]
    ]
    lines = [header, text_table(["prompt", "check", "AR pass", "spec pass", "spec - AR"], rows, indent=2)]
    identical, pairs = report["identical_pairs"], report["pairs"]
    if not report["greedy"]:
        lines.append(f"sampled: {identical} of {pairs} AR/spec pairs (same prompt and seed) are token-identical")
    elif identical == pairs:
        lines.append(f"greedy: {identical} of {pairs} AR/spec pairs are token-identical, so the pass rates are identical")
    else:
        lines.append(f"greedy: only {identical} of {pairs} AR/spec pairs are token-identical: speculative output differs (a bug)")
    lines.append("pass rates with 95% Wilson intervals; spec - AR in percentage points with its 95% interval (Newcombe)")
    failures = [
        f"  {r['prompt']} {m}: {n}x {reason}"
        for r in report["prompts"]
        for m in MODES
        for reason, n in r["failures"][m].items()
    ]
    if failures:
        lines.append("failures:")
        lines += failures
    return "\n".join(lines)
