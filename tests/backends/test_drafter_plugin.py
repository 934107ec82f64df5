"""docs/internals/drafters.md's example drafter, installed as a package of its own (its module
and a dist-info folder declaring the page's entry point, on the path of a child process), runs
through ``spectui run --draft NAME --draft-option ...`` on the embedded model with nothing in
spectui edited, and its output is AR's token for token. The same example with its protocol
broken is refused in one line, exit 2. On one engine, two requests: its option takes effect,
its state (the outputs of earlier requests) carries from the first to the second, which then
copies most of its output, still AR's."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

from spectui.config import RunConfig
from spectui.drafting import DraftConfig, Fixed, Lookup
from spectui.metrics.stats import summarize
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
    spec = spectui(folder, *COMMON, "--draft", name, "--draft-option", "min-match=1", "--k", "4",
                   "-o", str(tmp_path / "spec.spectui"), cache=cache)
    assert spec.returncode == 0, spec.stderr
    recording = read_recording(tmp_path / "spec.spectui")
    draft = recording.header.config.draft
    # typed, with the option as asked: read without the plugin here
    assert draft == DraftConfig(drafter=Lookup(name=name, options={"min-match": 1}), length=Fixed(k=4))
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


SECOND = "Name three colours of the rainbow and say one thing about each."


def test_the_documented_plugins_option_and_state_across_two_requests(engine, tmp_path, monkeypatch):
    from spectui.cli.run_flags import with_draft_options
    from spectui.engine.drafters import drafter_kind, find_drafter, unregister

    source, name, value = doc_example()
    monkeypatch.syspath_prepend(str(install(tmp_path / "site", source, name, value)))
    importlib.invalidate_caches()
    assert find_drafter(name) is not None
    made = []
    make = engine.make_drafter
    monkeypatch.setattr(engine, "make_drafter", lambda config, **kw: made.append(make(config, **kw)) or made[-1])
    engine._drafter_states.pop(name, None)  # the session's engine: no other test's state
    try:
        common = {"target": engine.config.target, "backend": engine.config.backend, "prompt": SECOND, "max_tokens": 48}
        ar = [t for e in engine.run(RunConfig(mode="ar", **common), memory_interval_s=None) if type(e) is Step for t in e.tokens]
        # the option as the command line sets it: parsed once, there
        draft = with_draft_options(DraftConfig(drafter=Lookup(name=name), length=Fixed(k=4)), ["min-match=3"])
        config = RunConfig(draft=draft, **common)
        runs = []
        for _ in range(2):
            events = list(engine.run(config, memory_interval_s=None))
            runs.append(([t for e in events if type(e) is Step for t in e.tokens], summarize(events)))
        (first_tokens, first), (second_tokens, second) = runs
        assert first_tokens == ar and second_tokens == ar  # exact under greedy, with or without the memory
        made = [d for d in made if d is not None]  # the AR run's: none
        assert [d.min_match for d in made] == [3, 3]  # the option took effect
        outputs = engine.drafter_state(drafter_kind(name))
        assert made[0].outputs is made[1].outputs is outputs  # one state, shared by the engine's drafters
        assert outputs == [ar, ar]  # each request's output, kept for the next
        # the first request copies from itself only; the second from the first's output too
        assert second.accepted > first.accepted and second.accepted >= 0.6 * len(ar), (first.accepted, second.accepted)
    finally:
        engine._drafter_states.pop(name, None)
        unregister(name)
        sys.modules.pop(value.split(":")[0], None)
