"""Shared fixtures: the real embedded model (SmolLM2-135M-Instruct Q4_1 GGUF), loaded once."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

from spectui.config import BackendConfig, DraftConfig, RunConfig
from spectui.models.registry import embedded_model_path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Sessions are recorded by default; tests must not fill the repository's recordings/.
os.environ["SPECTUI_RECORDINGS"] = tempfile.mkdtemp(prefix="spectui-test-recordings-")
# Nor read or write the user's cache: verify-cost curves left there by earlier runs (or by
# `spectui tune`) would change what a cost-aware K does in a test.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="spectui-test-cache-")
# Nor the user's data directory (the history index lives there; platformdirs honours XDG_* on Linux).
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="spectui-test-data-")


@pytest.fixture(scope="session")
def model_path() -> str:
    return embedded_model_path()


@pytest.fixture(scope="session")
def engine(model_path):
    """A target and a draft model context over the same weights (the only registry model).

    The draft context is a separate KV cache, so self-drafting exercises every code path a
    second GGUF would; tests make it disagree by sampling the draft at temperature 1.0.
    """
    from spectui.engine.session import Engine

    config = RunConfig(
        target=model_path,
        mode="spec",
        prompt="x",
        draft=DraftConfig(source=model_path),
        backend=BackendConfig(n_ctx=2048),
    )
    with Engine.load(config) as eng:
        yield eng


def run_cli(*args: str, stdin: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spectui", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=timeout,
        cwd=REPO,
    )


@pytest.fixture(scope="session")
def mlx_engine(model_path):
    """MLX target and MLX draft model over one set of weights, through ``Engine.load``."""
    from spectui.engine.session import Engine

    config = RunConfig(
        target=model_path,
        mode="spec",
        prompt="x",
        draft=DraftConfig(source=model_path),
        backend=BackendConfig(name="mlx", n_ctx=512),
    )
    with Engine.load(config) as eng:
        yield eng


@pytest.fixture(params=["llamacpp", "mlx"])
def any_engine(request):
    """One test body over both backends: the llama.cpp engine, then the MLX one."""
    return request.getfixturevalue("engine" if request.param == "llamacpp" else "mlx_engine")

