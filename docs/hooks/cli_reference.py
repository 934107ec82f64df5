"""The CLI reference page (``reference/cli.md``), generated from spectui's own argparse parsers.

A mkdocs hook (``hooks:`` in mkdocs.yml): ``on_files`` adds the page to the build, made from
``spectui.cli.build_parser()`` at that moment, so the documented flags are always the flags the
installed spectui parses; nothing is written into ``docs/``. Hidden spellings (``help=SUPPRESS``:
the old names the one vocabulary replaced) stay hidden here as in ``--help``.

``python docs/hooks/cli_reference.py`` prints the page (to read it without building the site);
tests/unit/test_docs.py checks that it names every subcommand and every long option.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path

#: Where the page lands in the site (nav in mkdocs.yml names it).
PAGE = "reference/cli.md"
#: Usage lines wrap at this width, whatever the terminal that builds the site.
USAGE_WIDTH = 100

_REPO = Path(__file__).resolve().parents[2]


def build_parser() -> argparse.ArgumentParser:
    if str(_REPO) not in sys.path:  # `mkdocs build` from a checkout whose spectui is not installed
        sys.path.insert(0, str(_REPO))
    from spectui.cli import build_parser as spectui_parser

    return spectui_parser()


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    """(command words, one-line help, parser) of every subcommand, nested ones (``node serve``) included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield (*path, name), helps.get(name, ""), sub
                yield from commands(sub, (*path, name))


def documented_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The actions ``--help`` shows, less ``-h`` itself and the subcommand list."""
    return [
        a for a in parser._actions
        if a.help != argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
    ]


# -- Markdown -----------------------------------------------------------------------------

_CODE_SPAN = re.compile(r"(`[^`]*`)")


def _prose(text: str) -> str:
    """Help text as Markdown table-cell text: ``<time>`` must not read as an HTML tag, a ``|``
    must not end the cell, ``*`` and ``_`` must not turn into emphasis. Code spans stay as written."""
    out = []
    for piece in _CODE_SPAN.split(" ".join(text.split())):
        if piece.startswith("`") and piece.endswith("`") and len(piece) > 1:
            out.append(piece.replace("|", "\\|"))
        else:
            piece = piece.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            out.append(re.sub(r"([|*_\\\[\]])", r"\\\1", piece))
    return "".join(out)


def _formatter(parser: argparse.ArgumentParser) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog=parser.prog, width=USAGE_WIDTH)


def _usage(parser: argparse.ArgumentParser) -> str:
    f = _formatter(parser)
    f.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return f.format_help().strip()


def _spelling(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """``--k N`` / ``-o, --output FILE`` / ``FILE`` as ``--help`` writes an option."""
    f = _formatter(parser)
    if not action.option_strings:
        return f._format_args(action, f._get_default_metavar_for_positional(action))
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    args = f._format_args(action, f._get_default_metavar_for_optional(action))
    return ", ".join(action.option_strings) + " " + args


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    return _prose(_formatter(parser)._expand_help(action)) if action.help else ""


def _sentence(text: str) -> str:
    text = " ".join(text.split()).rstrip(".")
    return text[:1].upper() + text[1:] + "."


def _anchor(words: tuple[str, ...]) -> str:
    return "-".join(("spectui", *words))


def _options_table(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| option | what it does |", "| --- | --- |"]
    for action in documented_options(parser):
        rows.append(f"| `{_spelling(parser, action).replace('|', chr(92) + '|')}` | {_help(parser, action)} |")
    return rows if len(rows) > 2 else []


def render(parser: argparse.ArgumentParser | None = None) -> str:
    parser = parser or build_parser()
    found = list(commands(parser))
    lines = [
        "# CLI reference",
        "",
        "Every command and flag of the installed spectui, generated from its own argument parsers",
        "when these pages are built (`docs/hooks/cli_reference.py`), so nothing here can differ from",
        "what `spectui COMMAND --help` prints. What the flags share across commands (one name for",
        "one idea, lists, exit codes): [one vocabulary for every command](conventions.md).",
        "",
        "`spectui` alone opens the dashboard, as `spectui run` does; a leading flag that is not",
        "`--help` or `--version` starts `spectui run` too.",
        "",
        "| command | what it does |",
        "| --- | --- |",
    ]
    for words, summary, sub in found:
        lines.append(f"| [`spectui {' '.join(words)}`](#{_anchor(words)}) | {_prose(summary or sub.description or '')} |")
    lines += ["", "## spectui", "", "```text", _usage(parser), "```", "", *_options_table(parser)]
    for words, summary, sub in found:
        depth = "#" * min(2 + len(words) - 1, 4)
        lines += ["", f"{depth} spectui {' '.join(words)} {{ #{_anchor(words)} }}", ""]
        for text in dict.fromkeys(filter(None, (summary, sub.description))):  # each once, in order
            lines += [_prose(_sentence(text)), ""]
        lines += ["```text", _usage(sub), "```", ""]
        lines += _options_table(sub)
    return "\n".join(lines).rstrip() + "\n"


# -- the mkdocs hook ------------------------------------------------------------------------


def on_files(files, config):  # noqa: ANN001, ANN201 - mkdocs' hook signature
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=render()))
    return files


if __name__ == "__main__":
    sys.stdout.write(render())
