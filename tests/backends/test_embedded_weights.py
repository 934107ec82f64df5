"""The embedded default runs in the weight type this machine's probe chose, on the real model.

The rest of the suite runs the shipped file (``SPECTUI_EMBEDDED_WEIGHTS=shipped`` in
tests/conftest.py); these tests set it back to ``auto`` (or a type) in a cache of their own.
"""

from __future__ import annotations

import json
import os

import pytest

from spectui.config import BackendConfig, RunConfig
from spectui.drafting import DraftConfig, Fixed
from spectui.engine.embedded import Engine
from spectui.engine.host.weights import CACHE_NAME, ENV, choose_weights, resolve_target, stored_choice
from spectui.models.gguf import read_gguf
from spectui.models.registry import embedded_model_path
from spectui.recording.schema import Step
from tests.conftest import run_cli
from tests.unit.test_weight_choice import row

pytestmark = pytest.mark.slow

PROMPT = "Fix the typos: The quick brwn fox jumpd over the lazzy dog. The quick brwn fox jumpd over the lazzy dog."


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(ENV, "auto")
    return tmp_path / "cache" / "spectui"


def tokens(engine: Engine, config: RunConfig) -> list[int]:
    return [t for e in engine.run(config, memory_interval_s=None) if type(e) is Step for t in e.tokens]


def test_the_first_run_probes_once_and_the_engine_loads_the_chosen_copy(fresh_cache):
    said: list[str] = []
    backend = BackendConfig()
    target = resolve_target("", backend, say=said.append)
    choice = stored_choice(backend)
    # a line between them only when other processes held the CPU while the types were measured
    assert len(said) == 2 or (len(said) == 3 and said[1].startswith("other processes kept the CPU busy")), said
    assert "choosing the embedded model's weight type" in said[0]
    assert said[-1].startswith(f"the embedded model runs as {choice.quant} here: {choice.reason()}")
    assert choice is not None and choice.by == "first run" and choice.shipped == "Q4_1"
    assert set(choice.token_us) == set(choice.block_us) == {"Q4_1", "F16", "Q8_0"}
    assert all(v > 0 for v in [*choice.token_us.values(), *choice.block_us.values()])
    # the stored choice is what the rule makes of the stored numbers
    assert read_gguf(target.path).quant == choice.quant
    if choice.quant == "Q4_1":
        assert target.path == embedded_model_path() and not target.origin
    else:
        assert os.path.basename(target.path) == f"SmolLM2-135M-Instruct.{choice.quant}.gguf"
        assert "requantized to" in target.origin and choice.reason() in target.origin
    # the copies not chosen are gone from the cache; the chosen one stays
    copies = {p.name for p in (fresh_cache / "quant").rglob("*.gguf")}
    assert copies == ({os.path.basename(target.path)} if target.origin else set())

    # the stored numbers audit the choice: the rule applied to them again gives it again
    rows = [row(q, choice.token_us[q] / 1000, choice.block_us[q] / choice.token_us[q]) for q in choice.token_us]
    assert choose_weights(rows, choice.shipped, by="again").quant == choice.quant

    # a second resolve reads the stored choice: no probe, the same file
    stamp = json.loads((fresh_cache / CACHE_NAME).read_text())
    again = resolve_target("", backend, say=said.append)
    assert again == target and len(said) == 2
    assert json.loads((fresh_cache / CACHE_NAME).read_text()) == stamp

    # the engine loads that file, names it in the header, and speculation on it is exact
    config = RunConfig(prompt=PROMPT, chat=False, max_tokens=48)
    with Engine.load(config) as engine:
        header = engine.header(config, PROMPT, engine.prepare_prompt(config)[1])
        assert header.artifacts.target.path == os.path.abspath(target.path)
        assert header.artifacts.target.quant == choice.quant and header.artifacts.target.origin == target.origin
        ar = tokens(engine, config)
        spec = tokens(engine, RunConfig(prompt=PROMPT, chat=False, max_tokens=48, mode="spec", draft=DraftConfig(length=Fixed())))
    assert len(ar) > 20 and spec == ar


def test_a_type_named_in_the_environment_runs_without_a_probe(fresh_cache, monkeypatch):
    monkeypatch.setenv(ENV, "q8_0")
    said: list[str] = []
    target = resolve_target("smollm2", BackendConfig(), say=said.append)
    assert not said and stored_choice(BackendConfig()) is None
    assert read_gguf(target.path).quant == "Q8_0" and f"{ENV}=q8_0" in target.origin
    monkeypatch.setenv(ENV, "shipped")
    assert resolve_target("", BackendConfig(), say=said.append).path == embedded_model_path()
    # a path is run exactly as given, whatever the setting
    monkeypatch.setenv(ENV, "auto")
    assert resolve_target(embedded_model_path(), BackendConfig(), say=said.append).path == embedded_model_path() and not said


def test_the_recording_and_report_name_the_copy_and_a_bad_setting_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(ENV, "Q4_0")
    out = tmp_path / "run.spectui"
    proc = run_cli("run", "--headless", "--prompt", PROMPT, "--max-tokens", "8", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    report = run_cli("report", str(out))
    assert report.returncode == 0, report.stderr
    assert "SmolLM2-135M-Instruct.Q4_0" in report.stdout
    # the default name of a recording names the file that ran, as the header does
    named = run_cli("run", "--headless", "--prompt", PROMPT, "--max-tokens", "4")
    assert named.returncode == 0, named.stderr
    assert "_SmolLM2-135M-Instruct.Q4_0.spectui" in named.stderr
    assert "target made by spectui" in report.stdout and "requantized to Q4_0" in report.stdout

    monkeypatch.setenv(ENV, "Q9_9")
    bad = run_cli("run", "--headless", "--prompt", "hi", "--max-tokens", "2", "--no-record")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().count("\n") == 0 and f"{ENV}=Q9_9" in bad.stderr

