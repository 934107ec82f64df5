"""``spectui export FILE... --otel-json`` and the ``run --otel-file / --otel-endpoint`` flags.

A recording and a live run go through the same exporter (``spectui.telemetry``); this module
only parses flags, reads files and reports. Its top level stays import-light: ``spectui --help``
imports it, and OpenTelemetry is imported only when something is exported.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from urllib.parse import urlsplit

from spectui.errors import SpectuiError


def otlp_endpoint(value: str) -> str:
    """argparse type: an http(s) base URL (as in OTEL_EXPORTER_OTLP_ENDPOINT)."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(f"{value!r} is not an http(s) URL (e.g. http://127.0.0.1:4318)")
    return value


def output_path(value: str) -> str:
    """argparse type: a file we can create. Checked before a run, not after it."""
    folder = os.path.dirname(os.path.abspath(value))
    if os.path.isdir(value):
        raise argparse.ArgumentTypeError(f"{value} is a directory")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"no such directory: {folder}")
    if not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write in {folder}")
    return value


def add_run_otel_arguments(run: argparse.ArgumentParser) -> None:
    """The live headless run's telemetry flags (``spectui run`` only)."""
    run.add_argument("--otel-file", metavar="PATH", type=output_path, default=None,
                     help="write the session's OpenTelemetry spans and metrics as JSON lines")
    run.add_argument("--otel-endpoint", metavar="URL", type=otlp_endpoint, default=None,
                     help="send them to an OTLP/HTTP collector (base URL, e.g. http://127.0.0.1:4318)")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    export = sub.add_parser(
        "export", help="recordings as OpenTelemetry spans and metrics: JSON lines or an OTLP/HTTP endpoint"
    )
    export.add_argument("files", nargs="+", metavar="FILE", help="recordings (each becomes one trace)")
    export.add_argument(
        "--otel-json", action="store_true", help="JSON lines: one object per span and per metrics export"
    )
    export.add_argument("-o", "--output", metavar="OUT.jsonl", type=output_path, default=None,
                        help="where the JSON lines go (default: stdout; implies --otel-json)")
    export.add_argument("--otel-endpoint", metavar="URL", type=otlp_endpoint, default=None,
                        help="OTLP/HTTP collector base URL (e.g. http://127.0.0.1:4318)")


def export_run(events: Sequence, *, file: str | None, endpoint: str | None) -> None:
    """The end of a live run: its events, as collected, to the destinations asked for."""
    from spectui.telemetry.otel import export_events, trace_id_hex

    trace_id = export_events(events, jsonl=file, endpoint=endpoint)
    where = " and ".join(w for w in (file, endpoint) if w)
    print(f"spectui: OpenTelemetry trace {trace_id_hex(trace_id)} exported to {where}", file=sys.stderr)


def cmd_export(args: argparse.Namespace) -> int:
    from spectui.recording.reader import read_recording
    from spectui.telemetry.otel import OtelDestination, require_otel, trace_id_hex

    json_lines = args.otel_json or args.output is not None  # -o alone can only mean JSON lines
    if not (json_lines or args.otel_endpoint):
        raise SpectuiError("export needs a format: --otel-json [-o OUT.jsonl] and/or --otel-endpoint URL")
    require_otel()
    # Every file is read before anything is written: a bad path leaves no half-written output.
    recordings = [read_recording(path) for path in args.files]
    jsonl = (args.output or sys.stdout) if json_lines else None
    done = []
    with OtelDestination(jsonl=jsonl, endpoint=args.otel_endpoint) as dest:
        for rec in recordings:
            note = f" (truncated at byte {rec.truncated_at}: exported what it holds)" if rec.truncated else ""
            done.append(f"spectui: {rec.path} -> trace {trace_id_hex(dest.emit(rec.events))}{note}")
    print("\n".join(done), file=sys.stderr)  # only once the export went through
    return 0


COMMANDS = {"export": cmd_export}
