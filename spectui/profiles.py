"""Config files with named profiles: the settings a person keeps, declared once, each value
traceable to the line that set it.

Two TOML files are read, either may be missing:

* the user's ``config.toml`` in the config folder (``spectui.paths.config_dir``);
* a project's ``spectui.toml``: the nearest one from the working directory up (a repository
  of prompts and gates shared by a team), looking no higher than the repository's root (a
  folder holding ``.git``) or the home folder, whichever comes first.

Trust, as git's ``safe.directory`` and direnv's ``allow`` do it: a file is read only when it is
the user's own and no one else can write it or its folder, and a project file may set a key of
``SENSITIVE`` (a program spectui runs, a place data or a credential is sent) only once the user
has trusted its bytes (``spectui config trust``). This module lists those keys and finds them
in a file; ``spectui.cli.trust`` checks owners and modes and keeps the trusted files' hashes.

Each may hold a ``[defaults]`` table and ``[profile.NAME]`` tables. Their keys are the long
option names of the commands, without the dashes (``target``, ``draft``, ``min-headroom-mb``,
``host``); the CLI hands them in, read from its argparse parsers. A key at the top of a table
applies to every command that has that option (and is ignored by the others); a sub-table named
for a command (``[profile.mini.gate]``) holds keys for that command only, and beats the shared
keys of its table. A flag that takes no value is ``true`` (given) or ``false`` (not given).

Precedence, highest first: a flag on the command line; the chosen profile (``--profile NAME``,
else ``$SPECTUI_PROFILE``); the project file's ``[defaults]``; the user file's ``[defaults]``;
the built-in default. A profile may be defined in either file; defined in both, the two are
one profile, the project file's keys beating the user file's.

This module knows TOML, the tables, the precedence and where each key is written
(``file:line``); it knows nothing of argparse. ``spectui.cli.profiles`` turns the values into
parser defaults, so each option's own type and choices validate them. Every mistake in a file
is one ``SpectuiError`` naming ``file:line``. Imports only the standard library and
``spectui.errors``.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from spectui.errors import SpectuiError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib

#: The user's file, in the config folder.
USER_FILE = "config.toml"
#: A project's file, found from the working directory up.
PROJECT_FILE = "spectui.toml"
#: Picks a profile when no ``--profile`` flag does.
PROFILE_ENV = "SPECTUI_PROFILE"
#: The origin of a value given on the command line, and of a profile named by the environment.
FLAG = "flag"
ENV = f"env {PROFILE_ENV}"

_TABLES = ("defaults", "profile")


@dataclass(frozen=True)
class ConfigFile:
    """One config file, read: its tables, and the line each table and key is written on."""

    path: Path
    scope: str  # "user" or "project"
    data: dict
    lines: Mapping[tuple[str, ...], int]

    def where(self, *keys: str) -> str:
        """``path:line`` of a key (or table); a key written inside an inline table is found at
        the line of the nearest enclosing key that has a line of its own."""
        for n in range(len(keys), 0, -1):
            line = self.lines.get(tuple(keys[:n]))
            if line is not None:
                return f"{self.path}:{line}"
        return f"{self.path}:1"


@dataclass(frozen=True)
class Setting:
    """A value a config file sets for an option, and where: ``origin`` is ``path:line``."""

    key: str
    value: object
    origin: str


#: What a key that needs trust can make spectui do, in the order the security page lists them.
PROGRAM = "runs a program"
BUILD = "starts a download or a build"
SERVER = "starts a server"
CONNECTION = "opens a connection or sends data"


@dataclass(frozen=True)
class TrustedKey:
    """A key only a file the user stands behind may set: what it can do (``PROGRAM``, ``BUILD``,
    ``SERVER``, ``CONNECTION``) and how, in words that follow the key's name."""

    key: str
    power: str
    why: str


#: The keys a file may set only when the user stands behind it: their own config file, a flag,
#: or a project file they trusted (``spectui config trust``). Each can start a download, a
#: build, a server, a connection or a program, or send data or a credential somewhere the file
#: chooses; anyone able to write a folder above where a person works could otherwise do that as
#: them. Every other key changes what is measured and how it is shown: a model or prompt file is
#: only read, and what it holds goes only where the user's own settings send it; recordings,
#: chat folders and the history index are written private (0600) wherever a file puts them.
#: The one table: the check reads it, and the security page's list is made from it
#: (docs/hooks/trust_reference.py). tests/unit/test_config_trust.py holds every option the
#: parsers take to this table or to its own list of reviewed keys, so a new option is
#: classified before it ships.
TRUSTED_KEYS: tuple[TrustedKey, ...] = (
    TrustedKey("llama-server", PROGRAM, "names a program spectui runs"),
    TrustedKey("runtime", SERVER, "starts a server program, and where none is built yet, downloads llama-cpp-python's source and builds one"),
    TrustedKey("sdist", BUILD, "names a source package spectui builds, running its build scripts"),
    TrustedKey("server", CONNECTION, "names a server spectui sends your prompts to"),
    TrustedKey("ar-server", CONNECTION, "names a server spectui sends your prompts to"),
    TrustedKey("api-key-env", CONNECTION, "names the environment variable whose value spectui sends to a server as its API key"),
    TrustedKey("host", CONNECTION, "names a machine spectui runs on over SSH with your keys, sending your prompts there"),
    TrustedKey("hosts", CONNECTION, "names machines spectui runs on over SSH with your keys, sending your prompts there"),
    TrustedKey("otel-endpoint", CONNECTION, "names a collector spectui sends the session's telemetry to"),
    TrustedKey("otel-file", CONNECTION, "names a file spectui writes the session's telemetry to, with modes others may read"),
)
#: ``TRUSTED_KEYS`` by key: why each needs trust.
SENSITIVE: Mapping[str, str] = {k.key: k.why for k in TRUSTED_KEYS}


def project_folders(start: Path, home: Path | None) -> list[Path]:
    """The folders a project file is looked for in, nearest first: ``start`` and the folders
    above it, up to and including the first that is a repository's root (holds ``.git``) or
    ``home``. Above those, others may write, and a team's file belongs to its repository."""
    start = start.resolve()
    home = home.resolve() if home is not None else None
    out = []
    for folder in (start, *start.parents):
        out.append(folder)
        if folder == home or (folder / ".git").exists():
            break
    return out


def find_project_file(start: Path, home: Path | None) -> Path | None:
    """The nearest ``spectui.toml`` of ``project_folders``."""
    for folder in project_folders(start, home):
        candidate = folder / PROJECT_FILE
        if candidate.is_file():
            return candidate
    return None


def read_config(path: Path, scope: str, raw: bytes | None = None) -> ConfigFile | None:
    """``path`` parsed (``raw``: its bytes, read already), or None when there is no such file.
    A file that cannot be read or is not TOML is one line naming ``path:line``."""
    if raw is None:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SpectuiError(f"{path}: cannot read the config file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SpectuiError(f"{path}:{line}: not UTF-8 text, so not a TOML config file") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpectuiError(_toml_error(path, text, str(exc))) from None
    except RecursionError:  # arrays or inline tables nested thousands deep
        raise SpectuiError(f"{path}:1: not valid TOML: nested too deeply") from None
    except ValueError as exc:  # tomllib's own int() of a number with thousands of digits
        raise SpectuiError(f"{path}:1: not valid TOML: {exc}") from None
    return ConfigFile(path, scope, data, key_lines(text))


def _toml_error(path: Path, text: str, message: str) -> str:
    """tomllib's "Invalid value (at line 3, column 5)" as ``path:3: not valid TOML: invalid value (column 5)``."""
    m = re.search(r"\s*\(at line (\d+), column (\d+)\)\s*$", message)
    if m:
        return f"{path}:{m.group(1)}: not valid TOML: {message[: m.start()]} (column {m.group(2)})"
    m = re.search(r"\s*\(at end of document\)\s*$", message)
    if m:
        return f"{path}:{len(text.splitlines()) or 1}: not valid TOML: {message[: m.start()]} (at the end)"
    return f"{path}:1: not valid TOML: {message}"


# -- where each key is written ---------------------------------------------------------------
# tomllib gives no positions, so the lines are found in the text: table headers (``[a.b]``,
# ``[[a.b]]``) and ``key = `` lines (bare, quoted or dotted keys), skipping the insides of
# multi-line strings. The parse itself is tomllib's: a line here only says where to look.

_PART = r"""(?:"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)"""
_DOTTED = rf"{_PART}(?:\s*\.\s*{_PART})*"
_HEADER = re.compile(rf"^\s*\[\[?\s*({_DOTTED})\s*\]\]?")
_KEY = re.compile(rf"^\s*({_DOTTED})\s*=")


def _parts(dotted: str) -> tuple[str, ...]:
    out = []
    for m in re.finditer(_PART, dotted):
        part = m.group(0)
        if part.startswith('"'):
            try:
                part = json.loads(part)
            except ValueError:
                part = part[1:-1]
        elif part.startswith("'"):
            part = part[1:-1]
        out.append(part)
    return tuple(out)


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """The first line (1-based) of every table header and key, by its full path."""
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    open_string = ""  # the quotes of a multi-line string this line is inside
    for number, line in enumerate(text.splitlines(), 1):
        if open_string:
            if line.count(open_string) % 2:
                open_string = ""
            continue
        header = _HEADER.match(line)
        key = None if header else _KEY.match(line)
        if header:
            table = _parts(header.group(1))
            lines.setdefault(table, number)
        elif key:
            lines.setdefault(table + _parts(key.group(1)), number)
        for quotes in ('"""', "'''"):
            if line.count(quotes) % 2:
                open_string = quotes
                break
    return lines


# -- the tables ----------------------------------------------------------------------------


def _nearest(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'X'?)`` for the closest known word, or ""."""
    known = sorted(set(known))
    match = difflib.get_close_matches(word, known, n=1, cutoff=0.6) or difflib.get_close_matches(
        word.replace("_", "-"), known, n=1, cutoff=0.6
    )
    return f" (did you mean {_quoted(match[0])}?)" if match else ""


def _table_name(keys: Sequence[str]) -> str:
    return "[" + ".".join(k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k) for k in keys) + "]"


def shown(word: str) -> str:
    """A name from a file or the environment as a message shows it: as it is, or escaped when
    it holds a character that would break the one line (a newline, a control character)."""
    return word if word.isprintable() else json.dumps(word)


def _quoted(word: str) -> str:
    return f"'{word}'" if word.isprintable() else json.dumps(word)


class Profiles:
    """The config files of one command line, checked: every table and key is known, every
    key's line found. ``commands`` maps each command to the option names it takes (no dashes);
    ``exclusive`` lists groups of options that exclude each other (``prompt``, ``prompt-file``,
    ``prompt-name``): a source that sets one of them drops the others set by lower sources."""

    def __init__(
        self,
        files: Sequence[ConfigFile],
        commands: Mapping[str, Collection[str]],
        exclusive: Sequence[Collection[str]] = (),
    ) -> None:
        self.files = list(files)
        self.commands = commands
        self.exclusive = [frozenset(g) for g in exclusive]
        self._all_options = frozenset().union(*commands.values()) if commands else frozenset()
        for f in self.files:
            self._check(f)

    # -- checks, at once for the whole of every file ---------------------------------------

    def _check(self, f: ConfigFile) -> None:
        for name, value in f.data.items():
            if name not in _TABLES:
                if not isinstance(value, dict) and name in self._all_options:
                    raise SpectuiError(f"{f.where(name)}: '{name}' is outside any table: put it under [defaults] or [profile.NAME]")
                raise SpectuiError(
                    f"{f.where(name)}: unknown table {_table_name((name,))}{_nearest(name, _TABLES)}:"
                    " a config file holds [defaults] and [profile.NAME]"
                )
            if not isinstance(value, dict):
                raise SpectuiError(f"{f.where(name)}: '{name}' must be a table ([{name}])")
        self._check_settings(f, ("defaults",), f.data.get("defaults", {}))
        for profile, table in f.data.get("profile", {}).items():
            if not isinstance(table, dict):
                table_name = _table_name(("profile", profile))
                raise SpectuiError(f"{f.where('profile', profile)}: {table_name[1:-1]} must be a table: {table_name} with the options below it")
            self._check_settings(f, ("profile", profile), table)

    def _check_settings(self, f: ConfigFile, at: tuple[str, ...], table: dict) -> None:
        for key, value in table.items():
            if isinstance(value, dict):
                if key not in self.commands:
                    if key in self._all_options:  # an option written as a table
                        raise SpectuiError(f"{f.where(*at, key)}: {key} takes a value, not a table")
                    raise SpectuiError(
                        f"{f.where(*at, key)}: unknown command table {_table_name((*at, key))}{_nearest(key, self.commands)}"
                    )
                self._check_keys(f, (*at, key), value, self.commands[key], f"spectui {key} has no option --{{key}}")
            elif key not in self._all_options:
                self._unknown(f, (*at, key), key, self._all_options, "no command has an option --{key}")

    def _check_keys(self, f: ConfigFile, at: tuple[str, ...], table: dict, known: Collection[str], why: str) -> None:
        for key, value in table.items():
            if isinstance(value, dict):
                raise SpectuiError(f"{f.where(*at, key)}: {_table_name((*at, key))}: a command's table holds options, not tables")
            if key not in known:
                self._unknown(f, (*at, key), key, known, why)

    @staticmethod
    def _unknown(f: ConfigFile, at: tuple[str, ...], key: str, known: Collection[str], why: str) -> None:
        near = _nearest(key, known)
        raise SpectuiError(f"{f.where(*at)}: unknown key {_quoted(key)} in {_table_name(at[:-1])}" + (near or f": {why.format(key=shown(key))}"))

    # -- what a command gets ---------------------------------------------------------------

    def names(self) -> list[str]:
        """Every profile defined, in either file."""
        return sorted({name for f in self.files for name in f.data.get("profile", {})})

    def check_profile(self, name: str, origin: str) -> None:
        """Refuse a profile no file defines, listing those that do."""
        if name in self.names():
            return
        said = f"--profile {shown(name)}" if origin == FLAG else f"{PROFILE_ENV}={shown(name)}"
        if not self.files:
            raise SpectuiError(f"{said}: no such profile: no config file was found (spectui config path says where they are looked for)")
        defined = ", ".join(map(shown, self.names())) or "none"
        raise SpectuiError(
            f"{said}: no such profile{_nearest(name, self.names())}; profiles defined: {defined}"
            f" (in {', '.join(str(f.path) for f in self.files)})"
        )

    def layers(self, command: str, profile: str | None) -> list[dict[str, Setting]]:
        """What each source sets for ``command``, lowest precedence first: the user file's
        [defaults] (shared keys, then the command's table), the project file's, then the
        profile (shared keys of both files, the project's beating the user's, then the
        command's tables the same way)."""
        options = self.commands.get(command, frozenset())
        out = []
        for f in self._ordered():
            defaults = f.data.get("defaults", {})
            out.append(self._layer(f, ("defaults",), defaults, options))
            out.append(self._layer(f, ("defaults", command), _command_table(defaults, command), options))
        if profile:  # the caller has checked it exists (check_profile, with where its name came from)
            chosen = [(f, f.data.get("profile", {}).get(profile)) for f in self._ordered()]
            chosen = [(f, t) for f, t in chosen if t is not None]
            out += [self._layer(f, ("profile", profile), t, options) for f, t in chosen]
            out += [self._layer(f, ("profile", profile, command), _command_table(t, command), options) for f, t in chosen]
        return [layer for layer in out if layer]

    def settings(self, command: str, profile: str | None) -> dict[str, Setting]:
        """Every option the files set for ``command``, the highest source winning; an option
        of an exclusive group drops the others of its group set lower down, and two of one
        group set in one table is refused."""
        merged: dict[str, Setting] = {}
        for layer in self.layers(command, profile):
            for group in self.exclusive:
                both = sorted(group & layer.keys())
                if len(both) > 1:
                    a, b = (layer[k] for k in both[:2])
                    raise SpectuiError(f"{b.origin}: {b.key} cannot be set with {a.key} ({a.origin}): they exclude each other")
                if both:
                    for other in group - {both[0]}:
                        merged.pop(other, None)
            merged.update(layer)
        return merged

    def _ordered(self) -> list[ConfigFile]:
        """The user file before the project's: a later source beats an earlier one."""
        return sorted(self.files, key=lambda f: f.scope != "user")

    @staticmethod
    def _layer(f: ConfigFile, at: tuple[str, ...], table: dict, options: Collection[str]) -> dict[str, Setting]:
        return {k: Setting(k, v, f.where(*at, k)) for k, v in table.items() if not isinstance(v, dict) and k in options}


def _command_table(table: dict, command: str) -> dict:
    """The sub-table of ``table`` for ``command``: none where the command's name is an option's
    too and the table sets that option (``runtime = "llama-server"`` in [defaults] is the option
    --runtime, not the table of ``spectui runtime``)."""
    found = table.get(command)
    return found if isinstance(found, dict) else {}


def sensitive_keys(f: ConfigFile) -> list[Setting]:
    """Every key of ``SENSITIVE`` the file sets, in any table, in the order of their lines."""
    found = []

    def walk(at: tuple[str, ...], table: dict) -> None:
        for key, value in table.items():
            if isinstance(value, dict):
                walk((*at, key), value)
            elif key in SENSITIVE:
                found.append(Setting(key, value, f.where(*at, key)))

    for name in _TABLES:
        table = f.data.get(name)
        if isinstance(table, dict):
            walk((name,), table)
    return sorted(found, key=lambda s: int(s.origin.rsplit(":", 1)[1]))


def show_value(value: object) -> str:
    """A value as a person wrote it in TOML or on the command line: ``true``, ``8192``, ``a,b``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "(none)"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ",".join(show_value(v) for v in value)
    return str(value)


def toml_value(value: object) -> str:
    """A value as TOML writes it (for a message about it): ``"four"``, ``4.5``, ``[1, 2]``."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return str(value)
