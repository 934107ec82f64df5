"""Fixtures for the runtime tests: the llama-server binary, built once into the user's cache.

tests/conftest.py points ``XDG_CACHE_HOME`` at a temporary folder so that no test reads the
user's caches; the llama-server build is the one exception, as a developer or CI machine pays
its minutes once per llama-cpp-python version (``~/.cache/spectui/llama.cpp/<version>/build``,
the folder ``tests/server/test_llama_server.py`` finds too). ``$SPECTUI_LLAMA_SERVER`` or a
``llama-server`` on ``$PATH`` is used instead when there is one (``find_server``'s order).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import platformdirs
import pytest


def user_cache() -> Path:
    """spectui's cache folder as it is outside the tests (the tests' XDG_CACHE_HOME set aside)."""
    saved = os.environ.pop("XDG_CACHE_HOME", None)
    try:
        return Path(platformdirs.user_cache_dir("spectui", appauthor=False))
    finally:
        if saved is not None:
            os.environ["XDG_CACHE_HOME"] = saved


@pytest.fixture(scope="session")
def llama_server_binary():
    """The llama-server the runtime starts: found, or built once (minutes; a line per phase)."""
    from spectui.runtime.build import STEP, find_server

    def progress(fraction: float, text: str) -> None:
        if not text.startswith(STEP):
            print(f"[llama-server build {fraction:.0%}] {text}", file=sys.stderr, flush=True)

    return find_server(progress=progress, cache=user_cache())


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
