"""The stand-in servers of tests/watch (``standin.py``), one per test."""

from __future__ import annotations

import pytest

from tests.watch.standin import serve


@pytest.fixture
def llama_standin():
    yield from serve("llama-server", "llama-server")


@pytest.fixture
def vllm_standin():
    yield from serve("vllm", "vllm")
