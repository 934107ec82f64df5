"""Config files with named profiles, parsed in process (no model loads): the five sources and
their precedence, per-command tables, the keys taken from the real parsers, where each key is
written, the recording header's provenance and what the dashboard remembers.

The bad-config cases go through the real ``python -m spectui`` in tests/functional/test_profiles.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import msgspec
import pytest

from spectui.cli import build_parser
from spectui.cli.profiles import option_actions, parse_args
from spectui.config import RunConfig
from spectui.drafting import CostAware, DraftConfig, Fixed
from spectui.errors import SpectuiError
from spectui.profiles import ConfigFile, Profiles, key_lines
from spectui.recording.reader import read_recording
from spectui.recording.schema import Header, Provenance, SettingOrigin
from tests.conftest import REPO

#: The user's file: each key of the five-source test is set here, and then by fewer sources above.
USER = """\
[defaults]
k-max = 11
ngram-max = 5
ngram-min = 2
k-min = 2

[profile.mini]
k-max = 13
ngram-max = 3

[profile.other]
k-max = 9
"""
PROJECT = """\
# the team's settings
[defaults]
k-max = 12
ngram-max = 6
ngram-min = 3
"""


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A user config folder and a project folder (the command runs two folders below it)."""
    config = tmp_path / "config"
    (config / "spectui").mkdir(parents=True)
    deep = tmp_path / "project" / "prompts" / "deep"
    deep.mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.chdir(deep)
    return config / "spectui" / "config.toml", tmp_path / "project" / "spectui.toml"


def parse(*argv: str, env: dict[str, str] | None = None, parser: argparse.ArgumentParser | None = None) -> argparse.Namespace:
    return parse_args(parser or build_parser(), list(argv), environ=env or {})


def origins(args: argparse.Namespace) -> dict[str, tuple[str, str]]:
    return {s.option: (s.value, s.origin) for s in args.provenance.settings}


def test_precedence_across_the_five_sources(home):
    user, project = home
    user.write_text(USER)
    project.write_text(PROJECT)
    args = parse("run", "--k-max", "14", env={"SPECTUI_PROFILE": "mini"})
    # k-max: every source sets it, the flag wins; ngram-max: all but the flag, the profile wins;
    # ngram-min: both files' [defaults], the project's wins; k-min: the user's only; top-k: none
    assert (args.k_max, args.ngram_max, args.ngram_min, args.k_min, args.top_k) == (14, 3, 3, 2, 0)
    assert origins(args) == {
        "k-max": ("14", "flag"),
        "ngram-max": ("3", f"{user}:9"),
        "ngram-min": ("3", f"{project}:5"),
        "k-min": ("2", f"{user}:5"),
    }
    assert (args.provenance.profile, args.provenance.profile_origin) == ("mini", "env SPECTUI_PROFILE")
    # one source fewer at a time: each time the next one down shows through
    assert parse("run", env={"SPECTUI_PROFILE": "mini"}).k_max == 13
    assert parse("run").k_max == 12
    project.unlink()
    assert (parse("run").k_max, origins(parse("run"))["k-max"]) == (11, ("11", f"{user}:2"))
    user.unlink()
    bare = parse("run")
    assert bare.k_max == CostAware().k_max and origins(bare) == {} and bare.provenance.profile == ""


def test_the_profile_flag_beats_the_environment(home):
    user, _ = home
    user.write_text(USER)
    args = parse("run", "--profile", "other", env={"SPECTUI_PROFILE": "mini"})
    assert args.k_max == 9 and (args.provenance.profile, args.provenance.profile_origin) == ("other", "flag")
    assert parse("run", "--profile", "", env={"SPECTUI_PROFILE": "mini"}).k_max == 11  # `--profile ""`: none


def test_a_profile_in_both_files_is_one_profile_the_projects_keys_winning(home):
    user, project = home
    user.write_text("[profile.mini]\nk-max = 13\ntop-p = 0.5\n")
    project.write_text("[profile.mini]\nk-max = 15\n")
    args = parse("run", "--profile", "mini")
    assert (args.k_max, args.top_p) == (15, 0.5)
    assert origins(args) == {"k-max": ("15", f"{project}:2"), "top-p": ("0.5", f"{user}:3")}


def test_a_command_table_beats_the_shared_keys_and_only_for_its_command(home):
    user, _ = home
    user.write_text("[profile.mini]\nk-max = 13\nmin-headroom-mb = 8192\n\n[profile.mini.run]\nk-max = 7\n")
    assert parse("run", "--profile", "mini").k_max == 7
    assert parse("sweep", "--profile", "mini").k_max == 13
    # a shared key applies to every command that has the option, typed by that command's parser
    gate = parse("gate", "--profile", "mini", "--baseline", "a", "--candidate", "b")
    assert gate.min_headroom_mb == 8192.0 and not hasattr(gate, "k_max")
    assert parse("report", "x.spectui", "--profile", "mini").file == "x.spectui"  # no such option there: ignored


def test_a_file_may_give_a_required_list_option(home):
    user, _ = home
    user.write_text('[defaults.gate]\nbaseline = ["ar-1.spectui", "ar-2.spectui"]\n')
    args = parse("gate", "--candidate", "spec.spectui")
    assert args.baseline == ["ar-1.spectui", "ar-2.spectui"]
    assert origins(args)["baseline"] == ("ar-1.spectui,ar-2.spectui", f"{user}:2")


def test_false_unsets_a_flag_a_lower_source_set(home):
    user, project = home
    user.write_text("[defaults]\nadaptive-k = true\n")
    assert parse("run").adaptive_k is True
    project.write_text("[defaults]\nadaptive-k = false\n")
    args = parse("run")
    assert args.adaptive_k is False and origins(args)["adaptive-k"] == ("false", f"{project}:2")


def test_a_flag_beats_a_file_option_it_excludes(home):
    user, _ = home
    user.write_text('[defaults]\nprompt-name = "load-typo-fix"\n')
    assert parse("run").prompt_name == "load-typo-fix"
    args = parse("run", "--prompt", "hi")
    assert (args.prompt, args.prompt_name) == ("hi", None)
    assert origins(args) == {"prompt": ("", "flag")}  # the text itself is in the header's config


def test_a_higher_source_replaces_an_option_of_the_same_exclusive_group(home):
    user, project = home
    user.write_text('[defaults]\nprompt-name = "load-typo-fix"\n')
    project.write_text('[defaults]\nprompt-file = "p.txt"\n')
    args = parse("run")
    assert (args.prompt_file, args.prompt_name) == ("p.txt", None)


def test_the_keys_are_the_parsers_options_not_a_list(home):
    user, _ = home
    user.write_text("[defaults]\nbrand-new = 3\n")
    with pytest.raises(SpectuiError, match="unknown key 'brand-new'"):
        parse("run")
    parser = build_parser()
    run = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
    run.add_argument("--brand-new", type=int, default=0, help="an option added today")
    assert parse("run", parser=parser).brand_new == 3
    # every long option --help lists is a key; the hidden old spellings and --help are not
    keys = option_actions(run)
    assert {"target", "draft", "min-headroom-mb", "host", "k", "adaptive-k", "theme"} <= keys.keys()
    assert "record" not in keys and "help" not in keys and "profile" not in keys


def test_a_value_goes_through_the_options_own_action(home):
    user, project = home
    user.write_text("[defaults]\ncharts = true\n")
    assert parse("tune").charts is True
    # --no-charts: a store_false sharing --charts' destination, in one exclusive group with it
    project.write_text("[defaults]\nno-charts = true\n")
    args = parse("tune")
    assert args.charts is False and origins(args) == {"no-charts": ("true", f"{project}:2")}
    assert origins(parse("tune", "--charts")) == {"charts": ("true", "flag")}


def test_key_lines_finds_headers_dotted_quoted_and_inline_keys():
    text = (
        '[defaults]\n'                     # 1
        'k = 4\n'                          # 2
        'notes = """\n'                    # 3
        'target = "not a key"\n'           # 4: inside a multi-line string
        '"""\n'                            # 5
        '[profile."my mini"]\n'            # 6
        '  target = "smollm2"\n'           # 7
        'run.k-max = 9\n'                  # 8: a dotted key
        "gate = { max-swap-in-mb = 10 }\n"  # 9: an inline table
    )  # fmt: skip
    lines = key_lines(text)
    assert lines[("defaults", "k")] == 2 and ("defaults", "target") not in lines
    assert lines[("profile", "my mini")] == 6 and lines[("profile", "my mini", "target")] == 7
    assert lines[("profile", "my mini", "run", "k-max")] == 8
    f = ConfigFile(Path("c.toml"), "user", {}, lines)
    assert f.where("profile", "my mini", "gate", "max-swap-in-mb") == "c.toml:9"  # the inline table's line


def test_profiles_lists_every_profile_of_both_files():
    def file(path: str, text: str) -> ConfigFile:
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # tomllib is 3.11+; pyproject installs tomli below that
            import tomli as tomllib

        return ConfigFile(Path(path), "user" if "user" in path else "project", tomllib.loads(text), key_lines(text))

    profiles = Profiles([file("user.toml", "[profile.mini]\n[profile.gpu]\n"), file("project.toml", "[profile.ci]\n")], {"run": {"k"}})
    assert profiles.names() == ["ci", "gpu", "mini"]
    with pytest.raises(SpectuiError, match=r"--profile mnii: no such profile \(did you mean 'mini'\?\); profiles defined: ci, gpu, mini"):
        profiles.check_profile("mnii", "flag")


def test_the_header_keeps_the_provenance_and_old_recordings_still_read():
    provenance = Provenance(command="run", profile="mini", profile_origin="flag",
                            settings=[SettingOrigin(option="host", value="node-a", origin="/c.toml:4")])
    header = Header(config=RunConfig(prompt="x"), provenance=provenance)
    back = msgspec.msgpack.decode(msgspec.msgpack.encode(header), type=Header)
    assert back.provenance == provenance
    old = read_recording(Path(REPO) / "tests" / "data" / "fixed-session.spectui")
    assert old.header.provenance is None


# -- what the dashboard remembers -----------------------------------------------------------


def test_the_dashboard_remembers_only_what_no_flag_or_file_set(tmp_path):
    from spectui.ui.remembered import load, remember, restore

    state = tmp_path / "dashboard.json"
    remember(theme="spectui-light", k=6, mode="ar", path=state)
    assert load(state).k == 6
    config = RunConfig(prompt="x", draft=DraftConfig(length=Fixed(k=4)))
    restored, theme = restore(config, None, set_elsewhere=(), path=state)
    assert (theme, restored.draft.fixed_k, restored.mode) == ("spectui-light", 6, "ar")
    kept, theme = restore(config, "spectui-dark", set_elsewhere={"k", "theme"}, path=state)
    assert (theme, kept.draft.fixed_k, kept.mode) == ("spectui-dark", 4, "ar")


def test_a_damaged_state_file_is_nothing_remembered(tmp_path):
    from spectui.ui.remembered import load, remember

    state = tmp_path / "dashboard.json"
    state.write_text('{"kind": "spectui-dashboard-state", "k": ')
    assert load(state).k is None
    from spectui.storage import StorageNotice

    with pytest.warns(StorageNotice, match="moved it aside"):  # storage's rule: kept aside, said, never lost
        remember(k=3, path=state)
    assert load(state).k == 3


def test_a_command_run_whole_on_a_node_carries_the_files_settings_as_flags(home):
    """``tune --host``: the node has no copy of the config files, so what they set travels as
    flags; a flag given stays as given, ``--profile`` and the node itself do not travel."""
    from spectui.cli.host_flag import without_host
    from spectui.cli.profiles import words_for_node

    user, _ = home
    user.write_text('[profile.mini]\nhost = "node-a"\nthreads = 1\nk-max = 8\ndeterministic = true\n[defaults.tune]\nmax-tokens = 40\n')
    parser = build_parser()
    argv = ["tune", "--profile", "mini", "--k-max", "6"]
    args = parse_args(parser, argv, environ={})
    assert args.host == "node-a"
    words = words_for_node(parser, without_host(argv), args)
    assert words[:3] == ["tune", "--k-max", "6"]  # the flag beats the profile's 8, and --profile is gone
    rest = " ".join(words[3:])
    assert sorted(w.strip() for w in rest.split("--")[1:]) == ["deterministic", "max-tokens 40", "threads 1"], rest
