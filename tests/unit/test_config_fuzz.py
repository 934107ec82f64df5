"""Whatever a config file holds, spectui reads it or says in one line what is wrong, naming the
file: arbitrary bytes, and TOML documents built from the real option and command names with
values of every TOML type (strings, numbers huge and not-a-number, dates, lists, inline
tables), some of them damaged, go through the whole path a command line takes (the guarded
read, the parse, the trust check, the tables, each value through its option's own argparse
action, the values as ``config show`` prints them) and never raise anything else.

Bounded (a few dozen examples each, a deadline) so they run in the fast tier in seconds.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spectui.cli import build_parser
from spectui.cli.profiles import LoadedProfiles, examine, known_options
from spectui.errors import SpectuiError
from spectui.profiles import Profiles, show_value

PARSER = build_parser()
KNOWN, EXCLUSIVE = known_options(PARSER)
COMMANDS = sorted(KNOWN)
OPTIONS = sorted(set().union(*KNOWN.values()))
FOLDER = Path(tempfile.mkdtemp(prefix="spectui-config-fuzz-"))
BOUNDED = settings(max_examples=40, deadline=dt.timedelta(seconds=5), suppress_health_check=[HealthCheck.too_slow])


def read_as_a_command_line_would(raw: bytes, scope: str) -> None:
    """Everything a command line does with a config file's bytes, up to the values it hands to
    the parsers; raises SpectuiError alone, in one line naming the file."""
    path = FOLDER / ("config.toml" if scope == "user" else "spectui.toml")
    path.write_bytes(raw)
    try:
        f, _status, refusal = examine(path, scope, {})
        if f is None:
            assert refusal.startswith(str(path)) and "\n" not in refusal
            return
        profiles = Profiles([f], KNOWN, EXCLUSIVE)
        for profile in [None, *profiles.names()]:
            loaded = LoadedProfiles(PARSER, profiles, path, None, profile, "flag", FOLDER)
            for command in COMMANDS:
                for setting, _action in loaded.settings(command).values():
                    show_value(setting.value)
                    assert re.fullmatch(rf"{re.escape(str(path))}:[1-9][0-9]*", setting.origin), setting.origin
    except SpectuiError as exc:
        message = str(exc)
        assert "\n" not in message and str(path) in message, message


# -- arbitrary bytes ------------------------------------------------------------------------------


@BOUNDED
@given(st.binary(max_size=300), st.sampled_from(["user", "project"]))
def test_any_bytes_are_a_config_or_one_line(raw, scope):
    read_as_a_command_line_would(raw, scope)


@BOUNDED
@given(st.lists(st.sampled_from(["[defaults]", "[profile.a]", "[profile.a.run]", "[[defaults]]", "k = ", "= 1", '"', "'''",
                                 '"""', "[", "]", "{", "}", ",", ".", "\n", "#", "\\", "true", "1e999", "nan", "0x",
                                 "1979-05-27", "\x00", "\xff", "é", *OPTIONS[:12], *COMMANDS[:6]]),  # fmt: skip
                max_size=40),
       st.sampled_from(["user", "project"]))
def test_toml_shaped_fragments_are_a_config_or_one_line(parts, scope):
    read_as_a_command_line_would("".join(parts).encode("utf-8", "surrogatepass"), scope)


# -- documents of every TOML type -------------------------------------------------------------


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key, ensure_ascii=False)


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    return str(value)


def _document(tables: dict, at: tuple[str, ...] = ()) -> str:
    """A TOML document: each table a ``[dotted.header]`` with its values, sub-tables after."""
    out = []
    values = {k: v for k, v in tables.items() if not isinstance(v, dict)}
    if at and (values or not any(isinstance(v, dict) for v in tables.values())):
        out.append("[" + ".".join(_key(k) for k in at) + "]")
    out += [f"{_key(k)} = {_value(v)}" for k, v in values.items()]
    for k, v in tables.items():
        if isinstance(v, dict):
            out.append(_document(v, (*at, k)))
    return "\n".join(out)


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=10)
#: mostly the real options, so that most documents get past the tables to the values
OPTION_KEYS = st.sampled_from(OPTIONS)
KEYS = st.one_of(OPTION_KEYS, OPTION_KEYS, OPTION_KEYS, st.sampled_from(COMMANDS), TEXT)
SCALARS = st.one_of(
    st.sampled_from(["llamacpp", "ar", "spec", "ngram", "2,3", "smollm2", "-1", "0", "4", "1e3", "", "a\nb"]),
    st.integers(min_value=-5, max_value=10_000), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(), TEXT, st.datetimes(timezones=st.none() | st.just(dt.timezone.utc)), st.dates(), st.times(),
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3), max_leaves=4)
SETTINGS = st.dictionaries(KEYS, SCALARS | VALUES, max_size=5)
COMMAND_TABLES = st.dictionaries(st.sampled_from(COMMANDS) | TEXT, SETTINGS, max_size=2)
TABLE = st.builds(lambda shared, per_command: {**shared, **per_command}, SETTINGS, COMMAND_TABLES)
PROFILES = st.dictionaries(st.sampled_from(["mini", "fast"]), TABLE, max_size=2)
ODD_PROFILES = st.dictionaries(st.sampled_from(["mini", "fast"]) | TEXT, TABLE | SCALARS, max_size=2)
DOCUMENTS = st.one_of(
    st.fixed_dictionaries({}, optional={"defaults": TABLE, "profile": PROFILES}),
    st.fixed_dictionaries({}, optional={"defaults": TABLE, "profile": ODD_PROFILES}),
    st.dictionaries(st.sampled_from(["defaults", "profile", "defualts"]) | KEYS, VALUES, max_size=3),
)


@BOUNDED
@given(DOCUMENTS, st.sampled_from(["user", "project"]))
def test_documents_of_every_toml_type_are_a_config_or_one_line(document, scope):
    read_as_a_command_line_would(_document(document).encode(), scope)


@BOUNDED
@given(st.dictionaries(OPTION_KEYS, SCALARS | VALUES, min_size=1, max_size=4), st.sampled_from(["defaults", "profile", "command"]))
def test_any_value_of_any_option_is_a_config_or_one_line(options, where):
    """Every key known, so each value goes through its option's own type, choices and action."""
    document = {"defaults": options} if where == "defaults" else {"profile": {"mini": options}}
    if where == "command":
        document = {"defaults": {command: options for command in ("run", "sweep", "tune", "watch")}}
    read_as_a_command_line_would(_document(document).encode(), "user")


@BOUNDED
@given(DOCUMENTS, st.data())
def test_damaged_documents_are_a_config_or_one_line(document, data):
    text = _document(document)
    at = data.draw(st.integers(min_value=0, max_value=len(text)))
    cut = data.draw(st.integers(min_value=0, max_value=8))
    junk = data.draw(st.sampled_from(["", "=", "[", "]", '"', "\n", "{", ".", "\x7f", "\n[defaults]\n", "\n[profile.mini]\n"]))
    read_as_a_command_line_would((text[:at] + junk + text[at + cut:]).encode(), data.draw(st.sampled_from(["user", "project"])))


@pytest.mark.parametrize("text", [
    "a = " + "[" * 3000 + "]" * 3000,  # nested deeper than Python recurses
    "[defaults]\nk = " + "9" * 5000,  # more digits than int() takes
    "[defaults]\nk = 1e999\nthreads = nan\n",
    "[defaults]\nruntime = \"llama-server\"\n[profile.mini]\nruntime = \"llama-server\"\n",  # an option named as a command
    "[defaults]\nrun = 4\n",
    "[[defaults]]\nk = 4\n",
    "[[defaults.run]]\nk = 4\n",
    "[defaults]\nk = 1979-05-27T07:32:00Z\n",
    "[defaults]\ntarget = { path = \"x\" }\n",
    "[defaults]\nk-values = [[1, 2], [3]]\n",
    "[profile]\nmini = 3\n",
    '["\\n"]\nk = 4\n',  # a name with a newline in it, shown escaped: the message stays one line
    '[defaults]\n"k\\nmax" = 4\n',
    '[profile."a\\u2028b"]\nk = true\n',
    '[defaults]\notel-file = "no/such\\nfolder/x"\n',  # an option's type echoing the value
])  # fmt: skip
def test_known_awkward_files_are_a_config_or_one_line(text):
    for scope in ("user", "project"):
        read_as_a_command_line_would(text.encode(), scope)
