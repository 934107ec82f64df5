"""Command line entry point: ``spectui run --headless``, ``spectui report``, ``spectui models``.

Every user mistake ends as one line on stderr and exit code 2 (``SpectuiError``); the
headless run prints the generated text alone on stdout (so ``> out.txt`` captures it) and a
short summary on stderr, or one JSON object on stdout with ``--json``.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Sequence

import msgspec

from spectui import __version__
from spectui.config import BackendConfig, DraftConfig, PolicyConfig, RunConfig, SamplingConfig
from spectui.errors import SpectuiError

#: Modules that add subcommands: each has ``add_parsers(sub)`` and ``COMMANDS`` (name ->
#: function of the parsed args returning the exit code). Keep their top-level imports light:
#: ``spectui --help`` imports every one of them.
COMMAND_MODULES = ("spectui.cli_views", "spectui.cli_sweep", "spectui.cli_soak", "spectui.cli_export", "spectui.cli_quality")


def _command_modules() -> list:
    import importlib

    return [importlib.import_module(name) for name in COMMAND_MODULES]

DEFAULT_PROMPT = (
    "Fix the typos in this text and return it unchanged otherwise: "
    "Speculative decodng lets a small draft modle propose several tokens that the large "
    "target model then verifys in a single forward pass. When the draft is right, the "
    "target accepts severel tokens at once; when it is wrong, the output is stil exactly "
    "what the target would have writen on its own."
)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line, like every other error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise SpectuiError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="spectui", description="Does speculative decoding help on this machine, and is it exact?")
    parser.add_argument("--version", action="version", version=f"spectui {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    run = sub.add_parser("run", help="run one AR or speculative session")
    run.add_argument("--headless", action="store_true", help="no dashboard: text on stdout, summary on stderr")
    run.add_argument("--theme", default=None, help="dashboard theme: spectui-dark, spectui-light, spectui-256, ...")
    add_run_arguments(run)
    run.add_argument("--json", action="store_true", help="print one JSON object (text, token ids, summary) on stdout")
    rec = run.add_mutually_exclusive_group()
    rec.add_argument("--record", metavar="FILE", default=None, help="recording path (default: a readable name under recordings/)")
    rec.add_argument("--no-record", action="store_true", help="do not record this session")
    from spectui.cli_export import add_run_otel_arguments  # stdlib only: --help stays cheap

    add_run_otel_arguments(run)

    report = sub.add_parser("report", help="summarise a recording: speed, latency, acceptance, memory, artifacts")
    report.add_argument("file")
    report.add_argument("--json", action="store_true", help="one JSON object with the header and the summary")
    report.add_argument(
        "--floors",
        action="store_true",
        help="FILE is a sweep folder: print the acceptance floor, tok/s floor and swap ceiling per tier (--json: a floors file for diff)",
    )
    add_compare_arguments(sub)

    sub.add_parser("models", help="show the embedded default model and where it is")
    for module in _command_modules():
        module.add_parsers(sub)
    return parser


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    d_run, d_draft, d_samp, d_back = RunConfig(), DraftConfig(), SamplingConfig(), BackendConfig()
    p.add_argument("--backend", choices=["llamacpp", "mlx"], default=d_back.name)
    p.add_argument("--target", default="", help="target GGUF path (default: the embedded SmolLM2-135M)")
    # default None: "spec" for the embedded engine, "ar" with --server (whose drafting, if
    # any, is the server's own configuration: --mode spec only labels the run)
    p.add_argument("--mode", choices=["ar", "spec"], default=None, help=f"default: {d_run.mode}; ar with --server")
    p.add_argument("--draft", default=d_draft.source, help="'ngram' (prompt lookup) or a draft GGUF path")
    p.add_argument("--k", type=int, default=d_draft.k, help="draft length K")
    p.add_argument("--adaptive-k", action="store_true",
                   help="choose K each step from the measured verify cost and recent acceptance (0 = no draft when none pays)")
    p.add_argument("--k-min", type=int, default=d_draft.k_min)
    p.add_argument("--k-max", type=int, default=d_draft.k_max)
    p.add_argument("--ngram-min", type=int, default=d_draft.ngram_min)
    p.add_argument("--ngram-max", type=int, default=d_draft.ngram_max)
    p.add_argument("--draft-temperature", type=float, default=None, help="draft model's own temperature")
    d_pol = PolicyConfig()
    p.add_argument(
        "--fallback",
        choices=["on", "off"],
        default=None,
        help="runtime fallback policy: shrink K, lighter drafter, AR, probe back (default: on in the dashboard, off headless)",
    )
    p.add_argument("--fallback-floor", type=float, default=d_pol.acceptance_floor, help="acceptance floor of the fallback policy")
    p.add_argument("--fallback-window", type=int, default=d_pol.window_blocks, help="drafted blocks per acceptance window")
    p.add_argument("--temperature", type=float, default=d_samp.temperature, help="0 = greedy")
    p.add_argument("--top-k", type=int, default=d_samp.top_k)
    p.add_argument("--top-p", type=float, default=d_samp.top_p)
    p.add_argument("--seed", type=int, default=d_samp.seed)
    p.add_argument("--max-tokens", type=int, default=None, help=f"token budget (default: the prompt's ceiling, else {d_run.max_tokens})")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--prompt", default=None, help="prompt text")
    src.add_argument("--prompt-file", default=None, help="read the prompt from a file ('-' for stdin)")
    src.add_argument("--prompt-name", default=None, help="a prompt from prompts/ by name (its tier and token ceiling come along)")
    p.add_argument("--raw", action="store_true", help="send the prompt as is, without the chat template")
    p.add_argument("--ctx", type=int, default=d_back.n_ctx, help="context size in tokens")
    p.add_argument("--batch", type=int, default=d_back.n_batch, help="prompt evaluation batch size")
    p.add_argument("--threads", type=int, default=d_back.n_threads, help="CPU threads (0 = all cores)")
    p.add_argument("--gpu-layers", type=int, default=d_back.n_gpu_layers, help="layers to offload (-1 = all)")
    p.add_argument(
        "--server",
        metavar="URL",
        default=None,
        help="measure a running OpenAI-compatible server (llama-server, llama_cpp.server, mlx_lm.server), not the embedded engine",
    )
    p.add_argument("--api-key-env", metavar="VAR", default="", help="environment variable holding the server's API key (never recorded)")


def config_from_args(args: argparse.Namespace, *, fallback_default: bool = False) -> RunConfig:
    """The run configuration the flags describe; ``fallback_default`` is whether the fallback
    policy is on when ``--fallback`` is not given (the dashboard: yes; measurements: no)."""
    from spectui.prompts import find_prompt, parse_prompt

    tier = name = check = ""
    ceiling = RunConfig().max_tokens
    if args.prompt_name is not None:
        spec = find_prompt(args.prompt_name)
        prompt, tier, ceiling, name, check = spec.text, spec.tier, spec.max_tokens, spec.name, spec.check
    elif args.prompt_file is not None:
        try:
            if args.prompt_file == "-":
                prompt = sys.stdin.read()
            else:
                with open(args.prompt_file, encoding="utf-8") as f:
                    prompt = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise SpectuiError(f"cannot read prompt file {args.prompt_file}: {exc}") from None
        if prompt.startswith("#"):  # a prompts/-style file with a metadata header
            spec = parse_prompt(prompt, os.path.basename(args.prompt_file).rsplit(".", 1)[0], args.prompt_file)
            prompt, tier, ceiling, check = spec.text, spec.tier, spec.max_tokens, spec.check
    else:
        prompt = DEFAULT_PROMPT if args.prompt is None else args.prompt
    config = RunConfig(
        target=args.target,
        mode=args.mode or ("ar" if args.server else RunConfig().mode),
        prompt=prompt,
        prompt_tier=tier,
        prompt_name=name,
        prompt_check=check,  # canonical (spectui.quality): recordings grade without the prompt file
        chat=not args.raw,
        max_tokens=ceiling if args.max_tokens is None else args.max_tokens,
        sampling=SamplingConfig(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed),
        draft=DraftConfig(
            source=args.draft,
            k=args.k,
            adaptive=args.adaptive_k,
            k_min=args.k_min,
            k_max=args.k_max,
            ngram_min=args.ngram_min,
            ngram_max=args.ngram_max,
            temperature=args.draft_temperature,
        ),
        backend=BackendConfig(
            name="server" if args.server else args.backend,
            n_ctx=args.ctx,
            n_batch=args.batch,
            n_threads=args.threads,
            n_gpu_layers=args.gpu_layers,
            server_url=args.server or "",
            api_key_env=args.api_key_env,
        ),
        policy=PolicyConfig(
            enabled=fallback_default if args.fallback is None else args.fallback == "on",
            acceptance_floor=args.fallback_floor,
            window_blocks=args.fallback_window,
        ),
    )
    config.validate()
    return config


class _StopOnSignal:
    """SIGINT / SIGHUP / SIGTERM end the run after the current step (a clean ``End``).

    A second SIGINT falls back to Python's default (KeyboardInterrupt) for a stuck run.
    """

    SIGNALS = tuple(s for s in (signal.SIGINT, getattr(signal, "SIGHUP", None), signal.SIGTERM) if s is not None)

    def __init__(self) -> None:
        self.event = threading.Event()
        self._old: dict[int, object] = {}

    def _handle(self, signum: int, _frame: object) -> None:
        if self.event.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.event.set()

    def __enter__(self) -> threading.Event:
        for s in self.SIGNALS:
            self._old[s] = signal.signal(s, self._handle)
        return self.event

    def __exit__(self, *exc: object) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)


def cmd_run(args: argparse.Namespace) -> int:
    from spectui.engine.session import Engine
    from spectui.metrics.stats import summarize
    from spectui.recording.schema import End, Step
    from spectui.recording.writer import RecordingWriter, default_recording_path

    config = config_from_args(args)
    engine = Engine.load(config)
    events = []
    token_ids: list[int] = []
    text_parts: list[str] = []
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    eog = engine.target.eog_tokens
    out = sys.stdout
    path = None if args.no_record else (args.record or default_recording_path(config))
    try:
        writer = RecordingWriter(path) if path is not None else None
    except OSError as exc:
        engine.close()
        raise SpectuiError(f"cannot write the recording {path}: {exc.strerror or exc}") from None
    with engine, _StopOnSignal() as stop, writer or contextlib.nullcontext():
        for ev in engine.run(config, stop=stop):
            events.append(ev)
            if writer is not None:
                writer.write(ev)
            if type(ev) is Step:
                token_ids.extend(ev.tokens)
                chunk = decoder.decode(b"".join(p for t, p in zip(ev.tokens, ev.pieces) if t not in eog))
                if chunk:
                    text_parts.append(chunk)
                    if not args.json:
                        out.write(chunk)
                        out.flush()
        tail = decoder.decode(b"", final=True)
        text_parts.append(tail)
    summary = summarize(events)
    if args.json:
        doc = {
            "text": "".join(text_parts),
            "tokens": token_ids,
            "summary": msgspec.to_builtins(summary),
            "recording": str(path) if path is not None else None,
        }
        out.write(msgspec.json.encode(doc).decode() + "\n")
    else:
        out.write(tail + "\n")
        out.flush()
    print(format_summary(config, summary), file=sys.stderr)
    if path is not None:
        print(f"spectui: recorded to {path}", file=sys.stderr)
    if args.otel_file or args.otel_endpoint:  # after the summary: an export failure must not hide it
        from spectui.cli_export import export_run

        export_run(events, file=args.otel_file, endpoint=args.otel_endpoint)
    end = events[-1]
    if isinstance(end, End) and end.reason == "error":
        print(f"spectui: error: the engine failed: {end.error}", file=sys.stderr)
        return 1
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    from spectui.ui.app import run_dashboard

    config = config_from_args(args, fallback_default=True)
    if getattr(args, "otel_file", None) or getattr(args, "otel_endpoint", None):
        raise SpectuiError("--otel-file/--otel-endpoint are for headless runs (add --headless), or convert a recording: spectui export FILE")
    if args.record is not None:
        raise SpectuiError("--record FILE is for headless runs; the dashboard names each session's recording itself")
    return run_dashboard(config, record=not args.no_record, theme=args.theme)


def cmd_report(args: argparse.Namespace) -> int:
    from spectui.recording.reader import read_recording
    from spectui.recording.report import format_report, report_json

    if args.floors:
        return _report_floors(args)
    if not os.path.isfile(args.file):
        raise SpectuiError(f"recording not found: {args.file}")
    rec = read_recording(args.file)
    if args.json:
        print(msgspec.json.encode(report_json(rec)).decode())
    else:
        print(format_report(rec))
    return 0


def _report_floors(args: argparse.Namespace) -> int:
    from spectui.engine.artifacts import host_info
    from spectui.lab.sweep import load_sweep
    from spectui.lab.sweep_report import floors_from_sweep, format_floors

    if not os.path.isdir(args.file):
        raise SpectuiError(f"--floors reads a sweep folder (spectui sweep --out DIR); {args.file} is not a folder")
    result, summaries = load_sweep(args.file)
    h = host_info()
    floors = floors_from_sweep(result, summaries, host=f"{h.cpu} x{h.cpu_count}")
    if not floors.floors:
        raise SpectuiError(f"{args.file}: the sweep has no K points to take floors from")
    print(msgspec.json.encode(floors).decode() if args.json else format_floors(floors))
    return 0


def add_compare_arguments(sub: argparse._SubParsersAction) -> None:
    """``spectui diff`` and ``spectui gate`` (headless; their code lives in spectui.compare)."""
    from spectui.compare.thresholds import GateThresholds  # msgspec only: --help stays cheap

    diff = sub.add_parser("diff", help="baseline vs candidate recording: artifacts, outputs, speedup, acceptance, memory")
    diff.add_argument("baseline", metavar="BASELINE")
    diff.add_argument("candidate", metavar="CANDIDATE")
    fmt = diff.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="one JSON object (the whole diff)")
    fmt.add_argument("--markdown", action="store_true", help="GitHub markdown tables")
    diff.add_argument("--force", action="store_true", help="compare even with different prompt tokens or target weights")
    diff.add_argument(
        "--floors", metavar="FILE", default=None, help="also check the candidate against a floors file (exit 1 if one is broken)"
    )

    t = GateThresholds()
    gate = sub.add_parser("gate", help="pass/fail for production: speedup, p95 ITL, acceptance, TTFT, identical outputs")
    gate.add_argument("--baseline", nargs="+", required=True, metavar="FILE", help="baseline recordings (usually AR)")
    gate.add_argument("--candidate", nargs="+", required=True, metavar="FILE", help="candidate recordings (usually speculative)")
    for field, kind, text in GATE_KNOBS:
        default = getattr(t, field)
        gate.add_argument(
            "--" + field.replace("_", "-"),
            type=kind,
            default=default,
            metavar="K" if kind is int else "X",
            help=f"{text} (default {default})",
        )
    gate.add_argument(
        "--allow-unverified-quality", action="store_true", help="sampled runs: do not fail on the unmeasured quality check"
    )
    gate.add_argument("--json", action="store_true", help="one JSON object (the verdict)")


#: ``spectui gate`` flags: each is the ``GateThresholds`` field of the same name.
GATE_KNOBS = [
    ("min_speedup", float, "median decode tok/s, candidate / baseline"),
    ("min_acceptance", float, "median acceptance rate of speculative candidates"),
    ("expected_k", int, "the K the acceptance threshold is meant for"),
    ("max_ttft_growth", float, "TTFT growth allowed on short prompts (0.08 = +8%%)"),
    ("max_p95_itl_ratio", float, "candidate / baseline p95 inter-token latency"),
    ("p95_itl_tolerance", float, "noise allowance on that ratio"),
    ("max_quality_drop_points", float, "sampled runs: quality pass-rate drop allowed, in percentage points"),
]


def _read_recordings(paths: Sequence[str]) -> list:  # list[Recording], kept import-light
    from spectui.recording.reader import read_recording

    recs = []
    for path in paths:
        if not os.path.isfile(path):
            raise SpectuiError(f"recording not found: {path}")
        recs.append(read_recording(path))
    return recs


def cmd_diff(args: argparse.Namespace) -> int:
    """Exit 0 whenever the two runs were compared, outputs identical or not."""
    from spectui.compare.diff import diff_recordings, format_diff_markdown, format_diff_text

    floors = None
    if args.floors is not None:
        from spectui.lab.sweep_report import read_floors

        floors = read_floors(args.floors)
    baseline, candidate = _read_recordings([args.baseline, args.candidate])
    d = diff_recordings(baseline, candidate, force=args.force)
    floor_lines, broken = _floor_lines(floors, candidate) if floors is not None else ([], False)
    if args.json:
        doc = msgspec.to_builtins(d)
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


def _floor_lines(floors, rec) -> tuple[list[str], bool]:  # noqa: ANN001 - Floors, Recording
    """The candidate against the floor of its tier: one line per check, and whether one broke."""
    from spectui.lab.sweep_report import check_floors
    from spectui.metrics.stats import summarize

    c = rec.header.config
    drafter = "ngram" if c.draft.is_ngram else c.draft.source
    floor, checks = check_floors(floors, c.prompt_tier, drafter, c.draft.k, summarize(rec.events))
    if floor is None:
        return [f"no floor for tier {c.prompt_tier or '(none)'} in {floors.source}"], False
    lines = [f"floor of tier {floor.tier}, {floor.drafter} K={floor.k} ({floor.runs} runs of {floors.source})"]
    lines += [f"{'pass' if ch.passed else 'FAIL'}  {ch.text}" for ch in checks]
    return lines, not all(ch.passed for ch in checks)


def cmd_gate(args: argparse.Namespace) -> int:
    """Exit 0 pass, 1 fail (2, unusable input, comes from SpectuiError)."""
    from spectui.compare.gate import GateThresholds, format_verdict_text, gate

    t = GateThresholds(
        **{field: getattr(args, field) for field, _, _ in GATE_KNOBS},
        allow_unverified_quality=args.allow_unverified_quality,
    )
    t.validate()  # before reading files: a typo in a threshold is the cheaper error to report
    verdict = gate(_read_recordings(args.baseline), _read_recordings(args.candidate), t)
    if args.json:
        print(msgspec.json.encode(verdict).decode())
    else:
        print(format_verdict_text(verdict))
    return 0 if verdict.passed else 1


def format_summary(config: RunConfig, s) -> str:  # noqa: ANN001 - Summary, kept import-light
    from spectui.recording.report import num_or_na as f

    steady = f" (steady {f(s.steady_tok_s)})" if s.warmup_dropped else ""
    lines = [
        f"spectui: {s.n_tokens} tokens ({s.finish_reason}) | decode {f(s.decode_tok_s)} tok/s{steady}"
        f" | TTFT {f(s.ttft_ms)} ms | prefill {f(s.prefill_ms)} ms ({s.n_prompt_tokens} tokens)"
        f" | ITL p50/p95/p99 {f(s.itl_p50_ms, '.2f')}/{f(s.itl_p95_ms, '.2f')}/{f(s.itl_p99_ms, '.2f')} ms"
    ]
    if config.mode == "spec" and config.backend.name == "server":  # no per-block counts from a server
        lines.append("spectui: drafting on the server: the acceptance it reported (if any) is in `spectui report`")
    elif config.mode == "spec":
        drafter = "ngram" if config.draft.is_ngram else "model"
        lines.append(
            f"spectui: {drafter} K={config.draft.k}{' adaptive' if config.draft.adaptive else ''}"
            f" | acceptance {f(s.acceptance_rate, '.3f')} ({s.accepted}/{s.drafted})"
            f" | mean accepted length {f(s.mean_accepted_length, '.2f')}"
            f" | rollbacks {s.rollbacks} | draft forwards {s.draft_forwards}"
        )
    return "\n".join(lines)


def cmd_models(_args: argparse.Namespace) -> int:
    from spectui.engine.gguf import read_gguf
    from spectui.models import embedded_model_path

    path = embedded_model_path()
    info = read_gguf(path)
    print(f"smollm2 (default)  {info.name}  {info.architecture}  {info.quant}  {info.n_params / 1e6:.0f}M params  {path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            args = parser.parse_args(["run", *(argv or sys.argv[1:])])
        if args.command == "run":
            # the dashboard needs a terminal; piped or scripted runs get the headless path
            if args.headless or args.json or not (sys.stdout.isatty() and sys.stdin.isatty()):
                return cmd_run(args)
            return cmd_dashboard(args)
        if args.command == "report":
            return cmd_report(args)
        if args.command == "diff":
            return cmd_diff(args)
        if args.command == "gate":
            return cmd_gate(args)
        if args.command == "models":
            return cmd_models(args)
        for module in _command_modules():
            if args.command in module.COMMANDS:
                return module.COMMANDS[args.command](args)
        parser.print_help()
        return 2
    except SpectuiError as exc:
        print(f"spectui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("spectui: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
