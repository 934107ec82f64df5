"""docs/internals/drafters.md's example drafter, installed as a package of its own (its module
and a dist-info folder declaring the page's entry point, on the path of a child process), runs
through ``spectui run --draft NAME`` on the embedded model with nothing in spectui edited, and
its output is AR's token for token. The same example with its protocol broken is refused in
one line, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys

from spectui.drafting import DraftConfig, Fixed, Lookup
from spectui.recording.reader import read_recording
from spectui.recording.schema import Step
from tests.conftest import REPO, seed_calibrations
from tests.drafter_plugins import doc_example, install

PROMPT = "Repeat this line twice, exactly: the quick brown fox jumps over the lazy dog."
COMMON = ["run", "--headless", "--prompt", PROMPT, "--max-tokens", "40", "--threads", "1", "--temperature", "0"]


def spectui(folder, *args: str, cache=None) -> subprocess.CompletedProcess:  # noqa: ANN001
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder), REPO]))
    if cache is not None:
        env["XDG_CACHE_HOME"] = str(cache)
    return subprocess.run([sys.executable, "-m", "spectui", *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=600)


def _tokens(path) -> list[int]:  # noqa: ANN001
    return [t for e in read_recording(path).events if type(e) is Step for t in e.tokens]


def test_the_documented_plugin_runs_and_its_output_is_ars(tmp_path, calibrations):
    source, name, value = doc_example()
    folder = install(tmp_path / "site", source, name, value)
    cache = tmp_path / "cache"
    seed_calibrations(calibrations, cache)
    ar = spectui(folder, *COMMON, "--mode", "ar", "-o", str(tmp_path / "ar.spectui"), cache=cache)
    assert ar.returncode == 0, ar.stderr
    spec = spectui(folder, *COMMON, "--draft", name, "--k", "4", "-o", str(tmp_path / "spec.spectui"), cache=cache)
    assert spec.returncode == 0, spec.stderr
    recording = read_recording(tmp_path / "spec.spectui")
    draft = recording.header.config.draft
    assert draft == DraftConfig(drafter=Lookup(name=name), length=Fixed(k=4))  # typed: read without the plugin here
    assert f"spectui: {name} K=4 |" in spec.stderr  # the label the plugin's DrafterKind gives, in the child
    steps = [e for e in recording.events if type(e) is Step]
    assert sum(e.accepted for e in steps) > 0  # the plugin drafted, and the target kept some
    assert _tokens(tmp_path / "spec.spectui") == _tokens(tmp_path / "ar.spectui")
    assert spec.stdout == ar.stdout  # the text printed, too


def test_the_documented_plugin_with_its_protocol_broken_is_refused_in_one_line(tmp_path):
    source, name, value = doc_example()
    folder = install(tmp_path / "site", source.replace("def propose(", "def suggest("), name, value)
    proc = spectui(folder, *COMMON, "--draft", name, "--no-record")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"spectui: error: the drafter plugin '{name}' (spectui-recall 0.1: {value})")
    assert "lacks propose" in lines[0] and proc.stdout == ""
