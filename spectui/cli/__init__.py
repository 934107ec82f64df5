"""The command line: argument parsing, signal handling, and what a command prints.

Owns ``spectui`` (the console script and ``python -m spectui``): ``build_parser`` and ``main``
here; what the families share, one module per role: ``parsing`` (the parser class, old
spellings, argparse types), ``run_flags`` (the run flags and the ``RunConfig`` they describe),
``host_flag`` (``--host NODE``), ``signals`` (a clean stop on Ctrl-C, hangup or ``kill``),
``inputs`` (recordings read, a terminal asked for, before anything prints) and ``progress``;
and one module per command family, each with ``register(sub)`` adding its subcommands with
``set_defaults(func=...)``. ``spectui`` with no subcommand means ``spectui run``. (``common``
only re-exports two names for the scripts in ``benchmarks/``.)

The top layer: it may import everything below it (``spectui.ui`` lazily, inside the commands
that open a dashboard; ``lab``, ``compare``, ``telemetry``, ``report``, ``sessions``, ``engine``,
``recording``, ``config`` ...), and nothing imports it. No module of this package imports the
package itself back, only its sibling modules.

Every user mistake ends as one line on stderr and exit code 2 (``SpectuiError``). ``spectui
--help`` imports every family, so their top levels stay light: llama.cpp, numpy and Textual
load inside the command functions.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from typing import TextIO

from spectui import __version__
from spectui.cli import chat, config_cmd, history, lab, models, node, quality, recordings, run, runtime, tune, views, watch, workload
from spectui.cli.parsing import Parser
from spectui.cli.profiles import add_profile_option, parse_args
from spectui.errors import SpectuiError
from spectui.format import terminal_safe

#: The command families, in the order ``spectui --help`` lists their subcommands.
FAMILIES = (run, chat, recordings, views, lab, workload, quality, tune, models, history, watch, runtime, node, config_cmd)

#: Commands that never load an engine (recordings, history, the catalogue's metadata).
_ENGINE_FREE = frozenset({"report", "diff", "gate", "export", "replay", "history", "models", "watch", "runtime", "config"})

#: Flags of ``spectui`` itself; any other leading flag starts ``spectui run``.
_OWN_FLAGS = ("-h", "--help", "--version")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="spectui", description="Does speculative decoding help on this machine, and is it exact?")
    parser.add_argument("--version", action="version", version=f"spectui {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    for family in FAMILIES:
        family.register(sub)
    add_profile_option(parser)  # every command runs with a profile of the config files
    return parser


def _show_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file: TextIO | None = None, line: str | None = None
) -> None:
    """spectui's own warnings (a draft memory file ignored, ...) are one line, as errors are."""
    if category.__module__.startswith("spectui"):
        text = terminal_safe(str(message))  # a warning may quote a file's or a server's words
        print(text if text.startswith("spectui:") else f"spectui: warning: {text}", file=file or sys.stderr)
    else:
        _default_show_warning(message, category, filename, lineno, file, line)


_default_show_warning = warnings.showwarning


def _llama_before_numpy() -> None:
    """Load llama.cpp's library before anything loads numpy's. With a CUDA build of
    llama-cpp-python (CUDA 13, an NVIDIA H200, numpy 2.5.2 and its bundled OpenBLAS) every model
    load segfaulted when numpy had been imported first, with --gpu-layers -1 and 0 alike, and ran
    when llama_cpp came first (benchmarks/results/cuda-probe-2026-11-26.txt). Here, not at
    ``import spectui``: the commands that read recordings never pay for llama.cpp."""
    if "numpy" in sys.modules:
        return  # too late to change the order (never so for the console script)
    try:
        import llama_cpp  # noqa: F401 - imported for its side effect: llama.cpp's library loads first
    except (ImportError, OSError):  # a load says why, in one line
        pass


def main(argv: Sequence[str] | None = None) -> int:
    warnings.showwarning = _show_warning
    args_in = list(sys.argv[1:] if argv is None else argv)
    if not args_in or (args_in[0].startswith("-") and args_in[0] not in _OWN_FLAGS):
        args_in.insert(0, "run")  # `spectui` alone, or `spectui --headless ...`, is a run
    try:
        # the config files' values are the defaults (spectui.cli.profiles); a flag beats them
        args = parse_args(build_parser(), args_in)
        # every session this command records keeps the profile and each setting's origin
        from spectui.sessions.record import set_command_provenance

        set_command_provenance(getattr(args, "provenance", None))
        if args.command not in _ENGINE_FREE:
            _llama_before_numpy()
        return args.func(args)
    except SpectuiError as exc:
        print(f"spectui: error: {terminal_safe(str(exc))}", file=sys.stderr)  # it may quote a server's or a file's words
        return exc.exit_code
    except KeyboardInterrupt:  # Ctrl-C while a model loads, or a second one while a run stops
        print("spectui: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `spectui ... | head`: the reader has all it wanted
        return 0
