"""Profiles through the real ``python -m spectui``: every bad config is one line, exit 2 and
its ``file:line``, before anything loads; ``config show`` equals a checked-in snapshot; a
profile naming a node (``host``) and an envelope drives a run over the loopback sshd, and the
recording's header names the profile and where each setting came from; the dashboard starts
from the profile and keeps what a person changes there in a state file, never in the config.

The precedence of the five sources, in process: tests/unit/test_profiles_parsing.py. The snapshots are
made again with ``python tests/functional/test_profiles.py --update``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

DATA = Path(REPO) / "tests" / "data" / "profiles"
#: a bound for a command that loads nothing; the node run below loads the embedded model
TIMEOUT_S = 120


@dataclass
class Home:
    """A user config folder, a project with its ``spectui.toml`` (commands run two folders
    below it), a recordings folder, and the environment that points spectui at them."""

    root: Path
    user: Path
    project: Path
    cwd: Path
    recordings: Path

    def env(self, **more: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "SPECTUI_PROFILE"}
        return {**env, "XDG_CONFIG_HOME": str(self.user.parent.parent), "SPECTUI_RECORDINGS": str(self.recordings), **more}


@pytest.fixture
def home(tmp_path) -> Home:
    user = tmp_path / "config" / "spectui" / "config.toml"
    user.parent.mkdir(parents=True)
    cwd = tmp_path / "project" / "prompts" / "deep"
    cwd.mkdir(parents=True)
    recordings = tmp_path / "recordings"
    recordings.mkdir()
    return Home(tmp_path, user, tmp_path / "project" / "spectui.toml", cwd, recordings)


def spectui(home: Home, *args: str, env: dict[str, str] | None = None, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spectui", *args], capture_output=True, text=True, timeout=timeout, cwd=home.cwd,
        env={**(env or home.env()), "PYTHONPATH": REPO},
    )


def one_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    return lines[0]


# -- bad config: one line, exit 2, file:line, before anything loads ---------------------------

#: (which file, its text, the line the error names, what the message says)
BAD = {
    "unreadable TOML": ("project", "[defaults]\nk = 4\nk-max = \n", 3, "not valid TOML: Invalid value (column 9)"),
    "a table declared twice": ("user", "[defaults]\nk = 4\n[defaults]\n", 3, "not valid TOML"),
    "not UTF-8": ("project", b"[defaults]\ntarget = \"\xff\"\n", 2, "not UTF-8 text"),
    "an unknown key": ("project", "[defaults]\nk = 4\nk-maxx = 9\n", 3, "unknown key 'k-maxx' in [defaults] (did you mean 'k-max'?)"),
    "an unknown key in a profile": ("user", "[profile.mini]\n\ntraget = \"smollm2\"\n", 3,
                                    "unknown key 'traget' in [profile.mini] (did you mean 'target'?)"),
    "an underscore spelling": ("user", "[defaults]\nmin_headroom_mb = 8192\n", 2, "(did you mean 'min-headroom-mb'?)"),
    "an option another command has": ("project", "[defaults.gate]\nk = 4\n", 2, "unknown key 'k' in [defaults.gate]: spectui gate has no option --k"),
    "an unknown command table": ("user", "[profile.mini.rnu]\nk = 4\n", 1, "unknown command table [profile.mini.rnu] (did you mean 'run'?)"),
    "an unknown table": ("project", "[defualts]\nk = 4\n", 1, "unknown table [defualts] (did you mean 'defaults'?)"),
    "a key outside any table": ("project", "# top\nk = 4\n", 2, "'k' is outside any table: put it under [defaults] or [profile.NAME]"),
    "a wrong type (a number for a flag)": ("project", "[defaults]\nadaptive-k = 1\n", 2,
                                           "adaptive-k = 1: wrong type: --adaptive-k takes no value, so write true or false"),
    "a wrong type (a list for one value)": ("project", "[defaults]\ntarget = [\"a\", \"b\"]\n", 2, "--target takes one value, not a list"),
    "a wrong type (true for a value)": ("user", "[defaults]\nk = true\n", 2, "k = true: wrong type: --k takes a string or a number, not true"),
    "an invalid number": ("project", "[defaults]\nk = 2.5\n", 2, "k = 2.5: invalid int value: '2.5'"),
    "an invalid choice": ("user", "[defaults]\n\n\nbackend = \"cuda\"\n", 4,
                          "backend = \"cuda\": invalid choice: 'cuda' (choose from 'llamacpp', 'mlx')"),
    "an invalid value in a command's table": ("project", "[defaults]\n[defaults.run]\nmode = \"fast\"\n", 3, "invalid choice: 'fast'"),
    "two options that exclude each other": ("project", "[defaults]\nprompt = \"a\"\nprompt-name = \"b\"\n", 3,
                                            "prompt-name cannot be set with prompt"),
}


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_a_bad_config_is_one_line_naming_file_and_line(home, case):
    which, text, line, message = BAD[case]
    path = home.user if which == "user" else home.project
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    # a run that would load the embedded model: refused before, so nothing is recorded
    error = one_line(spectui(home, "run", "--headless", "--prompt", "hi", "--max-tokens", "4"))
    assert error.startswith(f"spectui: error: {path}:{line}: "), error
    assert message in error
    assert list(home.recordings.iterdir()) == []


def test_a_bad_value_in_the_profile_counts_only_when_the_profile_is_chosen(home):
    home.user.write_text("[profile.mini]\nmin-headroom-mb = \"lots\"\n")
    ok = spectui(home, "config", "show")
    assert ok.returncode == 0 and "every setting is built-in" in ok.stdout, ok.stderr
    error = one_line(spectui(home, "run", "--headless", "--profile", "mini", "--prompt", "hi"))
    assert error == f"spectui: error: {home.user}:2: min-headroom-mb = \"lots\": invalid float value: 'lots'"


def test_a_profile_that_does_not_exist_lists_those_that_do(home):
    shutil.copyfile(DATA / "user-config.toml", home.user)
    shutil.copyfile(DATA / "project-spectui.toml", home.project)
    error = one_line(spectui(home, "run", "--headless", "--profile", "mnii", "--prompt", "hi"))
    assert error == (f"spectui: error: --profile mnii: no such profile (did you mean 'mini'?); profiles defined: fast, mini"
                     f" (in {home.user}, {home.project})")
    error = one_line(spectui(home, "run", "--headless", "--prompt", "hi", env=home.env(SPECTUI_PROFILE="gpu")))
    assert error.startswith("spectui: error: SPECTUI_PROFILE=gpu: no such profile; profiles defined: fast, mini")
    home.user.unlink()
    home.project.unlink()
    error = one_line(spectui(home, "config", "show", "--profile", "mini"))
    assert error.startswith("spectui: error: --profile mini: no such profile: no config file was found")


# -- config show / config path ------------------------------------------------------------------

#: (snapshot file, the command's words, the profile from the environment)
SNAPSHOTS = {
    "config-show-mini-run.txt": (("config", "show", "--profile", "mini"), None),
    "config-show-mini-gate.txt": (("config", "show", "gate"), "mini"),
    "config-show-run.txt": (("config", "show", "run"), None),
}


def show(home: Home, words: tuple[str, ...], profile: str | None) -> str:
    shutil.copyfile(DATA / "user-config.toml", home.user)
    shutil.copyfile(DATA / "project-spectui.toml", home.project)
    proc = spectui(home, *words, env=home.env(**({"SPECTUI_PROFILE": profile} if profile else {})))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.replace(str(home.root), "<tmp>")


@pytest.mark.parametrize("snapshot", list(SNAPSHOTS), ids=list(SNAPSHOTS))
def test_config_show_snapshot(home, snapshot):
    assert show(home, *SNAPSHOTS[snapshot]) == (DATA / snapshot).read_text(encoding="utf-8")


def test_config_path_says_where_files_are_looked_for_and_which_exist(home):
    def rows(env: dict[str, str] | None = None) -> dict[str, list[str]]:
        out = spectui(home, "config", "path", env=env).stdout
        return {cells[0]: cells[1:] for cells in (re.split(r"\s{2,}", line.strip()) for line in out.splitlines() if not line.startswith("("))}

    shutil.copyfile(DATA / "user-config.toml", home.user)
    found = rows(home.env(XDG_STATE_HOME=str(home.root / "state"), HOME=str(home.root)))
    assert found["user"] == ["found", str(home.user)]
    assert found["project"] == ["not found", f"spectui.toml in {home.cwd} or a folder above it up to {home.root}"]
    assert found["state"] == ["not found", str(home.root / "state" / "spectui" / "dashboard.json")]
    assert found["trusted"] == ["none", str(home.root / "state" / "spectui" / "trusted.json")]
    home.project.write_text("")
    assert rows()["project"] == ["found", str(home.project)]


# -- trust: a file others could write, or a project file naming a program, runs nothing -----------


@dataclass
class Planted:
    """A ``spectui.toml`` in ``above/``, naming as llama-server a script that leaves a marker;
    commands run in ``above/here/``, with a home folder of their own beside it."""

    home: Home
    file: Path
    marker: Path

    def env(self) -> dict[str, str]:
        return self.home.env(HOME=str(self.home.root / "home"), XDG_STATE_HOME=str(self.home.root / "state"))

    def spectui(self, *args: str) -> subprocess.CompletedProcess:
        return spectui(self.home, *args, env=self.env())


@pytest.fixture
def planted(tmp_path) -> Planted:
    above, home_folder = tmp_path / "above", tmp_path / "home"
    (above / "here").mkdir(parents=True)
    home_folder.mkdir()
    marker = tmp_path / "MARKER"
    script = above / "evil.sh"
    script.write_text(f"#!/bin/sh\necho ran > {marker}\nexit 1\n")
    script.chmod(0o755)
    file = above / "spectui.toml"
    file.write_text(f'[defaults]\nruntime = "llama-server"\nllama-server = "{script}"\n')
    user = tmp_path / "config" / "spectui" / "config.toml"
    user.parent.mkdir(parents=True)
    return Planted(Home(tmp_path, user, file, above / "here", tmp_path / "recordings"), file, marker)


#: what a run would do: start the runtime, which is the planted script
RUN = ("run", "--headless", "--prompt", "hi", "--max-tokens", "2")


def test_a_project_file_above_naming_a_program_runs_nothing(planted):
    proc = planted.spectui(*RUN)
    assert not planted.marker.exists(), "the planted program ran"
    error = one_line(proc)
    # the first key that needs trust, at its line: runtime (it starts a server), then llama-server
    assert error.startswith(f"spectui: error: {planted.file}:2: runtime starts a server program"), error
    assert f"spectui config trust {planted.file}" in error


def test_a_project_file_others_can_write_runs_nothing(planted):
    planted.file.chmod(0o646)
    # nothing in such a file is read, a harmless key no more than a program: the command goes on
    # without it, saying so in one line (a stranger's file in /tmp must not stop every command)
    evil = planted.file.parent / "evil.sh"
    planted.file.write_text(f'[defaults]\njson = true\nllama-server = "{evil}"\n')
    planted.file.chmod(0o646)
    shown = planted.spectui("config", "show")
    assert shown.returncode == 0, shown.stderr
    assert f"skipped  project  {planted.file}: the file is writable by others (mode 646)" in shown.stdout
    assert "evil.sh" not in shown.stdout  # no value of it was taken
    proc = planted.spectui("report", str(planted.home.root / "no-such.spectui"))
    assert not planted.marker.exists(), "the planted program ran"
    warning, error = proc.stderr.splitlines()
    assert warning.startswith(f"spectui: warning: {planted.file}: skipped, the command goes on without it: the file is writable"), warning
    assert f"spectui config trust {planted.file}" in warning
    assert proc.returncode == 2 and "no-such.spectui" in error and proc.stdout == ""


def test_trusting_the_file_lets_its_keys_through_until_it_changes(planted):
    shown = planted.spectui("config", "show")
    assert shown.returncode == 0, shown.stderr
    assert f"skipped  project  {planted.file}: sets runtime, llama-server and is not trusted" in shown.stdout
    trusted = planted.spectui("config", "trust", str(planted.file.parent))
    assert trusted.returncode == 0, trusted.stderr
    assert f"it sets llama-server = \"{planted.file.parent / 'evil.sh'}\" (line 3)" in trusted.stdout
    shown = planted.spectui("config", "show")
    assert shown.returncode == 0, shown.stderr
    assert re.search(rf"llama-server\s+{re.escape(str(planted.file.parent / 'evil.sh'))}\s+{re.escape(str(planted.file))}:3", shown.stdout)
    assert f"read  project  {planted.file} (trusted)" in shown.stdout
    # one byte more is another file: refused again, and said so
    with planted.file.open("a") as f:
        f.write("# changed\n")
    error = one_line(planted.spectui(*RUN))
    assert "(it changed since you trusted it)" in error and not planted.marker.exists()
    assert planted.spectui("config", "untrust", str(planted.file)).returncode == 0
    assert "was not trusted" in planted.spectui("config", "untrust", str(planted.file)).stdout


def test_a_command_name_set_as_an_option_is_no_command_table(planted):
    """``runtime = "llama-server"`` is the option --runtime, not [defaults.runtime]: ``runtime
    info`` reads it without a traceback."""
    planted.file.unlink()
    planted.home.user.write_text('[defaults]\nruntime = "llama-server"\n[profile.mini]\nruntime = "llama-server"\n')
    for words in (("runtime", "info"), ("runtime", "info", "--profile", "mini")):
        error = one_line(planted.spectui(*words, "--llama-server", str(planted.home.root / "no-such-binary")))
        assert "no-such-binary" in error, error


# -- a profile drives a run on a node -----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.server
def test_a_profile_naming_a_node_and_an_envelope_drives_a_run_there(home, tmp_path_factory):
    from spectui.recording.reader import read_recording
    from tests.remote.conftest import start_node, stop_node

    shutil.copyfile(DATA / "user-config.toml", home.user)  # [profile.mini]: host = "node-a", an envelope
    shutil.copyfile(DATA / "project-spectui.toml", home.project)
    node = start_node(tmp_path_factory.mktemp("sshd"))
    try:
        env = {**node.environ(), **home.env(SPECTUI_PROFILE="mini")}
        proc = spectui(home, "run", "--headless", "--prompt", "Write a haiku about the sea.", "--max-tokens", "12",
                       env=env, timeout=300)  # fmt: skip
    finally:
        stop_node(node)
    assert proc.returncode == 0, proc.stderr
    [path] = home.recordings.iterdir()
    header = read_recording(path).header
    assert header.node == "node-a"  # the profile's host
    envelope = header.config.envelope
    assert (envelope.min_headroom_mib, envelope.max_swap_in_mib) == (2048.0, 64.0)  # the profile's, over both [defaults]
    assert header.config.draft.flag == "ngram" and header.config.max_tokens == 12
    provenance = header.provenance
    assert (provenance.command, provenance.profile, provenance.profile_origin) == ("run", "mini", "env SPECTUI_PROFILE")
    origins = {s.option: (s.value, s.origin) for s in provenance.settings}
    assert origins == {
        "target": ("smollm2", f"{home.user}:8"),
        "draft": ("ngram", f"{home.user}:9"),
        "min-headroom-mb": ("2048", f"{home.user}:10"),
        "host": ("node-a", f"{home.user}:11"),
        "max-swap-in-mb": ("64", f"{home.project}:7"),
        "threads": ("1", f"{home.user}:4"),
        "k-max": ("8", f"{home.project}:4"),
        "max-tokens": ("12", "flag"),  # beats the project's 64
        "headless": ("true", "flag"),
        "prompt": ("", "flag"),  # the text is in the config, not here
    }


@pytest.mark.slow
def test_every_session_a_command_records_keeps_the_profile(home):
    """Not only ``run --headless``: every session of a ``sweep`` keeps the profile and the
    origin of each setting (every path records through ``record_session``)."""
    from spectui.recording.reader import read_recording

    home.user.write_text('[profile.quick]\nthreads = 1\nmax-tokens = 6\n')
    out = home.root / "sweep"
    proc = spectui(home, "sweep", "--headless", "--profile", "quick", "--prompts", "short-control", "--k-values", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    headers = [read_recording(p).header for p in sorted(out.rglob("*.spectui"))]
    assert len(headers) >= 2 and {h.config.mode for h in headers} == {"ar", "spec"}
    for header in headers:
        provenance = header.provenance
        assert (provenance.command, provenance.profile, provenance.profile_origin) == ("sweep", "quick", "flag")
        origins = {s.option: (s.value, s.origin) for s in provenance.settings}
        assert origins["threads"] == ("1", f"{home.user}:2") and origins["max-tokens"] == ("6", f"{home.user}:3")
        assert header.config.max_tokens == 6 and header.config.backend.n_threads == 1


# -- the dashboard: starts from the profile, remembers apart from the config --------------------


def _no_engine(_config):  # noqa: ANN001, ANN202 - nothing here runs a session
    raise AssertionError("the dashboard loaded an engine")


def _dashboard(argv: list[str]):  # noqa: ANN202 - a SpectuiApp as ``spectui run`` makes it
    from spectui.cli import build_parser
    from spectui.cli.profiles import options_set, parse_args
    from spectui.cli.run_flags import config_from_args
    from spectui.ui.launch import remembering_app

    args = parse_args(build_parser(), argv, environ={})
    app, _theme = remembering_app(config_from_args(args, fallback_default=True), theme=args.theme, set_elsewhere=options_set(args),
                                  record=False, engine_factory=_no_engine)  # fmt: skip
    return app


@pytest.mark.ui
@pytest.mark.asyncio
async def test_the_dashboard_starts_from_the_profile_and_keeps_changes_out_of_the_config(home, monkeypatch):
    import json

    from spectui.paths import dashboard_state_file

    monkeypatch.setenv("XDG_CONFIG_HOME", str(home.user.parent.parent))
    monkeypatch.setenv("XDG_STATE_HOME", str(home.root / "state"))
    monkeypatch.chdir(home.cwd)
    home.user.write_text('# my settings\n[profile.mini]\ntheme = "spectui-light"\ndraft = "ngram"\nk = 3\n')
    written = home.user.read_bytes()
    app = _dashboard(["run", "--profile", "mini"])
    async with app.run_test(size=(120, 40)) as pilot:
        assert (app.theme, app.controller.config.draft.fixed_k) == ("spectui-light", 3)  # the profile's
        await pilot.press("c", "plus", "m")  # another theme, K 3 -> 4, AR
        await pilot.pause()
        picked = app.theme
        assert picked != "spectui-light" and app.controller.config.draft.fixed_k == 4
    assert home.user.read_bytes() == written  # the config is the person's: never written
    assert json.loads(dashboard_state_file().read_text())["theme"] == picked
    assert (json.loads(dashboard_state_file().read_text())["k"], json.loads(dashboard_state_file().read_text())["mode"]) == (4, "ar")
    # next time: what no flag or file sets comes back; the profile still wins over the state
    again = _dashboard(["run", "--draft", "ngram", "--k", "2"])  # the remembered K: a fixed K's, and --k fixes one
    async with again.run_test(size=(120, 40)):
        assert (again.theme, again.controller.config.draft.fixed_k, again.controller.config.mode) == (picked, 2, "ar")
    cost_aware = _dashboard(["run", "--draft", "ngram"])  # n-gram without --k: cost-aware, no fixed K to restore
    async with cost_aware.run_test(size=(120, 40)):
        assert (cost_aware.controller.config.draft.cost_aware, cost_aware.controller.config.mode) == (True, "ar")
    profiled = _dashboard(["run", "--profile", "mini"])
    async with profiled.run_test(size=(120, 40)):
        assert (profiled.theme, profiled.controller.config.draft.fixed_k, profiled.controller.config.mode) == ("spectui-light", 3, "ar")
    assert home.user.read_bytes() == written


def _update() -> None:
    """Write the snapshots from what the command prints now (review the diff before committing)."""
    import tempfile

    for snapshot, (words, profile) in SNAPSHOTS.items():
        root = Path(tempfile.mkdtemp(prefix="spectui-profiles-"))
        user = root / "config" / "spectui" / "config.toml"
        user.parent.mkdir(parents=True)
        cwd = root / "project" / "prompts" / "deep"
        cwd.mkdir(parents=True)
        (root / "recordings").mkdir()
        text = show(Home(root, user, root / "project" / "spectui.toml", cwd, root / "recordings"), words, profile)
        (DATA / snapshot).write_text(text, encoding="utf-8")
        print(f"wrote {DATA / snapshot}")
        shutil.rmtree(root)


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    _update()
elif __name__ == "__main__":
    sys.exit("usage: python tests/functional/test_profiles.py --update")
