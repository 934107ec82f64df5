"""The parser every command uses and argparse's helpers: a usage error as one line, the old
spellings that still parse (one vocabulary for every command: docs/reference/conventions.md),
``--charts`` / ``--no-charts``, a command line minus an option, and the argparse types that
check an output path or an OTLP endpoint before a run rather than after it.

Light on purpose: ``spectui --help`` imports this through every family, so only the standard
library and ``spectui.errors`` load here.
"""

from __future__ import annotations

import argparse
import builtins
import os
from collections.abc import Callable, Sequence
from typing import Any, NoReturn
from urllib.parse import urlsplit

from spectui.errors import SpectuiError


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``SpectuiError``, exit 2), like every other error;
    and old spellings that took a value where the flag now takes none (``tune --charts on``)
    still parse (one vocabulary for every command: docs/reference/conventions.md)."""

    def error(self, message: str) -> NoReturn:
        raise SpectuiError(message)

    def parse_known_args(self, args=None, namespace=None):  # noqa: ANN001, ANN201 - argparse's own signature
        if args is not None:
            args = new_spellings(list(args))
        return super().parse_known_args(args, namespace)


#: ``--charts on|off`` (tune, before one vocabulary): now ``--charts`` / ``--no-charts``
_VALUED_OLD_FLAGS = {("--charts", "on"): "--charts", ("--charts", "off"): "--no-charts"}


def new_spellings(args: list[str]) -> list[str]:
    """``--charts on`` / ``--charts=off`` as today's ``--charts`` / ``--no-charts``."""
    out, i = [], 0
    while i < len(args):
        flag, _, value = args[i].partition("=")
        if value and (flag, value) in _VALUED_OLD_FLAGS:
            out.append(_VALUED_OLD_FLAGS[(flag, value)])
        elif i + 1 < len(args) and (args[i], args[i + 1]) in _VALUED_OLD_FLAGS:
            out.append(_VALUED_OLD_FLAGS[(args[i], args[i + 1])])
            i += 1
        else:
            out.append(args[i])
        i += 1
    return out


def add_charts_arguments(p: argparse.ArgumentParser, what: str) -> None:
    """``--charts`` / ``--no-charts`` (default: when stdout is a terminal), the same on every command."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--charts", action="store_true", default=None, help=f"draw {what} as text charts (default: when stdout is a terminal)")
    g.add_argument("--no-charts", dest="charts", action="store_false", help="leave the charts out")


def add_old_spelling(
    p: argparse.ArgumentParser,
    flag: str,
    dest: str,
    *,
    type: Callable[[str], Any] = str,  # str keeps the text as add_argument's default (None) does
    nargs: str | None = None,
    metavar: str | None = None,
    action: str | builtins.type[argparse.Action] = "store",
) -> None:
    """An old spelling of a flag, hidden from ``--help``, that still works (one vocabulary);
    the keywords are ``add_argument``'s."""
    p.add_argument(flag, dest=dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS, type=type, nargs=nargs, metavar=metavar, action=action)


class JoinComma(argparse.Action):
    """An old space-separated list flag (``--only A B``) read as today's comma list ("A,B")."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        # nargs="+" hands over a list of strings; a lone string would be one name, not its letters
        setattr(namespace, self.dest, ",".join([values] if isinstance(values, str) else values or []))


def without_option(argv: Sequence[str], option: str) -> list[str]:
    """A command line minus one option that takes a value (``--host NODE``, ``--host=NODE``)."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word == option:
            skip = True
        elif not word.startswith(option + "="):
            out.append(word)
    return out


# -- argparse types for files and telemetry destinations (``run`` and ``export``) --------------


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
