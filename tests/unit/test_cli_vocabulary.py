"""One vocabulary across the CLI (docs/reference/conventions.md): every flag of
every subcommand says what it does in ``--help``; the same idea has the same flag everywhere;
the spellings it replaced still work (hidden from ``--help``), each proven by a test of its own.
Parsing only: no model loads."""

from __future__ import annotations

import argparse
import io
from contextlib import redirect_stdout

import pytest

from spectui.cli import build_parser


def subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):  # noqa: ANN201
    """(command words, parser) of every subcommand, nested ones (``node ...``) included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from subcommands(sub, (*path, name))


def flags_without_help(parser: argparse.ArgumentParser) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
            continue
        if action.help == argparse.SUPPRESS:  # an old spelling, hidden on purpose
            continue
        if not (action.help or "").strip():
            missing.append("/".join(action.option_strings) or action.dest)
    return missing


def help_text(*words: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args([*words, "--help"])
    return out.getvalue()


ALL = list(subcommands(build_parser()))


def test_the_walk_finds_every_command():
    names = {" ".join(path) for path, _ in ALL}
    assert {"run", "chat", "report", "diff", "gate", "export", "replay", "compare", "sweep", "soak", "quality", "tune",
            "models", "history"} <= names


@pytest.mark.parametrize("path, parser", ALL, ids=[" ".join(p) for p, _ in ALL])
def test_every_flag_says_what_it_does(path, parser):
    assert flags_without_help(parser) == [], f"spectui {' '.join(path)}: flags without help text"
    text = help_text(*path)
    assert "acceptance brief" not in text  # words a user has never seen
    assert "==SUPPRESS==" not in text


def test_target_says_it_takes_a_path_or_a_catalogue_name():
    text = " ".join(help_text("run").split())
    assert "--target" in text and "spectui models" in text and "path" in text


def parse(*words: str) -> argparse.Namespace:
    return build_parser().parse_args(list(words))


@pytest.mark.parametrize("command", ["sweep", "quality", "tune"])
def test_reps_is_the_one_spelling_for_repetitions(command):
    assert parse(command, "--reps", "5").reps == 5
    assert "--reps" in help_text(command)


@pytest.mark.parametrize("command", ["sweep", "quality"])
def test_old_repeats_still_works(command):
    assert parse(command, "--repeats", "4").reps == 4
    assert "--repeats" not in help_text(command)


@pytest.mark.parametrize("command", ["sweep", "tune", "history"])
def test_charts_and_no_charts_everywhere(command):
    assert parse(command, "--charts").charts is True
    assert parse(command, "--no-charts").charts is False
    assert parse(command).charts is None  # decided by whether stdout is a terminal


@pytest.mark.parametrize("old, value", [("on", True), ("off", False)])
def test_old_tune_charts_on_off_still_works(old, value):
    assert parse("tune", "--charts", old).charts is value
    assert parse("tune", f"--charts={old}").charts is value


def test_old_chat_record_dir_still_works():
    assert parse("chat", "--record-dir", "talks/a").out == "talks/a"
    assert parse("chat", "--out", "talks/b").out == "talks/b"
    assert "--record-dir" not in help_text("chat")


def test_output_names_the_one_recording_file():
    assert parse("run", "-o", "a.spectui").output == "a.spectui"
    assert parse("run", "--output", "b.spectui").output == "b.spectui"
    assert parse("run").output is None


def test_old_run_record_still_works():
    assert parse("run", "--record", "c.spectui").output == "c.spectui"
    assert "--record " not in help_text("run") and "--record\n" not in help_text("run")


def test_lists_are_comma_separated_and_old_only_still_works():
    assert parse("quality", "--prompts", "quality-json-book,quality-tool-math").prompts == "quality-json-book,quality-tool-math"
    assert parse("quality", "--only", "quality-json-book", "quality-tool-math").prompts == "quality-json-book,quality-tool-math"
    assert "--only" not in help_text("quality")


@pytest.mark.parametrize("command", ["report", "diff", "gate", "export", "replay", "compare", "sweep", "soak", "quality",
                                     "tune", "models", "history", "run", "chat"])
def test_json_wherever_a_command_prints_results(command):
    assert "--json" in help_text(command)
