"""The config files' values as the commands' argparse defaults (``spectui.profiles`` reads the
files; docs/guide/profiles.md says how to write them).

``parse_args(parser, argv)`` stands in for ``parser.parse_args(argv)``. It finds the command the
words name, notes which options the command line gives, reads the config files and checks every
table and key against the options the real parsers take, turns the values for this command into
its parser's defaults (each through its option's own type, choices and action, so a wrong value
is refused with its ``file:line`` before anything loads), then parses. What it leaves on the
namespace:

* ``args.provenance``: the profile and each setting's origin (a ``Provenance``, which the
  recording's header keeps: ``record_session(provenance=...)``);
* ``args.profiles``: the loaded files and the parser, for ``spectui config``.

The option names come from the parsers, never from a list kept here: a new flag is a new key.
Before any value is taken, each file found passes ``spectui.cli.trust``'s guard. A file spectui
will not read (another's, one others could write, not a regular file, unreadable) is skipped
with one warning line saying where it is, why, and how to trust it, and the command goes on
without it: a stranger's ``spectui.toml`` in ``/tmp`` must not stop every command below it. A
project file setting a key of ``spectui.profiles.TRUSTED_KEYS`` that the user has not trusted
is refused in one line (exit 2) and nothing runs. ``spectui config`` lists either as skipped,
with why, so it can be looked at and trusted.
"""

from __future__ import annotations

import argparse
import copy
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spectui import paths
from spectui.cli.trust import read_guarded, trust_state, trusted_files
from spectui.errors import SpectuiError
from spectui.profiles import (
    ENV,
    FLAG,
    PROFILE_ENV,
    PROJECT_FILE,
    SENSITIVE,
    USER_FILE,
    ConfigFile,
    Profiles,
    Setting,
    find_project_file,
    project_folders,
    read_config,
    sensitive_keys,
    show_value,
    shown,
    toml_value,
)
from spectui.recording.schema import Provenance, SettingOrigin

_PROFILE_DEST = "profile"
#: The commands that show and fix the files (``spectui config``): a file refused there is a row
#: of ``config show`` rather than an error, or a refused file could never be trusted
_LENIENT = frozenset({"config"})
#: Options whose value is a person's text (the prompt, the system prompt), not a setting: the
#: header says that a flag gave them, not what they said
_TEXTS = frozenset({"prompt", "system"})


# -- the parsers, walked ---------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _leaves(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers that parse options under ``parser`` (``node serve`` for ``node``)."""
    nested = _subcommands(parser)
    if not nested:
        return [parser]
    out: list[argparse.ArgumentParser] = []
    for sub in nested.values():
        out += [leaf for leaf in _leaves(sub) if all(leaf is not seen for seen in out)]
    return out


def commands(parser: argparse.ArgumentParser) -> dict[str, list[argparse.ArgumentParser]]:
    """Each command of ``spectui`` and the parsers of its options (one, or its subcommands')."""
    return {name: _leaves(sub) for name, sub in _subcommands(parser).items()}


def option_actions(leaf: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """A command's config keys: its long options without the dashes, as ``--help`` lists them
    (hidden old spellings, ``--help`` and ``--profile`` itself are no keys)."""
    out = {}
    for action in leaf._actions:
        if action.help == argparse.SUPPRESS or action.dest in (_PROFILE_DEST, "help", "version"):
            continue
        for option in action.option_strings:
            if option.startswith("--"):
                out[option[2:]] = action
    return out


def add_profile_option(parser: argparse.ArgumentParser) -> None:
    """``--profile NAME`` on every command: the profile of the config files to run with."""
    for leaves in commands(parser).values():
        for leaf in leaves:
            if "--profile" not in leaf._option_string_actions:
                leaf.add_argument(
                    "--profile", metavar="NAME", default=None,
                    help=f"run with this profile of the config files (default: ${PROFILE_ENV}); `spectui config show` lists what it sets",
                )


def _command_at(parser: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[str, argparse.ArgumentParser] | None:
    """The command the words name and the parser of its options; None for ``--help``,
    ``--version`` or a word that is no command (argparse says so itself)."""
    top = _subcommands(parser)
    if not argv or argv[0] not in top:
        return None
    name, leaf, rest = argv[0], top[argv[0]], list(argv[1:])
    while nested := _subcommands(leaf):
        word = next((w for w in rest if not w.startswith("-")), None)
        if word not in nested:
            return None
        leaf, rest = nested[word], rest[rest.index(word) + 1:]
    return name, leaf


# -- a TOML value as the option would take it -------------------------------------------------


def _convert(action: argparse.Action, text: str) -> Any:  # whatever the option's type makes
    """``text`` through the option's type and choices, as argparse checks a flag's value."""
    kind = action.type if callable(action.type) else str
    try:
        value = kind(text)
    except argparse.ArgumentTypeError as exc:
        raise ValueError(str(exc)) from None
    except (TypeError, ValueError):
        raise ValueError(f"invalid {getattr(kind, '__name__', 'value')} value: {text!r}") from None
    if action.choices is not None and value not in action.choices:
        raise ValueError(f"invalid choice: {text!r} (choose from {', '.join(map(repr, action.choices))})")
    return value


def _as_text(option: str, value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"wrong type: {option} takes a string or a number, not {toml_value(value)}")
    return str(value)


def option_value(leaf: argparse.ArgumentParser, action: argparse.Action, value: object, builtin: object) -> object:
    """What the option's destination holds when the command line gives it ``value`` (a TOML
    value): the action itself runs on a scratch namespace, so a flag's const, a list option's
    items and a custom action come out as they do from argparse. Raises ValueError saying why
    the value does not fit."""
    scratch = argparse.Namespace(**{action.dest: copy.copy(builtin)})
    option = next(o for o in action.option_strings if o.startswith("--"))
    if action.nargs == 0:  # a flag: true is given, false is not
        if not isinstance(value, bool):
            raise ValueError(f"wrong type: {option} takes no value, so write true or false (not {toml_value(value)})")
        if not value:
            return builtin
        action(leaf, scratch, [], option)
    elif action.nargs in (None, "?"):
        if isinstance(value, list):
            raise ValueError(f"wrong type: {option} takes one value, not a list")
        action(leaf, scratch, _convert(action, _as_text(option, value)), option)
    else:  # a list option (nargs "+", "*" or a number): a TOML list, or one value
        items = value if isinstance(value, list) else [value]
        if isinstance(action.nargs, int) and len(items) != action.nargs:
            raise ValueError(f"{option} takes {action.nargs} values, got {len(items)}")
        action(leaf, scratch, [_convert(action, _as_text(option, v)) for v in items], option)
    return getattr(scratch, action.dest)


# -- the command line with its config files -----------------------------------------------------


@dataclass(frozen=True)
class FileStatus:
    """A config file found: read or skipped, and why (``trusted``, or what keeps it out)."""

    scope: str  # "user" or "project"
    path: Path
    read: bool
    why: str = ""
    #: skipped, the command going on without it (a file spectui will not read), rather than refused
    skipped: bool = False


class ConfigSkipped(UserWarning):
    """A config file spectui will not read, left out of the command in one warning line."""


@dataclass
class LoadedProfiles:
    """What ``spectui config`` shows: the parser, the files found, the profile chosen."""

    parser: argparse.ArgumentParser
    profiles: Profiles
    user_file: Path
    project_file: Path | None
    profile: str | None
    profile_origin: str
    cwd: Path = field(default_factory=Path.cwd)
    #: every file found, read or skipped, the user's first
    found: list[FileStatus] = field(default_factory=list)

    def settings(self, command: str) -> dict[str, tuple[Setting, argparse.Action]]:
        """What the files set for ``command``, each with the option it sets (validated)."""
        settings = self.profiles.settings(command, self.profile)
        out = {}
        for leaf in commands(self.parser)[command]:  # in the order --help lists the options
            for key, action in option_actions(leaf).items():
                if key in settings and key not in out:
                    _checked_value(leaf, action, settings[key])
                    out[key] = (settings[key], action)
        return out


def home_folder() -> Path | None:
    """``$HOME`` (where the search for a project file stops at the latest); None if unknown."""
    try:
        return Path.home()
    except RuntimeError:
        return None


def known_options(parser: argparse.ArgumentParser) -> tuple[dict[str, set[str]], list[set[str]]]:
    """Each command's config keys, and the groups of keys that exclude each other."""
    by_command = commands(parser)
    known = {name: {key for leaf in leaves for key in option_actions(leaf)} for name, leaves in by_command.items()}
    exclusive = [
        {o[2:] for a in group._group_actions for o in a.option_strings if o.startswith("--")}
        for leaves in by_command.values() for leaf in leaves for group in leaf._mutually_exclusive_groups
    ]
    return known, exclusive


def trust_it(path: Path) -> str:
    return f"spectui config trust {path}"


def examine(path: Path, scope: str, record: Mapping[str, str]) -> tuple[ConfigFile | None, FileStatus | None, str]:
    """One file found or not: (the file parsed or None, its status or None when there is no
    such file, the one-line refusal or ""). A file whose bytes are trusted is read as it is;
    else one others could write is not read at all, and a project file that sets a sensitive
    key is refused whole. A file that is not valid TOML raises, as it always did."""
    try:
        read = read_guarded(path)
    except SpectuiError as exc:  # unreadable, not a regular file, too big: skipped, never a stop
        why = str(exc).removeprefix(f"{path}: ")
        skip = f"{path}: skipped, the command goes on without it: {why}"
        return None, FileStatus(scope, path, False, why, skipped=True), skip
    if read.raw is None:
        return None, None, ""
    state = trust_state(path, read.raw, record) if record else ""
    changed = " (it changed since you trusted it)" if state == "changed" else ""
    if read.unsafe and state != "trusted":
        skip = (f"{path}: skipped, the command goes on without it: {read.unsafe}{changed}; spectui reads a config file only"
                f" when it is yours and no one else can write it or its folder: fix that, or read the file and trust it"
                f" ({trust_it(path)})")  # fmt: skip
        return None, FileStatus(scope, path, False, read.unsafe + changed, skipped=True), skip
    f = read_config(path, scope, read.raw)
    assert f is not None  # there were bytes
    keys = sensitive_keys(f) if scope != "user" and state != "trusted" else []
    if keys:
        first = keys[0]
        refusal = (f"{first.origin}: {first.key} {SENSITIVE[first.key]}, which a project file may set only once you trust it{changed}:"
                   f" read the file, then {trust_it(path)}")  # fmt: skip
        names = ", ".join(dict.fromkeys(k.key for k in keys))
        return None, FileStatus(scope, path, False, f"sets {names} and is not trusted{changed}"), refusal
    return f, FileStatus(scope, path, True, "trusted" if state == "trusted" else ""), ""


def load_profiles(
    parser: argparse.ArgumentParser, profile: str | None, profile_origin: str, *, cwd: Path | None = None, strict: bool = True
) -> LoadedProfiles:
    """Read and check the user's and the project's files against ``parser``'s commands.
    ``strict``: a file refused (see ``examine``) is a ``SpectuiError``, and a file skipped is
    one ``ConfigSkipped`` warning line; else either is left out, and ``found`` says why."""
    cwd = cwd or Path.cwd()
    user_file = paths.config_dir() / USER_FILE
    project_file = find_project_file(cwd, home_folder())
    record = trusted_files()
    files, found = [], []
    for path, scope in ((user_file, "user"), (project_file, "project")):
        if path is None:
            continue
        f, status, refusal = examine(path, scope, record)
        if refusal and strict and status is not None and status.skipped:
            warnings.warn(shown(refusal), ConfigSkipped, stacklevel=2)
        elif refusal and strict:
            raise SpectuiError(refusal)
        files += [f] if f else []
        found += [status] if status else []
    known, exclusive = known_options(parser)
    profiles = Profiles(files, known, exclusive)
    if profile:
        profiles.check_profile(profile, profile_origin)
    return LoadedProfiles(parser, profiles, user_file, project_file, profile, profile_origin, cwd, found)


def _checked_value(leaf: argparse.ArgumentParser, action: argparse.Action, setting: Setting) -> object:
    try:
        return option_value(leaf, action, setting.value, leaf.get_default(action.dest))
    except ValueError as exc:  # an option's type may echo the value as it is: a newline in it stays escaped
        raise SpectuiError(f"{setting.origin}: {setting.key} = {toml_value(setting.value)}: {shown(str(exc))}") from None


def _given(parser: argparse.ArgumentParser, leaf: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """Only what the command line itself gives: parsed once with no defaults and nothing
    required (the config files may supply a required option), then the parser is as it was."""
    saved = [(a, a.default, a.required) for a in leaf._actions]
    try:
        for action in leaf._actions:
            action.default, action.required = argparse.SUPPRESS, False
        return parser.parse_args(argv)
    finally:
        for action, default, required in saved:
            action.default, action.required = default, required


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str], *, environ: Mapping[str, str] | None = None) -> argparse.Namespace:
    """``parser.parse_args(argv)`` with the config files' values for the command as defaults
    (see the module's docstring); a mistake in a file is one ``SpectuiError`` naming ``file:line``."""
    environ = os.environ if environ is None else environ
    found = _command_at(parser, argv)
    if found is None:
        return parser.parse_args(argv)
    command, leaf = found
    if "-h" in argv or "--help" in argv:
        return parser.parse_args(argv)  # prints the help and exits
    given = vars(_given(parser, leaf, argv))
    if _PROFILE_DEST in given:  # `--profile ""`: none, whatever the environment says
        profile, profile_origin = given[_PROFILE_DEST] or None, FLAG
    else:
        profile, profile_origin = environ.get(PROFILE_ENV) or None, ENV
    loaded = load_profiles(parser, profile, profile_origin, strict=command not in _LENIENT)
    options = option_actions(leaf)
    settings = loaded.profiles.settings(command, profile)
    settings = {k: s for k, s in settings.items() if k in options}  # a nested command's sibling's options
    builtin = {a.dest: leaf.get_default(a.dest) for a in options.values()}
    defaults = {}
    for key, setting in settings.items():
        action = options[key]
        defaults[action.dest] = _checked_value(leaf, action, setting)
        action.required = False  # the file gives it
    leaf.set_defaults(**defaults)
    args = parser.parse_args(argv)
    args.profile = profile
    # a flag beats the files: an option the files set that excludes a flag given is unset
    for group in leaf._mutually_exclusive_groups:
        members = {a.dest for a in group._group_actions}
        if members & given.keys():
            for key in [k for k, s in settings.items() if options[k].dest in members - given.keys()]:
                setattr(args, options[key].dest, builtin[options[key].dest])
                del settings[key]
    args.provenance = Provenance(
        command=command, profile=profile or "", profile_origin=profile_origin if profile else "",
        settings=_origins(options, args, given, settings),
    )
    args.profiles = loaded
    return args


def _origins(options: Mapping[str, argparse.Action], args: argparse.Namespace, given: Mapping[str, object],
             settings: Mapping[str, Setting]) -> list[SettingOrigin]:  # fmt: skip
    """Every option a flag or a file set, once per destination, with where it came from."""
    out, done = [], set()
    for key, action in options.items():
        dest = action.dest
        if dest in done:
            continue
        if dest in given and _spelled(action, args):
            value, origin = ("true" if action.nargs == 0 else show_value(getattr(args, dest))), FLAG
        elif dest not in given and key in settings:
            value, origin = show_value(settings[key].value), settings[key].origin
        else:
            continue
        # a prompt's text is in the header's config already, and a redacted copy must hold none
        out.append(SettingOrigin(option=key, value="" if key in _TEXTS else value, origin=origin))
        done.add(dest)
    return out


def _spelled(action: argparse.Action, args: argparse.Namespace) -> bool:
    """Whether this option (not another of its destination: ``--charts`` / ``--no-charts``)
    is the one the command line gave."""
    return action.nargs != 0 or isinstance(action, argparse._CountAction) or getattr(args, action.dest) == action.const


def options_set(args: argparse.Namespace) -> set[str]:
    """The options a flag or a config file set for this command line (none when ``args`` did
    not come through ``parse_args``)."""
    provenance = getattr(args, "provenance", None)
    return {s.option for s in provenance.settings} if provenance is not None else set()


def words_for_node(parser: argparse.ArgumentParser, words: Sequence[str], args: argparse.Namespace) -> list[str]:
    """A command line for a node that runs the whole command (``tune --host``): ``words`` (the
    command and its flags, without ``--host``) with every setting the config files gave spelled
    out as a flag, since the node has no copy of the files, and without ``--profile``."""
    found = _command_at(parser, words)
    provenance = getattr(args, "provenance", None)
    if found is None or provenance is None:
        return list(words)
    options = option_actions(found[1])
    from spectui.cli.parsing import without_option

    out = without_option(words, "--profile")
    for setting in provenance.settings:
        action = options.get(setting.option)
        if setting.origin == FLAG or action is None or action.dest == "host":
            continue
        value = getattr(args, action.dest)
        if action.nargs == 0:  # a switch: on, or left to the node's built-in
            out += [f"--{setting.option}"] if value == action.const else []
        else:
            out += [f"--{setting.option}", show_value(value)]
    return out


def where_files_are(cwd: Path) -> list[tuple[str, str, str]]:
    """The config files spectui reads: (which, "found" or "not found", where)."""
    user = paths.config_dir() / USER_FILE
    project = find_project_file(cwd, home_folder())
    return [
        ("user", "found" if user.is_file() else "not found", str(user)),
        ("project", "found", str(project)) if project else ("project", "not found", looked_for(cwd)),
    ]


def looked_for(cwd: Path) -> str:
    """Where a project file was looked for, in words."""
    folders = project_folders(cwd, home_folder())
    if len(folders) == 1:
        return f"{PROJECT_FILE} in {folders[0]} (no folder above it: a repository's root, your home or /)"
    return f"{PROJECT_FILE} in {folders[0]} or a folder above it up to {folders[-1]}"
