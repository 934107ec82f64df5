"""Commands on recordings, no model needed: ``report``, ``diff``, ``gate`` and ``export``
(OpenTelemetry, or redacted copies: ``--redact``).

The work lives below (``spectui.report``, ``spectui.compare``, ``spectui.telemetry``); this
module parses flags, reads files (every one before anything is printed or written) and picks
the output format. OpenTelemetry is imported only when something is exported.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from spectui.cli.inputs import read_recordings
from spectui.cli.parsing import otlp_endpoint, output_path
from spectui.cli.run_flags import add_envelope_arguments
from spectui.errors import SpectuiError

if TYPE_CHECKING:
    from spectui.lab.sweep_report import Floors
    from spectui.recording.reader import Recording

#: ``spectui gate`` flags: each is the ``GateThresholds`` field of the same name.
GATE_KNOBS = [
    ("min_speedup", float, "median decode tok/s, candidate / baseline"),
    ("min_acceptance", float, "median acceptance rate of speculative candidates"),
    ("expected_k", int, "the K the acceptance threshold is meant for"),
    ("max_ttft_growth", float, "TTFT growth allowed on short prompts (0.08 = +8%%)"),
    ("max_p95_itl_ratio", float, "candidate / baseline p95 inter-token latency"),
    ("p95_itl_tolerance", float, "noise allowance on that ratio"),
    ("max_quality_drop_points", float, "sampled runs: quality pass-rate drop allowed, in percentage points"),
    ("min_window_acceptance", float, "acceptance drift: a window below this acceptance is low"),
    ("max_low_windows", int, "acceptance drift: consecutive low windows allowed"),
    ("window_s", float, "acceptance drift: window length, seconds"),
]
#: envelope flags of ``gate`` (``add_envelope_arguments``): flag dest -> ``GateThresholds`` field
GATE_ENVELOPE = {
    "min_headroom_mb": "min_headroom_mib",
    "max_swap_in_mb": "max_swap_in_mib",
    "max_red_pressure_s": "max_red_pressure_s",
    "max_throttle_events": "max_throttle_events",
    "max_other_cpu": "max_other_cpu",
}


def register(sub: argparse._SubParsersAction) -> None:
    from spectui.compare.thresholds import GateThresholds  # msgspec only: --help stays cheap

    report = sub.add_parser("report", help="summarise a recording: speed, latency, acceptance, memory, artifacts")
    report.add_argument("file", help="a recording (.spectui), a spectui workload folder; with --floors, a sweep folder")
    report.add_argument("--json", action="store_true", help="one JSON object with the header and the summary")
    report.add_argument(
        "--redact",
        action="store_true",
        help="leave out the prompt, system prompt, conversation and token texts and ids (what export --redact writes)",
    )
    report.add_argument(
        "--floors",
        action="store_true",
        help="FILE is a sweep folder: print the acceptance floor, tok/s floor and swap ceiling per tier (--json: a floors file for diff)",
    )
    report.set_defaults(func=cmd_report)

    diff = sub.add_parser("diff", help="baseline vs candidate recording: artifacts, outputs, speedup, acceptance, memory")
    diff.add_argument("baseline", metavar="BASELINE", help="the recording to compare against (usually AR)")
    diff.add_argument("candidate", metavar="CANDIDATE", help="the recording to judge (usually speculative)")
    fmt = diff.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="one JSON object (the whole diff)")
    fmt.add_argument("--markdown", action="store_true", help="GitHub markdown tables")
    diff.add_argument("--force", action="store_true", help="compare even with different prompt tokens or target weights")
    diff.add_argument(
        "--floors", metavar="FILE", default=None, help="also check the candidate against a floors file (exit 1 if one is broken)"
    )
    diff.set_defaults(func=cmd_diff)

    defaults = GateThresholds()
    gate = sub.add_parser("gate", help="pass/fail for production: speedup, p95 ITL, acceptance, TTFT, outputs, and the machine envelope")
    gate.add_argument("--baseline", nargs="+", metavar="FILE", help="baseline recordings (usually AR)")
    gate.add_argument("--candidate", nargs="+", metavar="FILE", help="candidate recordings (usually speculative)")
    gate.add_argument("--workload", metavar="DIR", default=None,
                      help="instead of recordings: a spectui workload folder, judged for --setting at --clients (or --rate):"
                           " its speedup over the same text (--min-speedup) and requests judged a defect (--max-defects)")
    gate.add_argument("--setting", default="", help="with --workload: the setting judged (e.g. ngram-mod)")
    gate.add_argument("--clients", type=int, default=1, help="with --workload: the level judged (default 1)")
    gate.add_argument("--rate", type=float, default=0.0, help="with --workload: an open-loop level judged instead")
    gate.add_argument("--max-defects", type=int, default=0, help="with --workload: requests judged a defect allowed (default 0)")
    for field, kind, text in GATE_KNOBS:
        default = getattr(defaults, field)
        gate.add_argument(
            "--window" if field == "window_s" else "--" + field.replace("_", "-"),  # as soak names it
            dest=field,
            type=kind,
            default=default,
            metavar="K" if kind is int else "X",
            help=f"{text} (default {default})",
        )
    gate.add_argument(
        "--allow-unverified-quality", action="store_true", help="sampled runs: do not fail on the unmeasured quality check"
    )
    gate.add_argument("--max-energy-ratio", type=float, default=None, metavar="X",
                      help="candidate / baseline joules per generated token must be <= X (default: no limit; the check"
                      " fails where a run has no energy counter, unless --energy-optional)")
    gate.add_argument("--energy-optional", action="store_true",
                      help="a --max-energy-ratio that cannot be checked (no energy counter where a run was recorded) is n/a, not a failure")
    add_envelope_arguments(gate, override=True)
    gate.add_argument("--json", action="store_true", help="one JSON object (the verdict)")
    gate.set_defaults(func=cmd_gate)

    export = sub.add_parser("export", help="recordings as OpenTelemetry spans and metrics: JSON lines or an OTLP/HTTP endpoint")
    export.add_argument("files", nargs="+", metavar="FILE", help="recordings (each becomes one trace)")
    export.add_argument("--otel-json", action="store_true", help="JSON lines: one object per span and per metrics export")
    export.add_argument("-o", "--output", metavar="OUT.jsonl", type=output_path, default=None,
                        help="where the JSON lines go (default: stdout; implies --otel-json)")
    export.add_argument("--otel-endpoint", metavar="URL", type=otlp_endpoint, default=None,
                        help="OTLP/HTTP collector base URL (e.g. http://127.0.0.1:4318)")
    export.add_argument(
        "--redact",
        action="store_true",
        help="write a copy of each recording (or folder of them) without its text: prompt, system prompt, conversation,"
        " token texts and ids; timings, acceptance, memory and fingerprints stay (into -o DIR, default ./redacted-<time>/;"
        " -o NAME.spectui for one recording)",
    )
    export.add_argument("--json", action="store_true",
                        help="one JSON object on stdout saying what went where (the JSON lines then need -o or --otel-endpoint)")
    export.set_defaults(func=cmd_export)


# -- report ---------------------------------------------------------------------------------


def cmd_report(args: argparse.Namespace) -> int:
    import msgspec

    from spectui.report import format_report, report_json

    if args.floors:
        if args.redact:
            raise SpectuiError("--redact applies to a recording's report; a sweep's floors (--floors) hold no text")
        return report_floors(args)
    if os.path.isdir(args.file) and os.path.isfile(os.path.join(args.file, "workload.json")):
        return report_workload(args)
    (rec,) = read_recordings([args.file], watches=True)  # a watch has its own report (spectui.watch.summary)
    if args.redact and rec.header.redaction is None:
        from spectui.recording.redact import redact_recording

        rec = redact_recording(rec)
    print(msgspec.json.encode(report_json(rec)).decode() if args.json else format_report(rec))
    return 0


def report_workload(args: argparse.Namespace) -> int:
    """A ``spectui workload`` folder: its table, knees and partings (or its JSON)."""
    from spectui.workload.report import format_result
    from spectui.workload.result import load_result, to_json

    if args.redact:
        raise SpectuiError("--redact applies to a recording's report; export the workload's recordings with spectui export --redact")
    result = load_result(args.file)
    print(json.dumps(to_json(result)) if args.json else format_result(result))
    return 0


def report_floors(args: argparse.Namespace) -> int:
    import msgspec

    from spectui.lab.sweep import load_sweep
    from spectui.lab.sweep_report import floors_from_sweep, format_floors
    from spectui.models.artifacts import host_info

    if not os.path.isdir(args.file):
        raise SpectuiError(f"--floors reads a sweep folder (spectui sweep --out DIR); {args.file} is not a folder")
    result, summaries = load_sweep(args.file)
    h = host_info()
    floors = floors_from_sweep(result, summaries, host=f"{h.cpu} x{h.cpu_count}")
    if not floors.floors:
        raise SpectuiError(f"{args.file}: the sweep has no K points to take floors from")
    print(msgspec.json.encode(floors).decode() if args.json else format_floors(floors))
    return 0


# -- diff and gate --------------------------------------------------------------------------


def cmd_diff(args: argparse.Namespace) -> int:
    """Exit 0 whenever the two runs were compared, outputs identical or not; 1 when the
    candidate broke a floor of ``--floors``."""
    import msgspec

    from spectui.compare.diff import diff_json, diff_recordings
    from spectui.compare.diff_format import format_diff_markdown, format_diff_text

    floors = None
    if args.floors is not None:
        from spectui.lab.sweep_report import read_floors

        floors = read_floors(args.floors)
    baseline, candidate = read_recordings([args.baseline, args.candidate])
    d = diff_recordings(baseline, candidate, force=args.force)
    floor_lines, broken = check_against_floors(floors, candidate) if floors is not None else ([], False)
    if args.json:
        doc = diff_json(d)
        if floors is not None:
            doc["floors"] = floor_lines
        print(msgspec.json.encode(doc).decode())
    elif args.markdown:
        print(format_diff_markdown(d), end="")
        if floor_lines:
            print("\n### Floors\n\n" + "\n".join(f"- {line}" for line in floor_lines))
    else:
        print(format_diff_text(d))
        if floor_lines:
            print("-- floors " + "-" * 40 + "\n" + "\n".join(f"  {line}" for line in floor_lines))
    return 1 if broken else 0


def check_against_floors(floors: Floors, rec: Recording) -> tuple[list[str], bool]:
    """The candidate against the floor of its tier: one line per check, and whether one broke."""
    from spectui.lab.sweep_report import check_floors
    from spectui.metrics.stats import summarize

    c = rec.header.config
    # a floor names its drafter as the sweep's --drafters did: "ngram" or the draft GGUF path
    floor, checks = check_floors(floors, c.prompt_tier, c.draft.flag, c.draft.fixed_k or 0, summarize(rec.events))
    if floor is None:
        return [f"no floor for tier {c.prompt_tier or '(none)'} in {floors.source}"], False
    lines = [f"floor of tier {floor.tier}, {floor.drafter} K={floor.k} ({floor.runs} runs of {floors.source})"]
    lines += [f"{'pass' if ch.passed else 'FAIL'}  {ch.text}" for ch in checks]
    return lines, not all(ch.passed for ch in checks)


def cmd_gate(args: argparse.Namespace) -> int:
    """Exit 0 pass, 1 fail (2, unusable input, comes from SpectuiError)."""
    import msgspec

    from spectui.compare.gate import GateThresholds, format_verdict_text, gate

    t = GateThresholds(
        **{field: getattr(args, field) for field, _, _ in GATE_KNOBS},
        allow_unverified_quality=args.allow_unverified_quality,
        max_energy_ratio=args.max_energy_ratio,
        energy_optional=args.energy_optional,
        **{field: getattr(args, dest) for dest, field in GATE_ENVELOPE.items()},
    )
    t.validate()  # before reading files: a typo in a threshold is the cheaper error to report
    if args.workload is not None:
        return gate_workload_folder(args)
    if not args.baseline or not args.candidate:
        raise SpectuiError("gate needs --baseline FILE... and --candidate FILE... (or --workload DIR)")
    verdict = gate(read_recordings(args.baseline), read_recordings(args.candidate), t)
    print(msgspec.json.encode(verdict).decode() if args.json else format_verdict_text(verdict))
    return 0 if verdict.passed else 1


def gate_workload_folder(args: argparse.Namespace) -> int:
    from spectui.workload.gate import gate_workload
    from spectui.workload.result import load_result

    if args.baseline or args.candidate:
        raise SpectuiError("--workload judges a workload folder: leave out --baseline and --candidate")
    if not args.setting:
        raise SpectuiError("--workload needs --setting (the one judged, e.g. ngram-mod)")
    verdict = gate_workload(load_result(args.workload), setting=args.setting, clients=0 if args.rate else args.clients, rate=args.rate,
                            min_speedup=args.min_speedup, max_defects=args.max_defects)
    if args.json:
        print(json.dumps({"passed": verdict.passed, "checks": verdict.lines}))
    else:
        print("\n".join([f"gate: {'PASS' if verdict.passed else 'FAIL'} ({args.setting}, workload {args.workload})", *verdict.lines]))
    return 0 if verdict.passed else 1


# -- export ---------------------------------------------------------------------------------


def cmd_export(args: argparse.Namespace) -> int:
    if args.redact:
        return export_redacted(args)
    from spectui.telemetry.destination import OtelDestination
    from spectui.telemetry.otel import require_otel, trace_id_hex

    json_lines = args.otel_json or args.output is not None  # -o alone can only mean JSON lines
    if not (json_lines or args.otel_endpoint):
        raise SpectuiError("export needs a format: --otel-json [-o OUT.jsonl] and/or --otel-endpoint URL")
    require_otel()
    recordings = read_recordings(args.files)  # a bad path leaves no half-written output
    if args.json and json_lines and args.output is None:
        raise SpectuiError("--json prints what was exported on stdout: send the JSON lines to a file with -o OUT.jsonl")
    jsonl = (args.output or sys.stdout) if json_lines else None
    done, traces = [], []
    with OtelDestination(jsonl=jsonl, endpoint=args.otel_endpoint) as dest:
        for rec in recordings:
            note = f" (truncated at byte {rec.truncated_at}: exported what it holds)" if rec.truncated else ""
            trace = trace_id_hex(dest.emit(rec.events))
            traces.append({"file": str(rec.path), "trace_id": trace, "truncated_at": rec.truncated_at if rec.truncated else None})
            done.append(f"spectui: {rec.path} -> trace {trace}{note}")
    print("\n".join(done), file=sys.stderr)  # only once the export went through
    if args.json:
        import json

        print(json.dumps({"exported": traces, "otel_json": args.output, "otel_endpoint": args.otel_endpoint}))
    return 0


def export_redacted(args: argparse.Namespace) -> int:
    """``export --redact``: one redacted copy per recording, all made with one key, so the
    copies' outputs still compare with each other (``spectui.recording.redact``). Copies go to
    a folder of their own, never beside the originals: a sweep, soak or conversation folder
    reads every recording in it, and a copy there would count twice."""
    from pathlib import Path

    from spectui.recording.redact import Redactor, write_copy
    from spectui.recording.writer import SUFFIX, new_folder_in

    if args.otel_json or args.otel_endpoint:
        raise SpectuiError("--redact writes recordings; export the copies with --otel-json or --otel-endpoint in a second command")
    sources: list[tuple[str, Path]] = []  # (recording, where its copy goes below the output folder)
    for name in args.files:
        if os.path.isdir(name):  # a conversation's (or any) folder: its recordings, into a folder of that name
            found = sorted(Path(name).glob("*" + SUFFIX))
            if not found:
                raise SpectuiError(f"{name}: no recordings in this folder")
            sources += [(str(p), Path(Path(name).resolve().name) / p.name) for p in found]
        else:
            sources.append((name, Path(Path(name).name)))
    recordings = read_recordings([path for path, _ in sources])  # every file read before anything is written
    one_file = args.output is not None and args.output.endswith(SUFFIX)
    if one_file and len(recordings) != 1:
        raise SpectuiError(f"-o {args.output} names the copy of one recording; give a folder for {len(recordings)}")
    if one_file and os.path.exists(args.output):
        raise SpectuiError(f"{args.output} already exists; name another copy with -o")
    folder = Path(args.output) if args.output is not None else new_folder_in(Path.cwd(), "redacted")
    targets = [Path(args.output)] if one_file else [folder / rel for _, rel in sources]
    if len(set(targets)) != len(targets):
        raise SpectuiError("two recordings have the same file name; redact them one at a time")
    for rec in recordings:
        if rec.header.redaction is not None:
            raise SpectuiError(f"{rec.path} is a redacted copy already")
    redactor = Redactor()
    copies = []
    for rec, target in zip(recordings, targets):
        write_copy(redactor.recording(rec), target)
        note = f" (truncated at byte {rec.truncated_at}: redacted what it holds)" if rec.truncated else ""
        print(f"spectui: {rec.path} -> {target}, redacted{note}", file=sys.stderr)
        copies.append({"file": str(rec.path), "copy": str(target)})
    if args.json:
        import json

        print(json.dumps({"redacted": copies}))
    return 0
