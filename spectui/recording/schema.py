"""The one event schema shared by the engine, the recorder, replay, diff and the UI.

Every session is a stream of these msgspec Structs: one ``Header``, one ``Prefill``,
a ``Step`` per decode step (AR: one target forward; speculative: one draft+verify block),
``MemorySample`` records from the sampler thread, ``PolicyChange`` records, and one ``End``.

Encoding notes (why the structs look the way they do):

* Records are tagged (``tag=<int>``) so a single ``Union`` decodes any of them. Integer tags
  keep each record a few bytes shorter than names would; ``EVENT_NAMES`` gives the names.
* Hot records (``Step``, ``MemorySample``) are ``array_like``: msgpack arrays, no field
  names. ``array_like`` structs may only grow by appending fields *with defaults* at the
  end; the schema-evolution test pins that rule.
* Times are integer microseconds since the session's monotonic origin (``Header`` is t=0),
  taken in the engine thread with ``time.perf_counter_ns``.
* Tokens carry their text piece as raw bytes (a piece may be half of a UTF-8 character), so a
  recording replays and diffs on a machine that has never seen the model.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Literal, Union

import msgspec

from spectui.config import RunConfig

#: ``major.minor``. Readers refuse a newer *major*; minor bumps only add optional fields.
SCHEMA_VERSION = "1.2"


class TokenOrigin(IntEnum):
    """Who decided a token."""

    AR = 0  # the target alone, no draft in play (AR mode, the first token, empty drafts)
    DRAFT = 1  # a drafted token the target accepted
    CORRECTION = 2  # the target's token at the first rejected position
    BONUS = 3  # the target's extra token after a fully accepted block


class ModelArtifacts(msgspec.Struct, kw_only=True):
    """What identifies a model file: enough to explain 'fast last week, slow today'."""

    path: str = ""
    name: str = ""
    sha256: str = ""
    size_bytes: int = 0
    architecture: str = ""
    quant: str = ""
    n_params: int = 0
    n_ctx_train: int = 0
    vocab_size: int = 0
    vocab_sha256: str = ""
    chat_template_sha256: str = ""


class HostInfo(msgspec.Struct, kw_only=True):
    os: str = ""
    machine: str = ""
    cpu: str = ""
    cpu_count: int = 0
    gpu: str = ""
    total_memory_bytes: int = 0
    python: str = ""


class Artifacts(msgspec.Struct, kw_only=True):
    """The frozen facts of a run, besides its configuration."""

    target: ModelArtifacts = msgspec.field(default_factory=ModelArtifacts)
    draft: ModelArtifacts | None = None
    #: e.g. {"llama-cpp-python": "0.3.36", "llama.cpp": "b1234-abcdef", "mlx": "..."}
    runtime: dict[str, str] = msgspec.field(default_factory=dict)
    #: e.g. {"gpu_offload_supported": "false", "n_gpu_layers": "-1", "n_threads": "2"}
    offload: dict[str, str] = msgspec.field(default_factory=dict)
    host: HostInfo = msgspec.field(default_factory=HostInfo)


class Header(msgspec.Struct, tag=1, kw_only=True):
    schema_version: str = SCHEMA_VERSION
    spectui_version: str = ""
    started_at: str = ""  # wall clock, ISO 8601 UTC
    config: RunConfig = msgspec.field(default_factory=RunConfig)
    artifacts: Artifacts = msgspec.field(default_factory=Artifacts)
    #: The prompt exactly as tokenized (after the chat template), and its tokens.
    prompt_text: str = ""
    prompt_tokens: list[int] = msgspec.field(default_factory=list)
    #: What the timestamps measure: "wall" (the session ran alone), or ``INTERLEAVED_CLOCK``
    #: (it alternated blocks with another session, whose time was taken out).
    clock: str = "wall"


INTERLEAVED_CLOCK = "own-steps (interleaved; the other session's time removed)"


class Prefill(msgspec.Struct, tag=2, kw_only=True):
    n_tokens: int = 0
    #: Start and end of the prompt evaluation; the end is also when the first token's
    #: logits exist, so TTFT = first ``Step`` token time (it follows at once).
    t_start_us: int = 0
    t_end_us: int = 0

    @property
    def us(self) -> int:
        return self.t_end_us - self.t_start_us


class Step(msgspec.Struct, tag=3, array_like=True, gc=False):
    """One decode step: the tokens it emitted and what it cost.

    ``drafted`` tokens were proposed, ``accepted`` of them kept (a prefix); the step
    then emits ``accepted`` DRAFT tokens plus one CORRECTION (a rejection), one BONUS
    (all accepted) or one AR token (nothing drafted). Fewer may be emitted when the run
    stops inside the block (max tokens, end of generation).
    """

    tokens: list[int]
    origins: list[int]
    pieces: list[bytes]
    t_us: list[int]  # emission time of each token
    k: int = 0  # draft length asked for in this step
    drafted: int = 0
    accepted: int = 0
    draft_us: int = 0
    verify_us: int = 0
    draft_forwards: int = 0  # forward passes of a draft model (0 for n-gram)


class MemorySample(msgspec.Struct, tag=4, array_like=True, gc=False):
    """A reading of the memory sampler; sizes in bytes, rates in bytes per second."""

    t_us: int
    rss: int
    available: int
    headroom: int
    swap_used: int = 0
    # integers, not floats: msgpack spends 9 bytes on any float and 1 on a small int, and
    # memory samples must not push a recording past ~40 bytes per token
    swap_in_rate: int = 0
    swap_out_rate: int = 0
    #: macOS kern.memorystatus_vm_pressure_level (1 normal, 2 warn, 4 critical), or Linux
    #: PSI "some avg10" percent; -1 where neither exists.
    pressure: float = -1.0
    mlx_active: int = -1
    mlx_cache: int = -1
    mlx_peak: int = -1


class PolicyChange(msgspec.Struct, tag=5, kw_only=True):
    t_us: int = 0
    before: str = ""
    after: str = ""
    reason: str = ""


FinishReason = Literal["length", "stop", "context", "interrupted", "error"]


class End(msgspec.Struct, tag=6, kw_only=True):
    t_us: int = 0
    reason: FinishReason = "length"
    n_tokens: int = 0
    error: str = ""


Event = Union[Header, Prefill, Step, MemorySample, PolicyChange, End]

EVENT_NAMES = {Header: "header", Prefill: "prefill", Step: "step", MemorySample: "memory", PolicyChange: "policy", End: "end"}
