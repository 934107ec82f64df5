"""Where MLX does not install (an Intel Mac, Windows: pyproject's markers leave it out),
``--backend mlx`` is refused in one line rather than a traceback from an import."""

from __future__ import annotations

import importlib.util

import pytest

from spectui.engine.backends import backend_kind
from spectui.errors import SpectuiError


def test_backend_mlx_without_mlx_installed_is_one_line(monkeypatch):
    real = importlib.util.find_spec
    # this machine has MLX: make the two packages read as absent, as on a machine without them
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("mlx", "mlx_lm") else real(name, *a))
    with pytest.raises(SpectuiError, match="MLX is not installed here") as caught:
        backend_kind("mlx").require()  # what Engine.load asks first for --backend mlx
    assert "\n" not in str(caught.value) and "--backend llamacpp" in str(caught.value)


def test_with_mlx_installed_nothing_is_refused():
    pytest.importorskip("mlx_lm", reason="MLX is not installed on this machine")
    backend_kind("mlx").require()
