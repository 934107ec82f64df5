"""``spectui config``: what the config files set, where they are, and which are trusted.

``spectui config show [--profile NAME] [COMMAND]`` lists every setting of COMMAND (default
``run``) that the config files take away from its built-in default, with its value and its
origin (``file:line``; the profile's name from ``flag`` or ``env SPECTUI_PROFILE``), checked as
a run would check it: a bad file is the same one line and exit 2. Below it, every file found,
read or skipped and why (others can write it, it sets a key only a trusted file may set). ``spectui
config path`` says where the files are looked for and which exist. ``spectui config trust
PATH`` records a file's bytes as trusted (``spectui.cli.trust``), ``untrust`` forgets it. The
files are ``spectui.profiles``'; the values are read through the real parsers by
``spectui.cli.profiles``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from spectui.errors import SpectuiError
from spectui.format import terminal_safe

#: The command ``config show`` describes when none is named: ``spectui`` alone runs it.
DEFAULT_COMMAND = "run"
#: The precedence, said once under the table.
PRECEDENCE = "a flag > the profile > the project's [defaults] > the user's [defaults] > built-in"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="the config files: what they set for a command and where each value comes from; where they are;"
                                      " which are trusted")
    actions = p.add_subparsers(dest="config_command", required=True, metavar="{show,path,trust,untrust}")
    show = actions.add_parser("show", help="every setting of COMMAND the config files (and the profile) change, with its file:line;"
                                           " the files read and skipped")
    show.add_argument("config_of", nargs="?", metavar="COMMAND", default=DEFAULT_COMMAND,
                      help=f"the command whose settings to show (default {DEFAULT_COMMAND})")
    show.set_defaults(func=cmd_show)
    path = actions.add_parser("path", help="where the config files are looked for, and which exist")
    path.set_defaults(func=cmd_path)
    trust = actions.add_parser("trust", help="trust a project file as it is now: it may then set the keys that run a program or send data"
                                             " (llama-server, server, host, ...), until its bytes change")
    trust.add_argument("trust_path", metavar="PATH", help="the spectui.toml (or the folder holding it) you have read")
    trust.set_defaults(func=cmd_trust)
    untrust = actions.add_parser("untrust", help="forget a file `spectui config trust` trusted")
    untrust.add_argument("trust_path", metavar="PATH", help="the spectui.toml (or the folder holding it)")
    untrust.set_defaults(func=cmd_untrust)


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
        print(f"spectui {command}: every setting is built-in ({terminal_safe(_files_said(loaded))})")
    else:
        # the origin last: its paths are the one column whose width changes from machine to machine
        print(f"spectui {command}: {len(rows)} setting{'s' if len(rows) != 1 else ''} not left at the built-in default")
        print(text_table(["option", "value", "origin"], rows))
        print(f"  precedence: {PRECEDENCE}")
    print("config files:")
    print(text_table(None, _file_rows(loaded)))
    return 0


def _files_said(loaded) -> str:  # noqa: ANN001 - a LoadedProfiles
    found = [str(f.path) for f in loaded.profiles.files]
    if found:
        return "the config files set nothing for it: " + ", ".join(found)
    return "no config file read; `spectui config path` says where they are looked for"


def _file_rows(loaded) -> list[list[str]]:  # noqa: ANN001 - a LoadedProfiles
    """A row per file found (read, or skipped and why), and one for a project file not found."""
    from spectui.cli.profiles import looked_for, trust_it

    rows = []
    for status in loaded.found:
        if status.read:
            rows.append(["read", status.scope, str(status.path) + (" (trusted)" if status.why else "")])
        else:
            fix = f"; {trust_it(status.path)} once you have read it"
            rows.append(["skipped", status.scope, f"{status.path}: {status.why}{fix}"])
    if not any(s.scope == "project" for s in loaded.found):
        rows.append(["none", "project", f"no {looked_for(loaded.cwd)}"])
    return rows


def cmd_path(args: argparse.Namespace) -> int:
    from spectui.cli.profiles import where_files_are
    from spectui.cli.trust import trust_file, trusted_files
    from spectui.format import text_table
    from spectui.paths import dashboard_state_file

    rows = [list(row) for row in where_files_are(Path.cwd())]
    state = dashboard_state_file()
    rows.append(["state", "found" if state.is_file() else "not found", str(state)])
    trusted = len(trusted_files())
    rows.append(["trusted", f"{trusted} file{'s' if trusted != 1 else ''}" if trusted else "none", str(trust_file())])
    print(text_table(None, rows, indent=0))
    print("(state: what the dashboard remembers, its theme, K and mode; trusted: the project files `spectui config trust`"
          " trusted, with a hash of each; spectui never writes a config file)")
    return 0


def _named_file(text: str) -> Path:
    from spectui.profiles import PROJECT_FILE

    path = Path(text).expanduser()
    return path / PROJECT_FILE if path.is_dir() else path


def cmd_trust(args: argparse.Namespace) -> int:
    from spectui.cli.profiles import known_options
    from spectui.cli.trust import read_guarded, trust
    from spectui.profiles import Profiles, read_config, sensitive_keys, toml_value

    path = _named_file(args.trust_path)
    read = read_guarded(path)
    if read.raw is None:
        raise SpectuiError(f"{path}: no such file")
    f = read_config(path, "project", read.raw)
    assert f is not None  # there were bytes
    known, exclusive = known_options(args.profiles.parser)
    Profiles([f], known, exclusive)  # a file with a mistake is said now, not at its first run
    sha256 = trust(path, read.raw)
    print(f"trusted {terminal_safe(str(path.resolve()))} (sha256 {sha256[:16]}...): spectui reads it as it is now; a change to it untrusts it")
    for setting in sensitive_keys(f):
        print(f"  it sets {setting.key} = {toml_value(setting.value)} (line {setting.origin.rsplit(':', 1)[1]})")
    if read.unsafe:
        print(f"  note: {terminal_safe(read.unsafe)}: these bytes are trusted, not the file; a change by anyone is refused until trusted again")
    return 0


def cmd_untrust(args: argparse.Namespace) -> int:
    from spectui.cli.trust import trusted_path, untrust

    path = _named_file(args.trust_path)
    if untrust(path):
        print(f"untrusted {terminal_safe(trusted_path(path))}: a project file there may no longer set the keys that run a program or send data")
    else:
        print(f"{terminal_safe(trusted_path(path))} was not trusted; nothing to do")
    return 0
