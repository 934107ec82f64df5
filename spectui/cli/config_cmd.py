"""``spectui config``: what the config files set, and where they are.

``spectui config show [--profile NAME] [COMMAND]`` lists every setting of COMMAND (default
``run``) that the config files take away from its built-in default, with its value and its
origin (``file:line``; the profile's name from ``flag`` or ``env SPECTUI_PROFILE``), checked as
a run would check it: a bad file is the same one line and exit 2. ``spectui config path``
says where the files are looked for and which exist. The files are ``spectui.profiles``'; the
values are read through the real parsers by ``spectui.cli.profiles``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from spectui.errors import SpectuiError

#: The command ``config show`` describes when none is named: ``spectui`` alone runs it.
DEFAULT_COMMAND = "run"
#: The precedence, said once under the table.
PRECEDENCE = "a flag > the profile > the project's [defaults] > the user's [defaults] > built-in"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="the config files: what they set for a command and where each value comes from; where they are")
    actions = p.add_subparsers(dest="config_command", required=True, metavar="{show,path}")
    show = actions.add_parser("show", help="every setting of COMMAND the config files (and the profile) change, with its file:line")
    show.add_argument("config_of", nargs="?", metavar="COMMAND", default=DEFAULT_COMMAND,
                      help=f"the command whose settings to show (default {DEFAULT_COMMAND})")
    show.set_defaults(func=cmd_show)
    path = actions.add_parser("path", help="where the config files are looked for, and which exist")
    path.set_defaults(func=cmd_path)


def cmd_show(args: argparse.Namespace) -> int:
    import difflib

    from spectui.cli.profiles import commands
    from spectui.format import text_table
    from spectui.profiles import show_value

    loaded = args.profiles
    known = commands(loaded.parser)
    command = args.config_of
    if command not in known:
        near = difflib.get_close_matches(command, known, n=1)
        raise SpectuiError(f"unknown command '{command}'" + (f" (did you mean '{near[0]}'?)" if near else f"; commands: {', '.join(known)}"))
    settings = loaded.settings(command)
    rows = [["profile", loaded.profile, loaded.profile_origin]] if loaded.profile else []
    rows += [[key, show_value(setting.value), setting.origin] for key, (setting, _action) in settings.items()]
    if not rows:
        print(f"spectui {command}: every setting is built-in ({_files_said(loaded)})")
        return 0
    # the origin last: its paths are the one column whose width changes from machine to machine
    print(f"spectui {command}: {len(rows)} setting{'s' if len(rows) != 1 else ''} not left at the built-in default")
    print(text_table(["option", "value", "origin"], rows))
    print(f"  precedence: {PRECEDENCE}")
    return 0


def _files_said(loaded) -> str:  # noqa: ANN001 - a LoadedProfiles
    found = [str(f.path) for f in loaded.profiles.files]
    if found:
        return "the config files set nothing for it: " + ", ".join(found)
    return "no config file found; `spectui config path` says where they are looked for"


def cmd_path(args: argparse.Namespace) -> int:
    from spectui.cli.profiles import where_files_are
    from spectui.format import text_table
    from spectui.paths import dashboard_state_file

    rows = [list(row) for row in where_files_are(Path.cwd())]
    state = dashboard_state_file()
    rows.append(["state", "found" if state.is_file() else "not found", str(state)])
    print(text_table(None, rows, indent=0))
    print("(state: what the dashboard remembers, its theme, K and mode; spectui never writes a config file)")
    return 0
