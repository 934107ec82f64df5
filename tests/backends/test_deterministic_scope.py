"""``--deterministic`` says what it guarantees on the backend and device it runs on, and is
refused in one line where it cannot hold (MLX; llama.cpp with GPU offload, which this CPU
build cannot show)."""

from __future__ import annotations

import pytest

from spectui.config import BackendConfig, RunConfig
from spectui.errors import SpectuiError


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
