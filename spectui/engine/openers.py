"""The built-in backends' openers (``backends.BackendKind.opener``): every check that can fail
on bad input (files, GGUF headers, vocabularies, settings) happens before a model loads.

They sit above the backends and the host measurements because llama.cpp's opener runs the
target in the weight type this host's probe chose (``host.weights``).
"""

from __future__ import annotations

import importlib.util
import os

from spectui.config import RunConfig
from spectui.drafting import Model
from spectui.engine.backends import Opened
from spectui.errors import SpectuiError
from spectui.models.gguf import read_gguf
from spectui.models.registry import resolve_model
from spectui.models.vocab import VocabFacts, draft_incompatibility


def _draft_source(config: RunConfig) -> str | None:
    d = config.draft.drafter
    return d.path if config.mode == "spec" and isinstance(d, Model) else None


def open_llamacpp(config: RunConfig) -> Opened:
    from spectui.engine.backends.llamacpp import LlamaCppBackend, LlamaModel, deterministic_guarantee
    from spectui.engine.host.weights import resolve_target

    if config.backend.deterministic:
        deterministic_guarantee(config.backend)  # refused here, before a model loads, where it cannot hold
    chosen = resolve_target(config.target, config.backend)
    target_info = read_gguf(chosen.path)
    draft_info = None
    source = _draft_source(config)
    if source is not None:
        draft_info = read_gguf(resolve_model(source))
        difference = draft_incompatibility(
            VocabFacts.from_gguf(target_info.metadata), VocabFacts.from_gguf(draft_info.metadata),
            os.path.basename(target_info.path), os.path.basename(draft_info.path),
        )
        if difference:
            raise SpectuiError(f"draft and target vocabularies differ: {difference}")
    target = LlamaCppBackend(LlamaModel(target_info, config.backend), config.backend)
    draft_model = None
    if draft_info is not None:
        try:
            draft_model = LlamaCppBackend.open(draft_info.path, config.backend, share_with=target)
        except BaseException:
            target.close()
            raise
    return Opened(target, draft_model, chosen.origin)


def mlx_missing() -> str:
    """Why ``--backend mlx`` cannot run here ("" where it can): pyproject installs MLX only where
    it is built (Apple silicon, and Linux on the CPU), not on an Intel Mac or Windows."""
    if importlib.util.find_spec("mlx") is None or importlib.util.find_spec("mlx_lm") is None:
        return "MLX is not installed here (it installs on Apple silicon and on Linux); use --backend llamacpp"
    return ""


def open_mlx(config: RunConfig) -> Opened:
    if config.backend.deterministic:
        raise SpectuiError(
            "--deterministic: no batch-invariant setting is known for MLX (its kernels are chosen by shape); "
            "use --backend llamacpp"
        )
    # imported here: mlx and mlx-lm load only for sessions that ask for them
    from spectui.engine.backends.mlx import open_mlx_models

    target, draft = open_mlx_models(config.target, _draft_source(config), config.backend)
    return Opened(target, draft)
