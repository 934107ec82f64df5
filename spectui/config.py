"""Run configuration: msgspec Structs with defaults and validation.

The configuration is recorded verbatim in every recording header, so every field has a
default (old recordings keep loading when fields are added) and is plain data. The labels
every report and screen shows for a run (``label``, ``describe``) live here too.

Near the bottom of the layers: imports only ``spectui.errors``.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from spectui.errors import SpectuiError

#: A draft longer than this is refused: verification of K+1 positions grows with K, and a
#: block of 64 already costs ~30 single-token forwards on a CPU.
MAX_DRAFT_LENGTH = 64

Mode = Literal["ar", "spec"]
#: The drafters that need no model, by the name ``DraftConfig.source`` gives them, with the label
#: reports show. The engine's drafter registry (``spectui.engine.drafters.register``) fills it,
#: a plugin's drafter when it loads, so a registered drafter is a valid ``--draft`` everywhere;
#: any other source names a draft model. The registry is the one source: the two built-in ones
#: are written here too only so that recordings read without the engine loaded (the layers run
#: one way: config cannot import it), and tests/unit/test_drafter_plugins.py holds them equal.
MODEL_FREE: dict[str, str] = {"ngram": "n-gram", "suffix": "suffix"}
Role = Literal["user", "assistant"]
#: The ``--draft`` prefix that names a runtime's own method (``runtime:ngram-mod``): the
#: runtime spectui starts drafts (``spectui.runtime``), spectui's loop does not.
RUNTIME_PREFIX = "runtime:"
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


class DraftConfig(msgspec.Struct, frozen=True, kw_only=True):
    """How drafts are made. ``source`` is ``"ngram"`` (prompt lookup), ``"suffix"`` (suffix
    decoding over the request and earlier outputs) or a path to a draft GGUF."""

    source: str = "ngram"
    k: int = 4
    adaptive: bool = False
    k_min: int = 1
    k_max: int = 16
    ngram_min: int = 1
    ngram_max: int = 4
    #: Draft-model sampling temperature. ``None`` follows the target's sampling settings
    #: (the same warpers on both distributions); a value makes the draft sample on its own,
    #: which is still exact because verification uses the draft's real proposal probabilities.
    temperature: float | None = None
    #: Draft confidence (llama.cpp's draft p-min): a draft model stops drafting at the first
    #: position where its most likely token's probability is below this (greedy: the token it
    #: drafts). 0 = off. Decided before drawing, from the draft alone: greedy output and the
    #: sampled distribution are unchanged.
    p_min: float = 0.0
    #: The verify-cost curve the cost-aware K starts from: cost of evaluating n tokens at once,
    #: in one-token evaluations, for n = 1, 2, ... (``spectui tune`` measures it; a run seeds it
    #: from the cached curve of its target). Empty: the built-in cost model.
    cost_seed: tuple[float, ...] = ()
    #: The cost-aware K learns verify costs from the run's own timings. Off, it prices blocks
    #: by ``cost_seed`` alone, so the blocks it drafts (not only the output) repeat run to
    #: run: ``--deterministic`` turns it off.
    learn_cost: bool = True
    #: What one drafted token of a draft model costs, in one-token target evaluations: the
    #: price the cost-aware K puts on drafting until the run has timed its own draft forwards
    #: (with ``learn_cost`` off, for the whole run). 0: the engine measures it when the run
    #: starts (``Engine.draft_price``) and the header records what it measured.
    draft_cost: float = 0.0
    #: The suffix drafter remembers earlier outputs of the model across requests, in a file per
    #: vocabulary under the user cache dir (``--no-draft-memory``: this request's text only).
    memory: bool = True
    #: A drafter chain: ``"ngram"`` or ``"suffix"`` asked first, the draft model (``source``)
    #: only at steps where no lookup match pays and the model's own cost is repaid (the
    #: cost-aware K prices its tokens with what they cost to draft). ``""``: no chain.
    chain: str = ""
    #: A runtime method's draft GGUF (``--draft-model``: llama-server's ``-md``), for the model
    #: drafters a runtime runs itself (``runtime:draft-simple``, ``runtime:draft-eagle3``, ...).
    draft_model: str = ""
    #: A runtime's n-gram methods: the key length they match (``--lookup``: llama-server's
    #: ``--spec-ngram-*-size-n`` / ngram-mod's ``n-match``); 0 = the runtime's default.
    lookup: int = 0

    @property
    def is_ngram(self) -> bool:
        return self.source == "ngram"

    @property
    def is_suffix(self) -> bool:
        return self.source == "suffix"

    @property
    def is_runtime(self) -> bool:
        """A runtime's own method drafts (``runtime:ngram-mod``), not spectui's loop."""
        return self.source.startswith(RUNTIME_PREFIX)

    @property
    def runtime_method(self) -> str:
        """The runtime's method: ``ngram-mod`` for ``runtime:ngram-mod`` ("" for spectui's drafters)."""
        return self.source.removeprefix(RUNTIME_PREFIX) if self.is_runtime else ""

    @property
    def has_model(self) -> bool:
        """A draft model that spectui loads drafts (not a model-free drafter, not a runtime's method)."""
        return self.source not in MODEL_FREE and not self.is_runtime

    @property
    def kind(self) -> str:
        """``"ngram"``, ``"suffix"`` or ``"model"``: the drafter's kind, as recordings and telemetry name it."""
        return self.source if self.source in MODEL_FREE else "runtime" if self.is_runtime else "model"

    @property
    def drafter_label(self) -> str:
        """``n-gram``, ``suffix`` or ``draft model``."""
        if self.chain and self.has_model:
            return f"{MODEL_FREE.get(self.chain, self.chain)}, then draft model"
        if self.is_runtime:
            return self.runtime_method
        return MODEL_FREE.get(self.source, "draft model")

    def k_label(self) -> str:
        """``K=4``, or ``K=1..16 adaptive``; a runtime method with no K given: its own default."""
        if self.is_runtime and self.adaptive:
            return "K=runtime default"
        return f"K={self.k_min}..{self.k_max} adaptive" if self.adaptive else f"K={self.k}"

    def label(self, *, model: str = "draft model") -> str:
        """``n-gram K=4`` or ``draft model K=4``; ``model`` names a draft model (its file, say)."""
        if self.chain and self.has_model:
            model = f"{MODEL_FREE.get(self.chain, self.chain)}, then {model}"
        return f"{model if self.has_model else self.drafter_label} {self.k_label()}"

    def drafting_with(
        self, source: str, *, fixed_k: int | None = None, cost_aware: bool | None = None, p_min: float | None = None,
        chain: str | None = None,
    ) -> DraftConfig:
        """These settings with ``source`` drafting: the one rule for every caller (the flags,
        the dashboard's model picker). A model-free drafter costs nothing to ask, so unless a
        K is fixed its K is cost-aware (a fixed K=4 halves the speed of prose on a CPU); a
        draft model keeps a fixed K unless the cost-aware one is asked for. ``cost_aware``
        None keeps what these settings chose for a draft model; ``p_min`` None keeps theirs;
        ``chain`` None keeps theirs for a draft model and drops it for a model-free source (a
        chain puts a lookup in front of a model), while a chain given is taken as given (the
        flags: ``validate`` refuses one without a model). Everything else (a draft price,
        n-gram sizes, the temperature) is kept."""
        if cost_aware is None:
            cost_aware = self.adaptive and self.has_model
        if chain is None:
            chain = "" if source in MODEL_FREE else self.chain
        # a chain asks its free lookup first: cost-aware like one, unless a K is fixed; a runtime
        # method with no K keeps the runtime's own draft length (``adaptive`` says "not fixed")
        free = source in MODEL_FREE or source.startswith(RUNTIME_PREFIX)
        adaptive = cost_aware or (fixed_k is None and (free or bool(chain)))
        k = fixed_k if fixed_k is not None else min(max(DraftConfig().k, self.k_min), self.k_max)
        p_min = self.p_min if p_min is None else p_min
        return msgspec.structs.replace(self, source=source, k=k, adaptive=adaptive, chain=chain, p_min=p_min)

    def stepped(self, delta: int) -> DraftConfig:
        """K moved by ``delta`` (the dashboard's ``+``/``-``), as K means in this mode: a fixed K
        within 1..MAX_DRAFT_LENGTH; a cost-aware K's limit (``k_max``) within k-min..MAX_DRAFT_LENGTH
        (the run chooses every K itself, so the limit is the one setting of it a person moves)."""
        if self.adaptive:
            return msgspec.structs.replace(self, k_max=min(MAX_DRAFT_LENGTH, max(self.k_min, self.k_max + delta)))
        return msgspec.structs.replace(self, k=min(MAX_DRAFT_LENGTH, max(1, self.k + delta)))

    def seeded(self, curve: tuple[float, ...]) -> DraftConfig:
        """A cost-aware K's starting verify-cost curve, where none was given (a given seed wins)."""
        if not self.adaptive or self.cost_seed or not curve:
            return self
        return msgspec.structs.replace(self, cost_seed=tuple(curve))

    def priced(self, draft_cost: float) -> DraftConfig:
        """A draft model's measured cost per drafted token, where none was given."""
        if not self.adaptive or not self.has_model or self.draft_cost or not draft_cost:
            return self
        return msgspec.structs.replace(self, draft_cost=draft_cost)

    def replayable(self) -> DraftConfig:
        """These settings as ``spectui tune`` replays them: a suffix drafter without its memory
        of earlier outputs (a replay must see only the prompt and the output it replays)."""
        return msgspec.structs.replace(self, memory=False)

    def validate(self) -> None:
        for name, value in (("k", self.k), ("k-min", self.k_min), ("k-max", self.k_max)):
            if not 1 <= value <= MAX_DRAFT_LENGTH:
                raise SpectuiError(f"draft length {name} must be between 1 and {MAX_DRAFT_LENGTH}, got {value}")
        if self.adaptive and not self.k_min <= self.k <= self.k_max:
            raise SpectuiError(f"adaptive draft length needs k-min <= k <= k-max, got {self.k_min} <= {self.k} <= {self.k_max}")
        if not 1 <= self.ngram_min <= self.ngram_max <= 16:
            raise SpectuiError(f"n-gram sizes need 1 <= min <= max <= 16, got {self.ngram_min}..{self.ngram_max}")
        if self.temperature is not None and not self.temperature >= 0.0:
            raise SpectuiError(f"draft temperature must be >= 0, got {self.temperature}")
        if not 0.0 <= self.p_min < 1.0:
            raise SpectuiError(f"draft p-min must be in [0, 1), got {self.p_min}")
        if self.chain and (self.chain not in MODEL_FREE or not self.has_model):
            raise SpectuiError(
                f"a drafter chain is ngram or suffix in front of a draft model (--draft MODEL.gguf --chain ngram), "
                f"got --chain {self.chain} with --draft {self.source}"
            )
        if self.lookup and not self.is_runtime:
            raise SpectuiError("--lookup sets a runtime's n-gram key length; spectui's own n-gram drafter takes --ngram-min/--ngram-max")
        if self.lookup < 0:
            raise SpectuiError(f"--lookup must be >= 1 (0: the runtime's default), got {self.lookup}")
        if self.draft_model and not self.is_runtime:
            raise SpectuiError("--draft-model is a runtime method's draft (with --draft runtime:draft-simple); "
                               "spectui's own loop takes its draft model as --draft FILE.gguf")
        if not self.draft_cost >= 0.0:
            raise SpectuiError(f"a draft cost is >= 0 target tokens per drafted token, got {self.draft_cost}")
        if self.cost_seed and (self.cost_seed[0] != 1.0 or not all(c > 0 for c in self.cost_seed)):
            raise SpectuiError("a verify-cost seed starts at 1.0 (one token) and holds positive costs")


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
            model = f", draft model {self.draft.draft_model}" if self.draft.draft_model and draft_path else ""
            return f"speculative, {self.backend.name} {self.draft.runtime_method}{model}, {self.draft.k_label()}"
        d = self.draft
        drafter = d.drafter_label + (" " + d.source if draft_path and d.has_model else "")
        k = f"K={d.k}" + (f" adaptive {d.k_min}-{d.k_max}" if d.adaptive else "")
        p_min = f", p-min {d.p_min:g}" if d.p_min and d.has_model else ""
        return f"speculative, {drafter}, {k}{p_min}"

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
            raise SpectuiError(f"--draft {self.draft.source} is a runtime's own method: add --runtime {' or --runtime '.join(RUNTIMES)}")
        if self.mode == "spec" and self.backend.is_runtime and not self.draft.is_runtime:
            example = (f"{RUNTIME_PREFIX}draft-model --draft-model DIR|FILE.gguf" if self.backend.name == "mlx-lm"
                       else f"{RUNTIME_PREFIX}ngram-mod (or another `spectui runtime info` lists)")
            raise SpectuiError(f"{self.backend.name} drafts with its own methods: --draft {example}, not --draft {self.draft.source}")
        self.backend.validate()
        self.policy.validate()
        self.envelope.validate()
