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
