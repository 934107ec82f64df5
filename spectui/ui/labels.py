"""The words the dashboard and the sweep view put on screen for models, backends, runs and
settings, and ``HeaderInfo``, the header's plain-data input. No Textual: the controller builds
headers here and its tests read them without a terminal.

One place for these so the main screen, the compare screen and the sweep view name a model or
a mode the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spectui.config import EnvelopeConfig, RunConfig, SamplingConfig
from spectui.engine.backends import backend_kind, backend_names
from spectui.format import model_name
from spectui.history.labels import run_label
from spectui.metrics.envelope import Breach
from spectui.recording.schema import Header, ModelArtifacts

#: How much of the prompt the header shows (its words, whitespace folded).
PROMPT_CHARS = 40


@dataclass(frozen=True)
class HeaderInfo:
    """The header lines, as text (``widgets.header.RunHeader`` draws them)."""

    backend: str = "llama.cpp"
    target: str = ""
    quant: str = ""
    draft: str = ""  # the run's one label (``run_label``): "AR", "spec n-gram K=1..16 adaptive", ...
    sampling: str = "greedy"
    prompt: str = ""
    state: str = "idle"  # a RunState value
    detail: str = ""  # tokens so far, the finish reason, an error line
    #: "rec" (live, recording to ``path``), "off" (recording turned off), "replay" (showing
    #: the recording at ``path``), "" (nothing run yet)
    recording: str = ""
    path: str = ""
    #: the declared envelope, one limit an item (``envelope_items``): the header's third line
    envelope: tuple[str, ...] = ()
    #: the first breach of the run on screen (``breach_label``), "" while it holds
    breach: str = ""


def backend_label(name: str) -> str:
    """The registry's label of an embedded backend (``llama.cpp``); a server's name as it is."""
    return next((k.label for k in map(backend_kind, backend_names()) if k.name == name), name)


def model_label(spec: str) -> str:
    """A model as a configuration names it, by its one display name (``format.model_name``:
    the file name, ``SmolLM2-135M-Instruct.Q4_1`` for the embedded default)."""
    return model_name(spec)


def artifact_label(artifacts: ModelArtifacts, spec: str) -> tuple[str, str]:
    """(name, quant) of a loaded model: the display name of its file (``format.model_name``;
    GGUF ``general.name`` strings are often long and odd), the quant only when the name lacks it."""
    a = artifacts
    name = model_name(a.path) if a.path else (a.name or model_label(spec))
    quant = a.quant if model_name(name, a.quant) != name else ""
    return name, quant


def recorded_label(header: Header | None) -> str:
    """A run on screen by what it recorded: the one label of its header's configuration and
    draft file (``run_label``, as the header and the history name it); ``waiting`` before
    its header arrives."""
    if header is None:
        return "waiting"
    draft = header.artifacts.draft
    return run_label(header.config, draft.path if draft is not None else "")


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
    if cfg.conversation:  # a chat's turn: which one
        return f"chat turn {cfg.turn}: {short}"
    return (f"{cfg.prompt_tier}: " if cfg.prompt_tier else "") + short


def envelope_items(env: EnvelopeConfig) -> tuple[str, ...]:
    """The declared envelope, compact, one limit an item: ``headroom ≥ 10 GiB``, ``swap-in ≤
    200 MiB``, ``red ≤ 60 s``, ``throttle 0``, ``AC``. An undeclared floor
    (0) is ``auto``: the CLI resolves it to 10/24 of the host's memory when the run starts."""
    # "10 GiB", "9.5 GiB": the whole line fits an 80-column header
    floor = f"{env.min_headroom_mib / 1024:.1f}".removesuffix(".0") + " GiB" if env.min_headroom_mib > 0 else "auto"
    items = [
        f"headroom ≥ {floor}",
        f"swap-in ≤ {env.max_swap_in_mib:g} MiB",
        f"red ≤ {env.max_red_pressure_s:g} s",
        "throttle 0" if env.max_throttle_events == 0 else f"throttle ≤ {env.max_throttle_events}",
    ]
    if env.require_ac_power:
        items.append("AC")
    # other processes' load is flagged, not a limit a run fails: not in the header's line
    return tuple(items)


def clock_label(t_s: float) -> str:
    """Seconds since the run began as ``mm:ss`` (``h:mm:ss`` past an hour)."""
    t = max(0, int(t_s))
    h, rest = divmod(t, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60:02d}:{rest % 60:02d}"


def breach_label(breaches: Sequence[Breach]) -> str:
    """The first breach of a run, where it happened and the limit: ``breach 00:42 headroom
    8.1 GiB < floor 10.0 GiB`` (``· +1 more: swap-ins`` when others followed); "" for none."""
    if not breaches:
        return ""
    first = breaches[0]
    text = f"breach {clock_label(first.t_s)} {first.text}"
    if len(breaches) > 1:
        text += f" · +{len(breaches) - 1} more: " + ", ".join(b.limit for b in breaches[1:])
    return text
