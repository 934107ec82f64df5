"""Fixtures for the runtime tests: models the runtimes' methods need (a draft copy, tiny MTP
models). The llama-server binary itself is ``llama_server_binary`` in tests/conftest.py, which
the server and watch tests ask for too."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def draft_copy(model_path) -> str:
    """A requantized copy of the embedded model (Q8_0), cached by the source's sha256: a draft
    with the target's vocabulary and different weights."""
    from spectui.engine.host.quantize import cached_copy

    return str(cached_copy(model_path, "Q8_0"))


@pytest.fixture(scope="session")
def tiny_mtp(model_path, tmp_path_factory) -> str:
    from tests.runtime.tiny_mtp import write_tiny_mtp

    return str(write_tiny_mtp(tmp_path_factory.mktemp("mtp") / "tiny-mtp-qwen35.gguf", model_path))


@pytest.fixture(scope="session")
def tiny_no_mtp(model_path, tmp_path_factory) -> str:
    from tests.runtime.tiny_mtp import write_tiny_mtp

    return str(write_tiny_mtp(tmp_path_factory.mktemp("no-mtp") / "tiny-qwen35.gguf", model_path, nextn=False))
