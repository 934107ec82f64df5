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
from typing import Literal

import msgspec

from spectui.config import RunConfig
from spectui.drafting import Pricing
from spectui.recording.load_tag import LoadTag
from spectui.recording.watch_records import WatchInfo, WatchReading

#: ``major.minor``. Readers refuse a newer *major*; minor bumps only add optional fields.
SCHEMA_VERSION = "2.1"  # 1.8: Header.load; 2.0: the typed DraftConfig, Header.pricing (1.x read by migration); 2.1: BatchNoise.beside_by_depth
MAJOR = int(SCHEMA_VERSION.partition(".")[0])


def older_major(version: str) -> bool:
    """Whether a header of ``version`` was written in an older major's shapes (a reader
    migrates it; ``spectui.recording.reader._migrated``)."""
    major = version.partition(".")[0]
    return major.isdigit() and int(major) < MAJOR


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
    #: how spectui made this file, when it did ("" = the file as given): the embedded default
    #: requantized to the weight type chosen for this machine (``engine.weights``), and why
    origin: str = ""


class HostInfo(msgspec.Struct, kw_only=True):
    os: str = ""
    machine: str = ""
    cpu: str = ""
    cpu_count: int = 0
    gpu: str = ""
    total_memory_bytes: int = 0
    python: str = ""


class ServerArtifacts(msgspec.Struct, kw_only=True):
    """The server a ``--server`` session measured, as it described itself before the request.

    The API key is never recorded (only the name of the variable that held it, in the config).
    """

    url: str = ""  # the base URL, as given
    #: "llama-server", "llama-cpp-python", "mlx-lm" or "openai-compatible" (unidentified)
    kind: str = ""
    version: str = ""  # llama-server build_info, llama-cpp-python's version; "" = not exposed
    endpoint: str = ""  # "/v1/chat/completions" (server-side chat template) or "/v1/completions"
    model_id: str = ""  # from /v1/models
    #: Scalar facts the server exposes (llama-server ``/props`` and ``/slots``, flattened to
    #: dotted keys; long texts such as the chat template as their sha256).
    props: dict[str, str] = msgspec.field(default_factory=dict)
    #: The local model file whose vocabulary turns streamed text back into token ids ("" = none)
    #: and why it is taken to be the server's model ("--target", or "the server's model id").
    vocabulary: str = ""
    vocabulary_source: str = ""


class ServerReport(msgspec.Struct, kw_only=True):
    """What a server said about one request, gathered by its end (``End.server``).

    -1 (or "") means the server did not report it; nothing here is estimated by spectui.
    """

    finish_reason: str = ""  # the server's own word ("stop", "length", "tool_calls", ...)
    chunks: int = 0  # content chunks received
    #: How the ``Step`` token ids were obtained: "server" (sent by the server), "re-tokenized"
    #: (the streamed text tokenized with the local vocabulary) or "none" (-1 ids, one per chunk).
    token_ids: str = ""
    prompt_tokens: int = -1  # usage.prompt_tokens
    completion_tokens: int = -1  # usage.completion_tokens
    system_fingerprint: str = ""
    #: llama-server's per-request ``timings`` (prompt_n, prompt_ms, predicted_n, ...), as sent.
    timings: dict[str, float] = msgspec.field(default_factory=dict)
    #: Draft tokens proposed / accepted for this request; -1 = not reported.
    drafted: int = -1
    accepted: int = -1
    #: Where ``drafted``/``accepted`` come from, or why there are none ("not reported ...").
    acceptance_source: str = ""
    #: Change of llama-server's Prometheus counters (``/metrics``) across the request, by name;
    #: empty when the server exposes none. ``metrics_note`` says why, or what may blur them.
    metrics_delta: dict[str, float] = msgspec.field(default_factory=dict)
    metrics_note: str = ""
    #: 1.4, greedy sessions: where ``Step.margins_milli`` came from (the server's top-2
    #: log-probabilities, and for how many tokens), or why there are none (not asked, not sent,
    #: refused by the server).
    margins_source: str = ""


class HeadArtifacts(msgspec.Struct, kw_only=True):
    """The trained draft head a runtime ran (EAGLE-3, DFlash, DSpark), from its GGUF header
    (``spectui.models.heads``)."""

    path: str = ""
    architecture: str = ""  # the GGUF's: "eagle3" or "dflash"
    kind: str = ""  # "eagle3", "dflash" or "dspark" (a dflash file with DSpark's Markov head)
    extract_layers: list[int] = msgspec.field(default_factory=list)  # the target layers it reads
    block_size: int = 0  # DFlash/DSpark: the trained block; 0 for EAGLE-3
    target_hidden_size: int = 0
    draft_vocab: int = 0  # a d2t map's reduced vocabulary; 0 = the target's


class Artifacts(msgspec.Struct, kw_only=True):
    """The frozen facts of a run, besides its configuration."""

    target: ModelArtifacts = msgspec.field(default_factory=ModelArtifacts)
    draft: ModelArtifacts | None = None
    #: e.g. {"llama-cpp-python": "0.3.36", "llama.cpp": "b1234-abcdef", "mlx": "..."}
    runtime: dict[str, str] = msgspec.field(default_factory=dict)
    #: e.g. {"gpu_offload_supported": "false", "n_gpu_layers": "-1", "n_threads": "2"}
    offload: dict[str, str] = msgspec.field(default_factory=dict)
    host: HostInfo = msgspec.field(default_factory=HostInfo)
    #: Set when the session measured a running server (``--server``) instead of the embedded
    #: engine; ``None`` for embedded runs.
    server: ServerArtifacts | None = None
    #: Set when a runtime ran a trained draft head (``--draft-model`` of draft-eagle3, -dflash, -dspark).
    head: HeadArtifacts | None = None


class BatchNoise(msgspec.Struct, kw_only=True):
    """How far this backend's logits move with the shape of an evaluation, measured on the
    model and settings a run used (``spectui.engine.host.noise``).

    The same tokens were evaluated one at a time (as AR does) and in blocks (as verification
    does) from an empty cache to ``depth``; ``by_depth[i]`` is the largest absolute logit
    difference seen at any depth below ``(i + 1) * depth_step``, so it never decreases. 0
    everywhere means the settings are batch-invariant: block and single-token logits agree
    bit for bit.
    """

    depth_step: int = 32
    by_depth: list[float] = msgspec.field(default_factory=list)
    depth: int = 0  # the positions calibrated: 0 to depth - 1
    blocks: list[int] = msgspec.field(default_factory=list)  # the block sizes cycled through
    #: the settings it was measured under ("n_threads", "flash_attn", "backend", ...)
    settings: dict[str, str] = msgspec.field(default_factory=dict)
    #: why it is shallower than asked ("" = as deep as asked): a slow backend hit the time budget
    note: str = ""
    measured_at: str = ""  # wall clock, ISO 8601 UTC
    seconds: float = 0.0  # what the calibration took
    #: 2.1: how far a neighbouring request in the same batch moves the logits, as llama-server
    #: batches its slots (``engine.host.noise.measure_beside_noise``): per bucket as ``by_depth``,
    #: against the request evaluated alone; empty where it was not measured (a single-request run)
    beside_by_depth: list[float] = msgspec.field(default_factory=list)

    def at(self, depth: int) -> float | None:
        """The largest logit difference seen up to ``depth`` (a position in the sequence:
        prompt and output); None where the calibration did not measure it (noise grows with
        depth, so a shallower bucket's value is never read for a deeper position)."""
        return self._bucket(self.by_depth, depth)

    def beside_at(self, depth: int) -> float | None:
        """``at`` for a neighbour in the batch: None where that was not measured to ``depth``."""
        return self._bucket(self.beside_by_depth, depth)

    def _bucket(self, values: list[float], depth: int) -> float | None:
        bucket = depth // self.depth_step if self.depth_step > 0 else len(values)
        if depth < 0 or depth >= self.depth or bucket >= len(values):
            return None
        return values[bucket]

    @property
    def invariant(self) -> bool:
        """Block and single-token logits agreed bit for bit at every calibrated depth."""
        return max(self.by_depth, default=0.0) == 0.0

    def describe(self) -> str:
        if self.invariant:
            return f"block and one-token logits bit-identical to depth {self.depth}"
        onset = next(i for i, v in enumerate(self.by_depth) if v > 0) * self.depth_step
        worst = max(self.by_depth)
        return f"block and one-token logits differ by up to {worst:.3g} from depth {onset} (calibrated to {self.depth})"


class Redaction(msgspec.Struct, kw_only=True):
    """1.6: this recording is a redacted copy (``spectui export --redact``,
    ``spectui.recording.redact``): its texts are placeholders and its token ids stand-ins."""

    #: random, shared by the copies redacted together: only their token stand-ins compare
    batch: str = ""
    redacted_at: str = ""  # wall clock, ISO 8601 UTC
    #: the prompt's quality check on the original output, graded before the text went
    #: (None: the prompt carries no check)
    quality_passed: bool | None = None


class SettingOrigin(msgspec.Struct, kw_only=True):
    """One setting of the command that recorded a session, and where its value came from."""

    option: str = ""  # the long option's name, without the dashes ("target", "min-headroom-mb")
    value: str = ""  # as given: "8192", "true", "ngram"
    #: "PATH:LINE" of a config file (spectui/profiles.py), or "flag" (the command line)
    origin: str = ""


class Provenance(msgspec.Struct, kw_only=True):
    """1.6: why a session ran as it did: the config profile of the command that recorded it
    and every setting that command took from a config file or a flag (the rest were built-in)."""

    command: str = ""  # "run", "compare", ...
    profile: str = ""  # "" = no profile
    #: where the profile's name came from: "flag" (--profile) or "env SPECTUI_PROFILE"
    profile_origin: str = ""
    settings: list[SettingOrigin] = msgspec.field(default_factory=list)


class Header(msgspec.Struct, tag=1, kw_only=True):
    schema_version: str = SCHEMA_VERSION
    spectui_version: str = ""
    started_at: str = ""  # wall clock, ISO 8601 UTC
    config: RunConfig = msgspec.field(default_factory=RunConfig)
    #: 2.0: what the run's plan measured (or was handed) to price its blocks, beside what was
    #: asked: the verify-cost curve a cost-aware K started from, a draft model's price
    pricing: Pricing = Pricing()
    artifacts: Artifacts = msgspec.field(default_factory=Artifacts)
    #: The prompt exactly as tokenized (after the chat template), and its tokens.
    prompt_text: str = ""
    prompt_tokens: list[int] = msgspec.field(default_factory=list)
    #: What the timestamps measure: "wall" (the session ran alone), or ``INTERLEAVED_CLOCK``
    #: (it alternated blocks with another session, whose time was taken out).
    clock: str = "wall"
    #: 1.4: the backend's measured batch-shape noise for this model and these settings, for
    #: classifying a divergence from AR (greedy embedded runs; None: not calibrated).
    batch_noise: BatchNoise | None = None
    #: 1.6: set on a redacted copy (no prompt, output or token ids in it); None: the original
    redaction: Redaction | None = None
    #: 1.6: the node the session ran on, as ``--host`` named it (an ssh destination), the
    #: recording made here from its stream; "" = run on the machine that recorded it.
    #: ``artifacts.host`` and the memory samples are then the node's.
    node: str = ""
    #: 1.6: milliseconds spent before this run evaluating, once each, the block sizes it can
    #: use that the loaded engine had not run yet (so no measured step pays a kernel's first
    #: use), and those sizes; 0 and [] when the engine was warm already
    warmup_ms: float = 0.0
    warmup_sizes: list[int] = msgspec.field(default_factory=list)
    #: 1.6: the profile and the origin of each setting of the command that recorded it
    #: (``spectui.cli.profiles``); None: made by no command line (a test, an older spectui)
    provenance: Provenance | None = None
    #: a watch's recording (``spectui watch``): the server watched; None for a session
    watch: WatchInfo | None = None
    #: 1.8: a workload's request (``spectui workload``); None for a session run on its own
    load: LoadTag | None = None


INTERLEAVED_CLOCK = "own-steps (interleaved; the other session's time removed)"


class Prefill(msgspec.Struct, tag=2, kw_only=True):
    n_tokens: int = 0
    #: Start and end of the prompt evaluation; the end is also when the first token's
    #: logits exist, so TTFT = first ``Step`` token time (it follows at once).
    t_start_us: int = 0
    t_end_us: int = 0
    #: What the interval measures; "" = the engine's own prompt evaluation. A server session
    #: says whether it is the server's figure (llama-server's prompt_ms) or the client's wait.
    source: str = ""
    #: 1.5: prompt tokens already in the KV cache (a conversation's earlier turns), kept
    #: rather than evaluated: the interval covers ``n_tokens - n_cached`` tokens
    n_cached: int = 0

    @property
    def us(self) -> int:
        return self.t_end_us - self.t_start_us

    @property
    def n_evaluated(self) -> int:
        return self.n_tokens - self.n_cached


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
    # -- 1.4, greedy runs: how close each emitted token came to losing. Thousandths of a
    # logit, integers: msgpack spends 9 bytes on a float and 1-3 on these.
    #: the target's best logit minus its second best, at each emitted token's position
    margins_milli: list[int] | None = None
    #: the target's second-best token id there (what a near-tie would have emitted)
    runner_up: list[int] | None = None


class MemorySample(msgspec.Struct, tag=4, array_like=True, gc=False):
    """A reading of the memory sampler; sizes in bytes, rates in bytes per second."""

    t_us: int
    rss: int
    available: int
    headroom: int
    swap_used: int = 0
    # integers, not floats: msgpack spends 9 bytes on any float and 1 on a small int, and
    # memory samples must not push a recording past ~48 bytes per token (test_recording)
    swap_in_rate: int = 0
    swap_out_rate: int = 0
    #: macOS kern.memorystatus_vm_pressure_level (1 normal, 2 warn, 4 critical), or Linux
    #: PSI "some avg10" percent; -1 where neither exists.
    pressure: float = -1.0
    mlx_active: int = -1
    mlx_cache: int = -1
    mlx_peak: int = -1
    # -- 1.3: the machine around the run (``spectui.metrics.host``). ``None`` means not
    # available (the host does not expose it, or the recording predates 1.3), never zero.
    #: bytes paged in from swap since the session began
    swap_in_total: int | None = None
    #: milliseconds spent at red (critical) memory pressure since the session began
    red_pressure_ms: int | None = None
    #: CPU thermal throttle events the OS counted since the session began
    throttle_events: int | None = None
    #: current CPU clock as a percent of its maximum (mean over CPUs)
    cpu_freq_pct: int | None = None
    #: the hottest thermal sensor, milli-degrees Celsius
    temperature_mc: int | None = None
    #: the OS's thermal level, 0 nominal, higher is hotter: macOS ``NSProcessInfo.thermalState``
    #: (0 nominal, 1 fair, 2 serious, 3 critical), else pmset's thermal warning level
    thermal_level: int | None = None
    fan_rpm: int | None = None
    on_ac_power: bool | None = None
    low_power_mode: bool | None = None
    #: CPU busy outside this process since the previous sample, percent of all cores
    other_cpu_pct: int | None = None


class OtherProcess(msgspec.Struct, kw_only=True):
    """A process that shared the machine during a session (``End.other_processes``)."""

    name: str = ""
    pid: int = 0
    cpu_share: float = 0.0  # of all cores, over the session (0.5 = one core of two)


class PolicyChange(msgspec.Struct, tag=5, kw_only=True):
    t_us: int = 0
    before: str = ""
    after: str = ""
    reason: str = ""


class SessionEnergy(msgspec.Struct, kw_only=True):
    """1.6: the machine's energy over a session (``End.energy``), read off the decode thread by
    ``spectui.metrics.energy_session``. Where no counter exists, ``why_not`` says why and every
    figure stays None: a missing reading is never a zero.

    The session's figures run from the header to the end (prefill included); the per-token
    figure covers the same window and tokens as decode tok/s (first token to last, the tokens
    after the first), so ``j_per_token`` x decode tok/s = ``decode_watts``.
    """

    #: "not available here: ..." (no counter), or why this session's energy is not its own
    #: (interleaved with another, a server on another machine); "" = measured
    why_not: str = ""
    sources: str = ""  # the counters read: "RAPL", "NVML", "RAPL + NVML", "Apple IOReport"
    seconds: float | None = None
    joules: float | None = None
    watts: float | None = None
    decode_joules: float | None = None
    decode_watts: float | None = None
    j_per_token: float | None = None
    #: joules per domain over the session ("RAPL package-0", "NVML gpu0"), counted or not
    by_domain: dict[str, float] = msgspec.field(default_factory=dict)
    readings: int = 0  # sampler readings taken
    #: what qualifies the numbers (failed readings, too few tokens for a per-token figure)
    note: str = ""


FinishReason = Literal["length", "stop", "context", "interrupted", "error"]


class DraftDecisions(msgspec.Struct, kw_only=True):
    """1.7: what a cost-aware K did with a run's proposals (``End.decisions``): each step a free
    drafter proposed is priced (``engine/loop/pricing.py``), then verified whole, verified with
    its tail cut, or held back, and why."""

    proposals: int = 0  # a free drafter's proposals priced (one per step it had one)
    blocks: int = 0  # blocks verified (a draft model's too)
    low_confidence: int = 0  # held back: expected tokens per unit of verify cost did not beat AR
    backoff: int = 0  # held back: worth drafting, but a run of losing blocks switched to AR
    probes: int = 0  # short blocks drafted during that backoff, to see whether drafting pays again
    tail_cut: int = 0  # verified shorter than proposed: the tail did not pay for its verification
    tokens_cut: int = 0  # tokens those cuts left out
    #: tokens the verified blocks were priced to yield (accepted drafts plus the target's own
    #: token each): against what they did yield, how well the prices held
    expected_tokens: float = 0.0


class End(msgspec.Struct, tag=6, kw_only=True):
    t_us: int = 0
    reason: FinishReason = "length"
    n_tokens: int = 0
    error: str = ""
    #: A ``--server`` session's end: what the server reported (timings, acceptance, counters).
    server: ServerReport | None = None
    #: 1.3: the other processes that took the most CPU during the session, busiest first.
    other_processes: list[OtherProcess] = msgspec.field(default_factory=list)
    #: 1.6: the machine's energy over the session; None: recorded before spectui sampled energy
    energy: SessionEnergy | None = None
    #: 1.7: what the cost-aware K did with the run's proposals; None: no cost-aware K (or older)
    decisions: DraftDecisions | None = None


Event = Header | Prefill | Step | MemorySample | PolicyChange | End | WatchReading

EVENT_NAMES = {Header: "header", Prefill: "prefill", Step: "step", MemorySample: "memory", PolicyChange: "policy", End: "end",
               WatchReading: "watch-reading"}
