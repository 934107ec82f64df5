"""``--deterministic`` says what it guarantees on the backend and device it runs on, and is
refused in one line where it cannot hold (MLX; llama.cpp with GPU offload, which this CPU
build cannot show; weights whose CPU kernels were measured not to be batch-invariant)."""

from __future__ import annotations

import re

import pytest

from spectui.config import BackendConfig, RunConfig
from spectui.errors import SpectuiError
from tests.conftest import run_cli


def test_mlx_refuses_deterministic_before_loading_anything(tmp_path):
    from spectui.engine.embedded import Engine

    config = RunConfig(target=str(tmp_path / "never-read.gguf"), prompt="x", backend=BackendConfig(name="mlx", deterministic=True))
    with pytest.raises(SpectuiError, match="no batch-invariant setting is known for MLX") as err:
        Engine.load(config)
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_a_cpu_run_records_what_deterministic_guarantees(model_path):
    from spectui.engine.backends.llamacpp import deterministic_guarantee
    from spectui.engine.embedded import Engine

    backend = BackendConfig(n_ctx=256, n_threads=1, flash_attn="on", deterministic=True)
    statement = deterministic_guarantee(backend)  # this build has no GPU offload: it holds
    config = RunConfig(target=model_path, mode="ar", prompt="Say hi.", max_tokens=4, backend=backend)
    with Engine.load(config) as engine:
        header = next(iter(engine.run(memory_interval_s=None)))
    assert header.artifacts.runtime["deterministic"] == statement
    assert statement.startswith("llama.cpp CPU, 1 thread, flash attention on")


@pytest.mark.slow
def test_weights_measured_not_batch_invariant_are_refused_with_the_measured_difference(model_path, tmp_path):
    """One thread and flash attention do not make every weight type batch-invariant: on the x86
    AVX2 host this was written on, SmolLM2-135M in Q6_K differs by up to 0.79 between a block
    and single tokens (Q4_K_M 1.01; Q4_0, Q4_1, Q8_0 0.0), and the Qwen2.5-Coder 1.5B Q4_K_M's
    greedy speculative output parted from AR at token 37 under --deterministic. Such a run is
    refused in one line naming the measured difference. Kernels differ by CPU: where this
    host's Q6_K kernels measure invariant, the run goes ahead and says so."""
    from spectui.engine.host.quantize import quantize

    variant = quantize(model_path, tmp_path / "smollm2-Q6_K.gguf", "Q6_K")
    result = run_cli("run", "--target", str(variant), "--deterministic", "--mode", "spec", "--max-tokens", "8", "--prompt", "Say hi.")
    assert "Traceback" not in result.stderr
    if result.returncode == 0:
        assert "bit-identical" in result.stderr, result.stderr
        return
    errors = [line for line in result.stderr.splitlines() if line.startswith("spectui: error:")]
    assert result.returncode == 2 and len(errors) == 1, result.stderr
    assert "--deterministic cannot hold for smollm2-Q6_K.gguf (Q6_K) here" in errors[0]
    worst = re.search(r"by up to ([0-9.]+) \(measured to depth (\d+)", errors[0])
    assert worst is not None and float(worst.group(1)) > 0 and int(worst.group(2)) > 0, errors[0]


@pytest.mark.slow
def test_with_no_weights_named_a_deterministic_run_picks_an_invariant_type_and_a_chosen_file_is_still_judged(tmp_path, monkeypatch):
    """The person named no weights and this host's probe picked F16 (as on an AVX-512 EPYC,
    where F16's blocks differ from single tokens): a --deterministic run does not refuse the
    type spectui picked itself, it runs an invariant one and says which and why in one line.
    The probe's pick is injected as the stored choice the first run's probe would have left."""
    from spectui.engine.host.quantize import quantize
    from spectui.engine.host.weights import ENV, WeightChoice, store_choice

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(ENV, "auto")
    backend = BackendConfig(n_threads=1, flash_attn="on", deterministic=True)  # what --deterministic sets
    # this host's first-run numbers (ms), F16 verifying a block of 9 fastest
    token = {"Q4_1": 9900.0, "F16": 12400.0, "Q8_0": 9700.0}
    block = {"Q4_1": 60800.0, "F16": 18600.0, "Q8_0": 43900.0}
    store_choice(backend, WeightChoice(quant="F16", shipped="Q4_1", token_us=token, block_us=block, by="test"))

    out = tmp_path / "det.spectui"
    result = run_cli("run", "--headless", "--deterministic", "--prompt", "hi", "--max-tokens", "6", "--output", str(out))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    said = [line for line in result.stderr.splitlines() if "the embedded model runs as" in line]
    assert len(said) == 1 and "runs as Q8_0 for this run: --deterministic" in said[0] and "F16" in said[0], result.stderr
    assert "cannot hold" not in result.stderr and "bit-identical" in result.stderr, result.stderr
    report = run_cli("report", str(out))
    assert "SmolLM2-135M-Instruct.Q8_0" in report.stdout, report.stdout

    # a file the person chose is run as given, and refused where its kernels measure otherwise
    f16 = quantize(embedded_path(), tmp_path / "smollm2-F16.gguf", "F16")
    chosen = run_cli("run", "--headless", "--deterministic", "--target", str(f16), "--prompt", "hi", "--max-tokens", "6", "--no-record")
    assert "Traceback" not in chosen.stderr and "the embedded model runs as" not in chosen.stderr
    if chosen.returncode != 0:
        assert chosen.returncode == 2 and "--deterministic cannot hold for smollm2-F16.gguf (F16) here" in chosen.stderr


def embedded_path() -> str:
    from spectui.models.registry import embedded_model_path

    return embedded_model_path()
