"""Where an MLX model argument points: the embedded GGUF, a local file or mlx-lm folder, or an
``org/name`` id found in the local Hugging Face cache only (spectui never downloads). Kept apart
from ``mlx`` because it needs no MLX: resolving a name must not load the framework."""

from __future__ import annotations

import os

from spectui.errors import SpectuiError
from spectui.models.gguf import GGUF_MAGIC


def is_gguf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def resolve_mlx_model(spec: str, *, hub_cache: str | None = None) -> str:
    """A model argument to a local GGUF file or mlx-lm directory; never downloads.

    '' or 'smollm2' is the embedded default GGUF; an existing path is used as is; an
    ``org/name`` id is looked up in the local Hugging Face cache only.
    """
    from spectui.models.registry import DEFAULT_MODEL, embedded_model_path

    if spec in ("", DEFAULT_MODEL):
        return embedded_model_path()
    path = os.path.expanduser(spec)
    if os.path.exists(path):
        return path
    if spec.count("/") == 1 and not spec.startswith((".", "/", "~")):
        return _hub_cache_path(spec, hub_cache)
    raise SpectuiError(f"model not found: {spec}")


def _hub_cache_path(repo_id: str, cache_dir: str | None = None) -> str:
    # local_files_only is the guard; HF_HUB_OFFLINE also keeps any later hub call in this
    # process (transformers, mlx-lm) from reaching for the network
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(
            repo_id,
            cache_dir=cache_dir,
            local_files_only=True,
            allow_patterns=["*.json", "*.safetensors", "*.jinja", "tokenizer.model", "*.txt"],
        )
    except Exception:  # noqa: BLE001 - huggingface_hub's many not-cached errors all mean one thing here
        raise SpectuiError(
            f"{repo_id!r} is not in the local Hugging Face cache; spectui never downloads models "
            "(fetch it yourself, e.g. huggingface-cli download, or pass a local path)"
        ) from None
