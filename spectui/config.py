"""Run configuration: msgspec Structs with defaults and validation.

The configuration is recorded verbatim in every recording header, so every field has a
default (old recordings keep loading when fields are added) and is plain data. The labels
every report and screen shows for a run (``label``, ``describe``) live here too.

Near the bottom of the layers: imports only ``spectui.drafting`` (how drafts are made) and
``spectui.errors``.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from spectui.drafting import RUNTIME_PREFIX, DraftConfig, Model, Runtime
from spectui.errors import SpectuiError

Mode = Literal["ar", "spec"]
Role = Literal["user", "assistant"]
#: The runtimes spectui starts itself (``--runtime``), as ``BackendConfig.name`` names them.
RUNTIMES = ("llama-server", "mlx-lm")
#: Per runtime: its method for spectui's model-free drafters ("": it has none) and its method
#: with a draft model; ``--runtime`` with no ``--draft`` runs the first it has.
RUNTIME_METHODS: dict[str, tuple[str, str]] = {"llama-server": ("ngram-mod", "draft-simple"), "mlx-lm": ("", "draft-model")}


class ChatMessage(msgspec.Struct, frozen=True):
    """One earlier message of a conversation (OpenAI's messages format, without the system
    one: ``RunConfig.system`` holds that)."""

    role: Role
    content: str


class SamplingConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Target sampling. ``temperature == 0`` means greedy (argmax)."""

    temperature: float = 0.0
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1.0 = off
    seed: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def validate(self) -> None:
        if not self.temperature >= 0.0:
            raise SpectuiError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise SpectuiError(f"top-k must be >= 0 (0 turns it off), got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise SpectuiError(f"top-p must be in (0, 1], got {self.top_p}")
        if not 0 <= self.seed < 2**63:
            raise SpectuiError(f"the seed must be a whole number from 0 to 2**63 - 1, got {self.seed}")


class BackendConfig(msgspec.Struct, frozen=True, kw_only=True):
    #: an embedded backend (llama.cpp, MLX), a running ``server`` (``--server URL``) or a runtime
    #: spectui starts itself (``--runtime llama-server`` / ``mlx-lm``: ``RUNTIMES``)
    name: Literal["llamacpp", "mlx", "server", "llama-server", "mlx-lm"] = "llamacpp"
    n_ctx: int = 4096
    n_batch: int = 512
    n_threads: int = 0  # 0 = one per available core
    n_gpu_layers: int = -1  # -1 = offload every layer where a GPU exists (Metal, CUDA)
    #: llama.cpp's flash attention: "auto" (its own choice), "on" or "off"
    flash_attn: Literal["auto", "on", "off"] = "auto"
    #: Asked for settings under which evaluating a block and evaluating its tokens one at a
    #: time give bit-identical logits (``spectui.engine.host.noise``; llama.cpp: one thread, flash
    #: attention on), so greedy speculative output equals AR at any context length.
    deterministic: bool = False
    #: ``server``: the OpenAI-compatible endpoint's base URL, and the name of the environment
    #: variable holding its API key (the key itself is never recorded).
    server_url: str = ""
    api_key_env: str = ""
    #: ``--runtime``: the runtime's binary (``--llama-server PATH``; "": $PATH, then spectui's build)
    runtime_binary: str = ""

    @property
    def is_runtime(self) -> bool:
        return self.name in RUNTIMES

    def validate(self) -> None:
        if self.n_ctx < 16:
            raise SpectuiError(f"context size must be at least 16, got {self.n_ctx}")
        if self.n_batch < 1:
            raise SpectuiError(f"batch size must be >= 1, got {self.n_batch}")
        if self.n_threads < 0:
            raise SpectuiError(f"threads must be >= 0 (0 = all cores), got {self.n_threads}")
        if self.runtime_binary and self.name == "mlx-lm":
            raise SpectuiError("--llama-server names llama-server's binary; --runtime mlx-lm runs mlx_lm.server from this Python's mlx-lm")
        if self.deterministic and (self.name == "server" or self.is_runtime):
            raise SpectuiError("--deterministic sets the embedded engine's kernels; a server's are its own")
        if self.deterministic and self.name == "llamacpp" and (self.n_threads != 1 or self.flash_attn != "on"):
            raise SpectuiError(
                "deterministic llama.cpp runs take one thread with flash attention on"
                f" (got {self.n_threads or 'all'} threads, flash attention {self.flash_attn})"
            )


class PolicyConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The runtime fallback policy (``spectui.engine.loop.policy``): step down when speculation
    stops paying or the machine runs short, probe back up later. Off unless ``enabled``."""

    enabled: bool = False
    #: a window is this many speculative blocks; its acceptance is accepted / drafted in it
    window_blocks: int = 8
    #: step down after this many consecutive windows below the floor
    acceptance_floor: float = 0.3
    low_windows: int = 2
    #: step down at once when swap in use grows by more than this since the session began,
    #: or memory pressure reaches this level (macOS level 4 = critical; Linux PSI some avg10 %)
    swap_growth_ceiling_mb: float = 256.0
    pressure_ceiling: float = 4.0
    #: after a step down, try one level up again after this many decode steps
    probe_after_steps: int = 64

    def validate(self) -> None:
        if self.window_blocks < 1 or self.low_windows < 1 or self.probe_after_steps < 1:
            raise SpectuiError("policy window, low-window count and probe interval must be >= 1")
        if not 0.0 <= self.acceptance_floor <= 1.0:
            raise SpectuiError(f"policy acceptance floor must be in [0, 1], got {self.acceptance_floor}")


class EnvelopeConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The memory and machine envelope declared before measuring (the acceptance brief's limits).

    Recorded in every header, so a verdict judges a run by the limits it was declared with.
    ``min_headroom_mib`` 0 means "not declared": judged at 10/24 of the host's memory (the
    brief's 10 GB free on a 24 GB host), which the CLI resolves and records. Old recordings
    carry these defaults, so they are judged by the brief too.
    The judging lives in ``spectui.metrics.envelope``.
    """

    min_headroom_mib: float = 0.0
    #: swap-ins (bytes paged back in) over a session or soak, MiB
    max_swap_in_mib: float = 200.0
    #: longest continuous stretch at red (critical) memory pressure, seconds
    max_red_pressure_s: float = 60.0
    #: CPU thermal throttle events counted by the OS
    max_throttle_events: int = 0
    #: mean CPU share taken by other processes (0.25 = a quarter of all cores)
    max_other_cpu: float = 0.25
    #: acceptance runs must be on AC power with low-power mode off
    require_ac_power: bool = True

    def validate(self) -> None:
        for name in ("min_headroom_mib", "max_swap_in_mib", "max_red_pressure_s"):
            if not getattr(self, name) >= 0:
                raise SpectuiError(f"{name.replace('_', '-').replace('mib', 'mb')} must be >= 0, got {getattr(self, name)}")
        if self.max_throttle_events < 0:
            raise SpectuiError(f"max-throttle-events must be >= 0, got {self.max_throttle_events}")
        if not 0 <= self.max_other_cpu <= 1:
            raise SpectuiError(f"max-other-cpu must be between 0 and 1 (a share of all cores), got {self.max_other_cpu}")


class RunConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Everything that decides what a session computes."""

    target: str = ""
    mode: Mode = "spec"
    prompt: str = ""
    prompt_tier: str = ""
    #: the prompts/ file the prompt came from, and its quality check in canonical form
    #: ("json; keys: city:str, ..." or "tool-call; tools: ...", see spectui.quality; "" = none),
    #: so a recording can be graded without the prompt file
    prompt_name: str = ""
    prompt_check: str = ""
    #: Apply the model's chat template (from GGUF metadata) around the prompt.
    chat: bool = True
    #: The system prompt (chat: the template's system message; raw: text put before the rest).
    system: str = ""
    #: The conversation so far, before ``prompt`` (the new user message): user and assistant
    #: messages in turn, starting with a user one. Raw mode continues their text as one document.
    history: tuple[ChatMessage, ...] = ()
    #: The conversation this run is a turn of ("" = a single run). A turn right after the
    #: conversation's previous one keeps the KV cache they built (``Engine.reuses_cache``), so
    #: its prefill evaluates only the new tokens; a single run always starts from an empty
    #: cache, so its prefill time is comparable run to run.
    conversation: str = ""
    max_tokens: int = 256
    sampling: SamplingConfig = SamplingConfig()
    #: how drafts are made (``spectui.drafting``): inert in AR mode
    draft: DraftConfig = DraftConfig()
    backend: BackendConfig = BackendConfig()
    policy: PolicyConfig = PolicyConfig()
    envelope: EnvelopeConfig = EnvelopeConfig()

    @property
    def turn(self) -> int:
        """The turn of the conversation this run is (1 for a single run)."""
        return len(self.history) // 2 + 1

    def messages(self) -> list[dict[str, str]]:
        """The whole conversation for a chat template or a server: system, history, prompt."""
        out = [{"role": "system", "content": self.system}] if self.system else []
        out.extend({"role": m.role, "content": m.content} for m in self.history)
        out.append({"role": "user", "content": self.prompt})
        return out

    def raw_text(self) -> str:
        """Raw mode's document: the system text, then every message, then the prompt, as one
        text the model continues (a reply is its continuation, so nothing is put between)."""
        return self.system + "".join(m.content for m in self.history) + self.prompt

    def label(self) -> str:
        """What the run is, in a few words: ``AR``, ``spec n-gram K=4``, ``spec draft model
        K=1..16 adaptive``; a server's drafting is its own configuration."""
        if self.mode == "ar":
            return "AR"
        if self.backend.name == "server":
            return "spec (drafting on the server)"
        if self.backend.is_runtime:
            return f"spec {self.backend.name} {self.draft.runtime_method} {self.draft.k_label()}"
        return f"spec {self.draft.label()}"

    def describe(self, *, draft_path: bool = True) -> str:
        """The long form for reports: ``AR``, ``speculative, n-gram, K=4``, ``speculative,
        draft model PATH, K=4 adaptive 1-16`` (``draft_path=False`` leaves the path out)."""
        if self.mode == "ar":
            return "AR"
        if self.backend.name == "server":  # K and the drafter are the server's own settings
            return "speculative (drafting configured on the server)"
        if self.backend.is_runtime:
            rt = self.draft.drafter
            model = f", draft model {rt.draft_model}" if isinstance(rt, Runtime) and rt.draft_model and draft_path else ""
            return f"speculative, {self.backend.name} {self.draft.runtime_method}{model}, {self.draft.k_label()}"
        d = self.draft
        drafter = d.drafter_label + (" " + d.flag if draft_path and d.has_model else "")
        p_min = d.drafter.p_min if isinstance(d.drafter, Model) else 0.0
        return f"speculative, {drafter}, {d.k_label()}" + (f", p-min {p_min:g}" if p_min else "")

    def validate(self) -> None:
        if self.mode not in ("ar", "spec"):
            raise SpectuiError(f"mode must be 'ar' or 'spec', got {self.mode!r}")
        if self.max_tokens < 1:
            raise SpectuiError(f"max-tokens must be >= 1, got {self.max_tokens}")
        if not self.prompt:
            raise SpectuiError("the prompt is empty")
        for i, m in enumerate(self.history):
            expected = "user" if i % 2 == 0 else "assistant"
            if m.role != expected:
                raise SpectuiError(
                    f"conversation message {i + 1} is from {m.role!r}; user and assistant messages must alternate, starting with the user"
                )
        if len(self.history) % 2:
            raise SpectuiError("the conversation so far ends with a user message: the prompt must follow an assistant reply")
        self.sampling.validate()
        self.draft.validate()
        if self.mode == "spec" and self.draft.is_runtime and not self.backend.is_runtime:
            raise SpectuiError(f"--draft {self.draft.flag} is a runtime's own method: add --runtime {' or --runtime '.join(RUNTIMES)}")
        if self.mode == "spec" and self.backend.is_runtime and not self.draft.is_runtime:
            example = (f"{RUNTIME_PREFIX}draft-model --draft-model DIR|FILE.gguf" if self.backend.name == "mlx-lm"
                       else f"{RUNTIME_PREFIX}ngram-mod (or another `spectui runtime info` lists)")
            raise SpectuiError(f"{self.backend.name} drafts with its own methods: --draft {example}, not --draft {self.draft.flag}")
        self.backend.validate()
        self.policy.validate()
        self.envelope.validate()
