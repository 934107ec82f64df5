"""``spectui run``: one AR or speculative session, headless or in the dashboard.

Headless, the generated text alone goes to stdout (so ``> out.txt`` captures it) and a short
summary to stderr, or one JSON object to stdout with ``--json``. Piped or scripted runs take
the headless path on their own: the dashboard needs a terminal.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from spectui import file_kinds
from spectui.cli.host_flag import add_host_argument, host_engines
from spectui.cli.parsing import add_old_spelling, otlp_endpoint, output_path
from spectui.cli.run_flags import add_run_arguments, config_from_args
from spectui.cli.signals import StopOnSignal
from spectui.errors import SpectuiError
from spectui.format import terminal_safe

if TYPE_CHECKING:
    from spectui.config import RunConfig
    from spectui.metrics.stats import Summary
    from spectui.recording.schema import BatchNoise, Event


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="run one AR or speculative session")
    run.add_argument("--headless", action="store_true", help="no dashboard: text on stdout, summary on stderr")
    run.add_argument("--theme", default=None, help="dashboard theme: spectui-dark, spectui-light, spectui-256, ...")
    add_run_arguments(run)
    add_host_argument(run)
    run.add_argument("--json", action="store_true", help="print one JSON object (text, token ids, summary) on stdout")
    rec = run.add_mutually_exclusive_group()
    rec.add_argument("-o", "--output", metavar="FILE", default=None,
                     help="the recording's file (default: a readable name in the recordings folder)")
    add_old_spelling(run, "--record", "output", metavar="FILE")  # outside the group: argparse cannot list a hidden member
    rec.add_argument("--no-record", action="store_true", help="do not record this session")
    run.add_argument("--otel-file", metavar="PATH", type=output_path, default=None,
                     help="write the session's OpenTelemetry spans and metrics as JSON lines")
    run.add_argument("--otel-endpoint", metavar="URL", type=otlp_endpoint, default=None,
                     help="send them to an OTLP/HTTP collector (base URL, e.g. http://127.0.0.1:4318)")
    run.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    if args.headless or args.json or not (sys.stdout.isatty() and sys.stdin.isatty()):
        return headless(args)
    return dashboard(args)


def headless(args: argparse.Namespace) -> int:
    """Exit 0 when the session ran (to its end or a signal), 1 when the engine failed."""
    import msgspec

    from spectui.metrics.stats import summarize
    from spectui.recording.output import OutputText
    from spectui.recording.schema import Header, Step
    from spectui.recording.writer import default_recording_path
    from spectui.sessions.open import open_engine
    from spectui.sessions.record import record_session

    config = config_from_args(args)
    if args.otel_file:  # a file of another kind there is refused before the run, not after it
        from spectui.telemetry.destination import OTEL_KIND

        if file_kinds.classify(args.otel_file, OTEL_KIND) == file_kinds.FOREIGN:
            raise file_kinds.refuse(Path(args.otel_file), OTEL_KIND)
    record_to = None if args.no_record else (args.output or default_recording_path)
    recorded: list[Path | None] = []  # filled by record_session once the engine accepted the run
    events: list[Event] = []
    tokens: list[int] = []
    text = OutputText()
    parts: list[str] = []
    out = sys.stdout
    named = None if args.no_record or args.output is None else str(args.output)
    with open_engine(config, host=args.host, recording=named) as engine, StopOnSignal() as stop:
        for ev in record_session(engine, config, record_to, stop=stop, on_start=recorded.append):
            events.append(ev)
            if type(ev) is Step:
                tokens.extend(ev.tokens)
            chunk = text.feed(ev)
            if chunk:
                parts.append(chunk)
                if not args.json:
                    out.write(chunk)
                    out.flush()
    path = recorded[0] if recorded else None
    summary = summarize(events)
    doc = {"text": "".join(parts), "tokens": tokens, "summary": msgspec.to_builtins(summary)}
    end_output(out, {**doc, "recording": str(path) if path is not None else None} if args.json else None)
    header = events[0] if events and isinstance(events[0], Header) else None
    # the header says what ran, and the cost seed the engine found for this model
    seed = header.pricing.seed if header is not None else ()
    print(format_summary(header.config if header is not None else config, summary, seeded=bool(seed)), file=sys.stderr)
    if header is not None and header.batch_noise is not None:
        print(noise_line(config, header.batch_noise), file=sys.stderr)
    if path is not None:
        print(f"spectui: recorded to {path}", file=sys.stderr)
    if args.otel_file or args.otel_endpoint:  # after the summary: an export failure must not hide it
        export_run(events, file=args.otel_file, endpoint=args.otel_endpoint)
    return 1 if engine_failed(events) else 0


def end_output(out: TextIO, doc: dict | None) -> None:
    """The end of a headless session's stdout: its JSON object (``--json``), else the line end
    after the text streamed."""
    import msgspec

    out.write(msgspec.json.encode(doc).decode() + "\n" if doc is not None else "\n")
    out.flush()


def engine_failed(events: Sequence[Event]) -> bool:
    """Whether the session ended in an engine failure, or was cut short by a fault rather than
    asked to stop (a node's connection lost: interrupted, with the reason); said on stderr in one line."""
    from spectui.recording.schema import End

    end = events[-1] if events else None
    if isinstance(end, End) and end.reason == "error":
        print(f"spectui: error: the engine failed: {terminal_safe(end.error)}", file=sys.stderr)  # a server's or a node's words
        return True
    if isinstance(end, End) and end.reason == "interrupted" and end.error:
        print(f"spectui: error: cut short after {end.n_tokens} tokens: {terminal_safe(end.error)}", file=sys.stderr)
        return True
    return False


def dashboard(args: argparse.Namespace) -> int:
    if args.otel_file or args.otel_endpoint:
        raise SpectuiError("--otel-file/--otel-endpoint are for headless runs (add --headless), or convert a recording: spectui export FILE")
    if args.output is not None:
        raise SpectuiError("-o/--output FILE is for headless runs; the dashboard names each session's recording itself")
    config = config_from_args(args, fallback_default=True)
    from spectui.cli.profiles import options_set
    from spectui.ui.launch import run_dashboard as launch  # Textual loads only when a dashboard opens

    # what a flag or a config file set beats what the dashboard remembers (its theme, K, mode)
    return launch(config, record=not args.no_record, theme=args.theme, engine_factory=host_engines(args.host),
                  set_elsewhere=options_set(args))


def format_summary(config: RunConfig, s: Summary, *, seeded: bool = False) -> str:
    """The headless run's stderr lines: speed and latency, then drafting when speculative
    (``seeded``: a cost-aware K started from a measured curve, not the built-in prior)."""
    from spectui.format import num_or_na as f

    steady = f" (steady {f(s.steady_tok_s)})" if s.warmup_dropped else ""
    lines = [
        f"spectui: {s.n_tokens} tokens ({s.finish_reason}) | decode {f(s.decode_tok_s)} tok/s{steady}"
        f" | TTFT {f(s.ttft_ms)} ms | prefill {f(s.prefill_ms)} ms ({s.n_prompt_tokens} tokens)"
        f" | ITL p50/p95/p99 {f(s.itl_p50_ms, '.2f')}/{f(s.itl_p95_ms, '.2f')}/{f(s.itl_p99_ms, '.2f')} ms"
    ]
    if config.mode == "spec" and config.backend.name == "server":  # no per-block counts from a server
        lines.append("spectui: drafting on the server: the acceptance it reported (if any) is in `spectui report`")
    elif config.mode == "spec" and config.backend.name == "mlx-lm":  # no counts to show: none are invented
        lines.append(f"spectui: {config.draft.label()} | acceptance not reported by mlx_lm.server")
    elif config.mode == "spec":
        lines.append(
            f"spectui: {config.draft.label()}"
            f" | acceptance {f(s.acceptance_rate, '.3f')} ({s.accepted}/{s.drafted})"
            f" | mean accepted length {f(s.mean_accepted_length, '.2f')}"
            f" | rollbacks {s.rollbacks} | draft forwards {s.draft_forwards}"
        )
        if config.draft.cost_aware and not seeded:
            lines.append(prior_line())
    return "\n".join(lines)


def prior_line() -> str:
    """Said when a cost-aware K began from the built-in prior: no curve of this model was
    measured on this machine yet. The run's own timings replace it as it goes and are kept
    for the next run of this model here (``models.cost_curves``)."""
    from spectui.metrics.predict import CPU_PRIOR

    return (f"spectui: the cost-aware K started from {CPU_PRIOR}: no verify-cost curve of this model on this machine yet; "
            "the block costs this run timed seed the next one (spectui tune measures the whole curve)")


def noise_line(config: RunConfig, noise: BatchNoise) -> str:
    """What the backend's batch-shape noise means for this greedy run, in one line."""
    if noise.invariant:
        return f"spectui: exactness: {noise.describe()}: greedy speculative output equals AR"
    advice = (
        "--deterministic did not make this backend batch-invariant"
        if config.backend.deterministic
        else "spectui diff tells a near-tie from a defect; --deterministic removes it"
    )
    return f"spectui: exactness: {noise.describe()}: greedy output may part from AR at near-ties ({advice})"


def export_run(events: Sequence[Event], *, file: str | None, endpoint: str | None) -> None:
    """The end of a live run: its events, as collected, to the telemetry destinations asked for
    (the same exporter ``spectui export`` uses on a recording)."""
    from spectui.telemetry.destination import export_events
    from spectui.telemetry.otel import trace_id_hex

    trace_id = export_events(events, jsonl=file, endpoint=endpoint)
    where = " and ".join(w for w in (file, endpoint) if w)
    print(f"spectui: OpenTelemetry trace {trace_id_hex(trace_id)} exported to {where}", file=sys.stderr)
