"""The words the dashboard and the sweep view put on screen for models, backends, runs and
settings, and ``HeaderInfo``, the header's plain-data input. No Textual: the controller builds
headers here and its tests read them without a terminal.

One place for these so the main screen, the compare screen and the sweep view name a model or
a mode the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spectui.config import DraftConfig, RunConfig, SamplingConfig
from spectui.recording.schema import ModelArtifacts

BACKEND_LABELS = {"llamacpp": "llama.cpp", "mlx": "MLX"}
#: How much of the prompt the header shows (its words, whitespace folded).
PROMPT_CHARS = 40


@dataclass(frozen=True)
class HeaderInfo:
    """The two header lines, as text (``widgets.header.RunHeader`` draws them)."""

    backend: str = "llama.cpp"
    target: str = ""
    quant: str = ""
    draft: str = ""  # "AR" or "spec n-gram K=4" / "spec draft <name> K=4"
    sampling: str = "greedy"
    prompt: str = ""
    state: str = "idle"  # a RunState value
    detail: str = ""  # tokens so far, the finish reason, an error line
    #: "rec" (live, recording to ``path``), "off" (recording turned off), "replay" (showing
    #: the recording at ``path``), "" (nothing run yet)
    recording: str = ""
    path: str = ""


def backend_label(name: str) -> str:
    return BACKEND_LABELS.get(name, name)


def model_label(spec: str) -> str:
    """A model as the user named it: the embedded default, or the file name without ``.gguf``."""
    if spec in ("", "smollm2"):
        return "SmolLM2-135M (embedded)"
    return Path(spec).name.removesuffix(".gguf")


def artifact_label(artifacts: ModelArtifacts, spec: str) -> tuple[str, str]:
    """(name, quant) of a loaded model: the file name (what people pass and recognise; GGUF
    ``general.name`` strings are often long and odd), the quant only when the name lacks it."""
    a = artifacts
    name = Path(a.path).name.removesuffix(".gguf") if a.path else (a.name or model_label(spec))
    quant = a.quant if a.quant and a.quant.lower() not in name.lower() else ""
    return name, quant


def draft_label(cfg: RunConfig) -> str:
    """The header's mode: ``AR``, ``spec n-gram K=4``, ``spec draft <model> K=1..16 adaptive``."""
    if cfg.mode == "ar":
        return "AR"
    d: DraftConfig = cfg.draft
    return f"spec {d.label(model=f'draft {model_label(d.source)}')}"


def run_label(cfg: RunConfig | None) -> str:
    """A compare column's run: ``AR``, ``spec n-gram K=4``, ``spec draft model K=4`` (the K it
    started with, also when adaptive: the column is narrow); ``waiting`` before its header."""
    if cfg is None:
        return "waiting"
    if cfg.mode == "ar":
        return "AR"
    return f"spec {'n-gram' if cfg.draft.is_ngram else 'draft model'} K={cfg.draft.k}"


def sampling_label(s: SamplingConfig) -> str:
    if s.greedy:
        return "greedy"
    text = f"T={s.temperature:.2f}"
    text += f" top-k {s.top_k}" if s.top_k else ""
    text += f" top-p {s.top_p:g}" if s.top_p < 1 else ""
    return text + f" seed {s.seed}"


def prompt_label(cfg: RunConfig) -> str:
    """``tier: first words…`` of the prompt, on one line."""
    words = " ".join(cfg.prompt.split())
    short = words[:PROMPT_CHARS] + "…" if len(words) > PROMPT_CHARS else words
    return (f"{cfg.prompt_tier}: " if cfg.prompt_tier else "") + short
