"""Which config files a command line believes, in process (no model loads): every option the
parsers take is classified as sensitive or reviewed; the search for a project file stops at a
repository's root and at home; a file others could write is not read; a project file setting a
sensitive key is refused until its bytes are trusted; the record of trusted files is guarded
like a config file.

The same through the real ``python -m spectui`` (a program planted above the working folder
never runs): tests/functional/test_profiles.py.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
from pathlib import Path

import pytest

from spectui.cli import build_parser
from spectui.cli.profiles import ConfigSkipped, known_options, load_profiles, parse_args
from spectui.cli.trust import digest, trust, trust_file, trust_state, trusted_files, untrust
from spectui.errors import SpectuiError
from spectui.profiles import SENSITIVE, ConfigFile, Profiles, find_project_file, project_folders

#: Every option that is not sensitive, reviewed: each changes what is measured or how it is
#: shown, reads a file (a model, a prompt, recordings) whose content goes only where the
#: user's own settings send it, or writes a private file (recordings, chat folders, the index)
#: or a file with no user text (a requantized model). An option new to the parsers fails
#: ``test_every_option_the_parsers_take_is_classified`` until it is added here or to
#: ``spectui.profiles.SENSITIVE``.
REVIEWED = frozenset("""
adaptive-k allow-battery budget n-min save-profile allow-unverified-quality analyze arrival-seed backend baseline batch candidate chain charts
clients csv learned-k ctx max-defects passes rate sampling setting slots warmup workload
deterministic draft draft-model draft-option draft-temperature drafters drafts-for duration energy-optional expected-k fallback
fallback-floor fallback-window flash-attn floors force from gpu-layers grid headless index interleave interval json k
k-max k-min k-values last lookup markdown max-energy-ratio max-low-windows max-other-cpu max-p95-itl-ratio
max-quality-drop-points max-red-pressure-s max-slope-mb-min max-swap-in-mb max-throttle-events max-tokens
max-ttft-growth messages min-acceptance min-growth-mb min-headroom-mb min-speedup min-window-acceptance mode ngram-max
ngram-min no-charts no-draft-memory no-record otel-json out output p-min p95-itl-tolerance parallel paused probe-target
prompt prompt-file prompt-name prompts raw redact reps rerun samples seed speed stale-days static system target
temperature temperatures theme threads tiers top-k top-k-values top-p weights window write-quant
""".split())


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    return build_parser()


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A user config folder, a state folder, a home folder, and a project two folders above
    the working folder; returns (the user's file, the project's file)."""
    config = tmp_path / "config"
    (config / "spectui").mkdir(parents=True)
    deep = tmp_path / "project" / "prompts" / "deep"
    deep.mkdir(parents=True)
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(deep)
    old = os.umask(0o022)  # the files the tests write are the user's alone, whatever the caller's umask
    yield config / "spectui" / "config.toml", tmp_path / "project" / "spectui.toml"
    os.umask(old)


def parse(*argv: str) -> argparse.Namespace:
    return parse_args(build_parser(), list(argv), environ={})


def skipped(*argv: str) -> tuple[str, argparse.Namespace]:
    """The one warning line a file spectui will not read gives, and the command's arguments:
    the command goes on without the file."""
    with pytest.warns(ConfigSkipped) as caught:
        args = parse(*argv)
    [message] = [str(w.message) for w in caught if w.category is ConfigSkipped]
    assert "\n" not in message
    return message, args


def refusal(*argv: str) -> str:
    with pytest.raises(SpectuiError) as caught:
        parse(*argv)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_every_option_the_parsers_take_is_classified(parser):
    known, _ = known_options(parser)
    options = set().union(*known.values())
    assert not SENSITIVE.keys() & REVIEWED
    assert options - SENSITIVE.keys() - REVIEWED == set(), "classify each new option: SENSITIVE in spectui/profiles.py, or REVIEWED here"


def test_the_search_stops_at_a_repository_root_and_at_home(tmp_path):
    home = tmp_path / "home"
    deep = home / "work" / "repo" / "sub" / "deeper"
    deep.mkdir(parents=True)
    (tmp_path / "spectui.toml").write_text("")  # above home: never looked at
    assert project_folders(deep, home) == [deep, deep.parent, home / "work" / "repo", home / "work", home]
    assert find_project_file(deep, home) is None
    (home / "work" / "spectui.toml").write_text("")
    assert find_project_file(deep, home) == home / "work" / "spectui.toml"
    (home / "work" / "repo" / ".git").mkdir()  # the repository's root: the team's file is inside it
    assert project_folders(deep, home)[-1] == home / "work" / "repo"
    assert find_project_file(deep, home) is None
    (home / "work" / "repo" / ".git").rmdir()
    (home / "work" / "repo" / ".git").write_text("gitdir: elsewhere\n")  # a worktree's .git is a file
    assert find_project_file(deep, home) is None
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert find_project_file(outside, home) == tmp_path / "spectui.toml"  # not under home: up to the first stop


@pytest.mark.parametrize("key", sorted(SENSITIVE))
@pytest.mark.parametrize("table", ["[defaults]", "[profile.team]", "[defaults.run]"])
def test_each_sensitive_key_a_project_file_sets_is_refused(home, key, table):
    _user, project = home
    project.write_text(f"# the team's\n{table}\nk-max = 8\n{key} = \"x\"\n")
    message = refusal("report", "a.spectui")  # whatever the command: nothing runs
    assert message.startswith(f"{project}:4: {key} {SENSITIVE[key]}, which a project file may set only once you trust it"), message
    assert message.endswith(f"spectui config trust {project}")


def test_the_users_own_file_may_set_them(home):
    user, _project = home
    user.write_text('[defaults]\nruntime = "llama-server"\nllama-server = "/opt/llama/llama-server"\napi-key-env = "MY_KEY"\n')
    args = parse("run", "--headless")
    assert (args.runtime, args.llama_server, args.api_key_env) == ("llama-server", "/opt/llama/llama-server", "MY_KEY")
    assert parse("run", "--server", "http://127.0.0.1:1", "--headless").server == "http://127.0.0.1:1"  # and a flag


@pytest.mark.parametrize("loose", ["group-writable file", "others-writable file", "others-writable folder", "group-writable folder"])
@pytest.mark.parametrize("which", ["user", "project"])
def test_a_file_others_could_write_is_not_read(home, loose, which):
    path = home[0] if which == "user" else home[1]
    path.write_text("[defaults]\nk-max = 8\n")  # harmless keys: the file is not read at all
    target = path if loose.endswith("file") else path.parent
    bit = stat.S_IWGRP if loose.startswith("group") else stat.S_IWOTH
    target.chmod(stat.S_IMODE(target.stat().st_mode) | bit)
    message, args = skipped("run", "--headless")
    assert args.k_max != 8  # the command went on, without the file
    assert message.startswith(f"{path}: skipped, the command goes on without it: "), message
    assert message.endswith(f"(spectui config trust {path})")
    assert ("its group" if bit == stat.S_IWGRP else "others") in message
    assert ("the file is" if target == path else f"its folder {path.parent} is") in message
    # spectui config shows it skipped, and why, instead of refusing
    loaded = load_profiles(build_parser(), None, "", strict=False)
    [status] = [s for s in loaded.found if s.path == path]
    assert not status.read and "writable by" in status.why
    assert loaded.profiles.files == []


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="only root can give a file to someone else")
def test_a_file_owned_by_someone_else_is_not_read(home):
    _user, project = home
    project.write_text("[defaults]\nk-max = 8\n")
    os.chown(project, 54321, -1)
    message, args = skipped("run", "--headless")
    assert message.startswith(f"{project}: skipped, the command goes on without it: the file is owned by uid 54321, not you")
    assert message.endswith(f"read the file and trust it (spectui config trust {project})"), message
    assert args.k_max != 8


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="only root can give a file to someone else")
def test_a_strangers_file_in_a_sticky_world_writable_folder_is_skipped_and_every_command_goes_on(tmp_path, monkeypatch):
    """/tmp's shape: a folder anyone may write (sticky), a stranger's spectui.toml in it, setting
    keys that need trust too: every command below it runs, with one warning line."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    work = shared / "mine" / "deep"
    work.mkdir(parents=True)
    (shared / "spectui.toml").write_text('[defaults]\nllama-server = "/tmp/evil"\nk-max = 8\n')
    os.chown(shared / "spectui.toml", 54321, 54321)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(work)
    for argv in (("run", "--headless"), ("report", "a.spectui"), ("models",)):
        message, args = skipped(*argv)
        assert message.startswith(f"{shared / 'spectui.toml'}: skipped, the command goes on without it: the file is owned by uid 54321")
        assert getattr(args, "llama_server", None) != "/tmp/evil"


def test_a_trusted_file_is_read_as_it_is_and_untrusted_when_it_changes(home):
    _user, project = home
    text = '[defaults]\nserver = "http://10.0.0.9:8080"\napi-key-env = "TEAM_KEY"\n'
    project.write_text(text)
    assert "server names a server" in refusal("run", "--headless")
    trust(project, project.read_bytes())
    assert trust_state(project, project.read_bytes()) == "trusted"
    assert trusted_files() == {str(project.resolve()): digest(text.encode())}
    args = parse("run", "--headless")
    assert (args.server, args.api_key_env) == ("http://10.0.0.9:8080", "TEAM_KEY")
    # trusted bytes are the bytes read, whoever could write the file since: a mode is no matter
    project.chmod(0o666)
    assert parse("run", "--headless").server == "http://10.0.0.9:8080"
    project.write_text(text.replace("10.0.0.9", "10.6.6.6"))
    message, args = skipped("run", "--headless")
    assert "writable by" in message and "(it changed since you trusted it)" in message
    assert args.server != "http://10.6.6.6:8080"
    project.chmod(0o644)
    assert refusal("run", "--headless").startswith(f"{project}:2: server names a server")
    assert untrust(project) and not untrust(project)
    assert trusted_files() == {}


def test_a_trust_record_others_can_write_trusts_nothing(home):
    _user, project = home
    project.write_text('[defaults]\nhost = "node-a"\n')
    trust(project, project.read_bytes())
    assert trusted_files()
    record = trust_file()
    assert stat.S_IMODE(record.stat().st_mode) == 0o600  # private, whatever the umask
    record.chmod(0o622)
    assert trusted_files() == {}
    assert "host names a machine" in refusal("run", "--headless")


def test_a_file_of_another_kind_at_the_records_path_is_left_as_it_is(home):
    _user, project = home
    project.write_text('[defaults]\nhost = "node-a"\n')
    record = trust_file()
    record.parent.mkdir(parents=True)
    mine = json.dumps({"something": "of the user's"})
    record.write_text(mine)
    with pytest.raises(SpectuiError, match="leaves it as it is"):
        trust(project, project.read_bytes())
    assert record.read_text() == mine
    assert trusted_files() == {}


def test_a_command_name_set_as_an_option_is_no_command_table():
    """``runtime = "llama-server"`` is the option --runtime, not the table [defaults.runtime]
    of ``spectui runtime``; the same in a profile."""
    data = {"defaults": {"runtime": "llama-server"}, "profile": {"mini": {"runtime": "llama-server", "k-max": 4}}}
    f = ConfigFile(Path("config.toml"), "user", data, {("defaults", "runtime"): 2, ("profile", "mini", "runtime"): 4})
    profiles = Profiles([f], {"run": {"runtime", "k-max"}, "runtime": {"llama-server", "json"}})
    assert profiles.settings("runtime", None) == {}
    assert profiles.settings("runtime", "mini") == {}
    assert profiles.settings("run", "mini")["runtime"].origin == "config.toml:4"


def test_runtime_info_reads_a_user_file_setting_runtime(home):
    user, _project = home
    user.write_text('[defaults]\nruntime = "llama-server"\n[profile.mini]\nruntime = "llama-server"\n')
    assert parse("runtime", "info").command == "runtime"
    assert parse("runtime", "info", "--profile", "mini").profile == "mini"


@pytest.mark.parametrize(
    "text",
    [
        '[defaults]\nruntime = "llama-server"\n',
        'defaults.runtime = "llama-server"\n',
        'defaults = { runtime = "llama-server" }\n',
        '[defaults]\n"runtime" = "llama-server"\n',
        "[defaults]\n\"\\u0072untime\" = 'llama-server'\n",
        '[profile.team]\nruntime = "mlx-lm"\n',
        '[profile]\nteam = { run = { runtime = "llama-server" } }\n',
    ],
    ids=["table", "dotted", "inline", "quoted", "escaped", "profile", "nested-inline"],
)
def test_a_project_file_naming_a_runtime_is_refused_in_every_toml_shape(home, text):
    """``runtime`` starts a server, and a download and a build where none is built: a cloned
    folder's file must not start them."""
    _user, project = home
    project.write_text(text)
    message = refusal("run", "--headless")
    assert " runtime starts a server program" in message and message.endswith(f"spectui config trust {project}"), message


def test_the_security_page_lists_every_key_that_needs_trust_from_the_one_table():
    import importlib.util

    from spectui.profiles import TRUSTED_KEYS

    repo = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("trust_reference", repo / "docs" / "hooks" / "trust_reference.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    table = hook.render()
    assert {k.key for k in TRUSTED_KEYS} == set(SENSITIVE)
    for k in TRUSTED_KEYS:
        assert f"| {k.power} | `{k.key}` | {k.why} |" in table
    page = (repo / "docs" / "guide" / "security.md").read_text()
    assert hook.MARKER in page
    assert "| `llama-server` |" not in page  # the list is generated, never kept by hand beside the table
