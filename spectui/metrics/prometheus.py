"""A server's Prometheus ``/metrics`` text, read into the numbers a watch needs, per server.

Parsing is ``prometheus_client``'s own (``text_string_to_metric_families``: the maintained
reader of the text exposition format, the library vLLM and SGLang write theirs with). On top of
it, ``MetricFamilies`` names, for each server, which series mean generated tokens, requests
running and waiting, and the speculative counters, and what that server does not report at all;
``read_counters`` turns one exposition into a ``CounterReading`` of plain numbers (``None`` =
this server does not say). Rates over time are ``spectui.metrics.watch_rates``'s.

The names come from the servers' sources (each family below cites its file). Pure functions,
no I/O: ``spectui.watch`` fetches the text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from spectui.format import terminal_safe

#: prometheus_client's default process collector (vLLM, SGLang): the server process's start,
#: in Unix seconds. A change between two readings is a restart even if no counter went down.
PROCESS_START = "process_start_time_seconds"


class MalformedMetrics(ValueError):
    """``/metrics`` answered with text that is not the Prometheus exposition format."""


@dataclass(frozen=True)
class Exposition:
    """One parsed ``/metrics`` answer: every sample's value by sample name and label set."""

    samples: dict[str, list[tuple[dict[str, str], float]]]

    def has(self, name: str) -> bool:
        return name in self.samples

    def total(self, name: str) -> float | None:
        """The sum over every label set of ``name`` (a vLLM server with several engines, SGLang's
        ranks): ``None`` when the series is absent. NaN values (an unset gauge) are skipped."""
        series = self.samples.get(name)
        if series is None:
            return None
        values = [v for _, v in series if not math.isnan(v)]
        return sum(values) if values else None

    def mean(self, name: str) -> float | None:
        """The mean over label sets: for a ratio gauge that each rank reports for itself."""
        series = self.samples.get(name)
        values = [v for _, v in series or [] if not math.isnan(v)]
        return sum(values) / len(values) if values else None

    def by_label(self, name: str, label: str) -> dict[str, float]:
        """``name``'s values summed per value of ``label`` (other labels added together)."""
        out: dict[str, float] = {}
        for labels, value in self.samples.get(name, []):
            if label in labels and not math.isnan(value):
                out[labels[label]] = out.get(labels[label], 0.0) + value
        return out

    def with_prefix(self, prefix: str) -> bool:
        return any(name.startswith(prefix) for name in self.samples)


def parse_exposition(text: str) -> Exposition:
    """Prometheus text -> ``Exposition``; raises ``MalformedMetrics`` (one line) on text the
    format does not allow. prometheus_client names a counter's samples as written, except that
    a counter declared without ``_total`` gets it appended (its OpenMetrics convention)."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        first = text.strip().splitlines()[0][:80] if text.strip() else "(empty)"
        # the server's bytes, quoted by the parser's message too: escaped before any terminal sees them
        raise MalformedMetrics(terminal_safe(f"/metrics is not Prometheus text ({exc or type(exc).__name__}); it starts: {first}")) from None
    return Exposition(samples)


@dataclass(frozen=True)
class MetricFamilies:
    """Which series of one server mean what. ``None``: the server exports no such series."""

    server: str
    prefix: str
    source: str  # where the names come from, for a reader who wants to check
    generated_tokens: str | None = None  # counter
    prompt_tokens: str | None = None  # counter
    requests_running: str | None = None  # gauge
    requests_waiting: str | None = None  # gauge
    requests_finished: str | None = None  # counter
    drafts: str | None = None  # counter: verification steps that checked a draft
    draft_tokens: str | None = None  # counter
    accepted_tokens: str | None = None  # counter
    accepted_per_position: str | None = None  # counter, label "position" (zero-based)
    accept_rate_gauge: str | None = None  # the server's own ratio over its last logging interval
    accept_length_gauge: str | None = None
    verify_calls: str | None = None  # counter
    decode_calls: str | None = None  # counter that moves while a request runs
    #: the counters move only when a request finishes (llama-server): figures come in steps
    counts_at_request_end: bool = False
    enable_metrics: str = ""  # how to turn /metrics on
    enable_speculation: str = ""  # how to turn drafting on, so the speculative series appear
    #: figure -> why this server cannot give it: said, never drawn as zero
    not_reported: dict[str, str] = field(default_factory=dict)


#: llama.cpp ``tools/server/server-task.cpp``, ``server_task_result_metrics::to_metrics``: a
#: ``counters`` list (prompt_tokens_total, tokens_predicted_total, n_decode_total,
#: spec_decode_num_draft_tokens_total, spec_decode_num_accepted_tokens_total,
#: spec_decode_num_drafts_total), a ``gauges`` list (requests_processing, requests_deferred,
#: ...) and the labelled spec_decode_num_accepted_tokens_per_pos_total{position="i"}, all under
#: ``llamacpp:``. ``tools/server/server-context.cpp``: ``metrics_on_prediction`` adds a slot's
#: tokens and draft counts when the slot is released (its request finished); only
#: ``n_decode_total`` moves while a request runs. ``/metrics`` answers 501 ("Start it with
#: `--metrics`") when off, and sends the process start in a ``Process-Start-Time-Unix`` header.
#: Values go through a C++ stream as doubles with 6 significant digits: past 999999 a counter
#: prints as ``1.23457e+06``, so on a long-lived server an interval's increase is rounded to the
#: counter's last printed digit (10 tokens at a million, 100 at ten million).
LLAMA_SERVER = MetricFamilies(
    server="llama-server",
    prefix="llamacpp:",
    source="llama.cpp tools/server/server-task.cpp (server_task_result_metrics::to_metrics)",
    generated_tokens="llamacpp:tokens_predicted_total",
    prompt_tokens="llamacpp:prompt_tokens_total",
    requests_running="llamacpp:requests_processing",
    requests_waiting="llamacpp:requests_deferred",
    drafts="llamacpp:spec_decode_num_drafts_total",
    draft_tokens="llamacpp:spec_decode_num_draft_tokens_total",
    accepted_tokens="llamacpp:spec_decode_num_accepted_tokens_total",
    accepted_per_position="llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
    decode_calls="llamacpp:n_decode_total",
    counts_at_request_end=True,
    enable_metrics="start llama-server with --metrics",
    enable_speculation="start llama-server with a draft method (--spec-type ngram-mod, or -md DRAFT.gguf)",
    not_reported={"requests finished": "llama-server's /metrics counts no requests"},
)

#: vLLM ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``: vllm:num_requests_running,
#: vllm:num_requests_waiting, vllm:prompt_tokens, vllm:generation_tokens,
#: vllm:request_success{finished_reason}) and ``vllm/v1/spec_decode/metrics.py``
#: (``SpecDecodingProm``: vllm:spec_decode_num_drafts, ..._num_draft_tokens,
#: ..._num_accepted_tokens, ..._num_accepted_tokens_per_pos{position}, created only when a
#: speculative config is set). They are prometheus_client Counters: the exposition adds
#: ``_total``. Labels ``model_name`` and ``engine``; several engines are added together.
VLLM = MetricFamilies(
    server="vLLM",
    prefix="vllm:",
    source="vllm/v1/metrics/loggers.py (PrometheusStatLogger), vllm/v1/spec_decode/metrics.py (SpecDecodingProm)",
    generated_tokens="vllm:generation_tokens_total",
    prompt_tokens="vllm:prompt_tokens_total",
    requests_running="vllm:num_requests_running",
    requests_waiting="vllm:num_requests_waiting",
    requests_finished="vllm:request_success_total",
    drafts="vllm:spec_decode_num_drafts_total",
    draft_tokens="vllm:spec_decode_num_draft_tokens_total",
    accepted_tokens="vllm:spec_decode_num_accepted_tokens_total",
    accepted_per_position="vllm:spec_decode_num_accepted_tokens_per_pos_total",
    enable_metrics="vLLM's API server serves /metrics by default: is this its port?",
    enable_speculation="start vLLM with --speculative-config (the vllm:spec_decode_* counters exist only then)",
)

#: SGLang ``python/sglang/srt/observability/metrics_collector.py`` (earlier
#: ``python/sglang/srt/metrics/collector.py``): ``SchedulerMetricsCollector`` gauges
#: sglang:num_running_reqs, sglang:num_queue_reqs, sglang:spec_accept_length and
#: sglang:spec_accept_rate (the scheduler's figures for its last logging interval);
#: ``TokenizerMetricsCollector`` counters sglang:prompt_tokens_total,
#: sglang:generation_tokens_total, sglang:num_requests_total and (recent versions)
#: sglang:spec_verify_calls_total, each added when a request finishes. No drafted or accepted
#: token counters, no per-position series. ``/metrics`` only with ``--enable-metrics``.
SGLANG = MetricFamilies(
    server="SGLang",
    prefix="sglang:",
    source="sglang python/sglang/srt/observability/metrics_collector.py (SchedulerMetricsCollector, TokenizerMetricsCollector)",
    generated_tokens="sglang:generation_tokens_total",
    prompt_tokens="sglang:prompt_tokens_total",
    requests_running="sglang:num_running_reqs",
    requests_waiting="sglang:num_queue_reqs",
    requests_finished="sglang:num_requests_total",
    accept_rate_gauge="sglang:spec_accept_rate",
    accept_length_gauge="sglang:spec_accept_length",
    verify_calls="sglang:spec_verify_calls_total",
    counts_at_request_end=True,
    enable_metrics="start SGLang with --enable-metrics",
    enable_speculation="start SGLang with --speculative-algorithm (EAGLE, NGRAM, ...)",
    not_reported={
        "drafted and accepted tokens": (
            "SGLang exports no such counters, only its interval gauges sglang:spec_accept_rate / sglang:spec_accept_length"
        ),
        "acceptance per draft position": "SGLang exports no per-position series",
    },
)

FAMILIES = (LLAMA_SERVER, VLLM, SGLANG)


def detect_families(exposition: Exposition) -> MetricFamilies | None:
    """The server whose prefix the exposition uses; ``None`` for a server spectui does not know."""
    for families in FAMILIES:
        if exposition.with_prefix(families.prefix):
            return families
    return None


@dataclass(frozen=True)
class CounterReading:
    """One ``/metrics`` reading as plain numbers (counters cumulative since the server started);
    ``None`` = not reported by this server (or not yet: vLLM's spec series before any draft)."""

    server: str
    t_s: float  # when it was read (a monotonic clock; only differences matter)
    generated_tokens: float | None = None
    prompt_tokens: float | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    requests_finished: float | None = None
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    accepted_per_position: tuple[float, ...] = ()  # index = draft position
    accept_rate_gauge: float | None = None
    accept_length_gauge: float | None = None
    verify_calls: float | None = None
    decode_calls: float | None = None
    #: the server process's start (Unix seconds) where it says: its change marks a restart
    started_at: float | None = None
    #: what this reading left out of the server's answer, in words ("" = nothing)
    note: str = ""

    @property
    def speculative_series(self) -> bool:
        """Whether the server exports any speculative series at all. SGLang sets its acceptance
        gauges (to 0) whether or not it drafts, and creates its verify counter's series at the
        first verification; ``read_counters`` already reads a 0 mean length as no gauge."""
        values = (self.drafts, self.draft_tokens, self.accepted_tokens, self.verify_calls, self.accept_rate_gauge)
        return any(v is not None for v in values) or bool(self.accepted_per_position)


#: The most draft positions a reading keeps. The tuple is as long as the highest position a
#: server names, and the label is the server's to write: one ``position="1000000000"`` would
#: otherwise cost gigabytes per reading, every reading recorded. Drafters draft a few to a few
#: dozen tokens a step (llama.cpp's --draft-max defaults to 16, vLLM's
#: num_speculative_tokens is single digits, tree drafters stay under 64), so 256 leaves room
#: for any of them while a reading stays a few kilobytes.
MAX_DRAFT_POSITIONS = 256


def per_position(exposition: Exposition, name: str | None) -> tuple[tuple[float, ...], str]:
    """A ``position``-labelled counter as a tuple indexed by position, and a note ("" when
    none) on what was left out; positions the server did not list read 0 (llama.cpp and vLLM
    list every position from 0 to the longest draft). Positions from ``MAX_DRAFT_POSITIONS``
    on are left out, never allocated."""
    if name is None:
        return (), ""
    values: dict[int, float] = {}
    beyond = 0
    for key, value in exposition.by_label(name, "position").items():
        try:
            position = int(key)
        except ValueError:
            continue  # not a position number: not something these servers write
        if position >= MAX_DRAFT_POSITIONS:
            beyond += 1
            continue
        values[position] = value
    note = (
        f"{beyond} series of {name} name a draft position of {MAX_DRAFT_POSITIONS} or more; left out" if beyond else ""
    )
    if not values or min(values) < 0:
        return (), note
    return tuple(values.get(i, 0.0) for i in range(max(values) + 1)), note


def read_counters(
    exposition: Exposition, families: MetricFamilies, t_s: float, started_at: float | None = None
) -> CounterReading:
    """The numbers of one exposition under ``families``. ``started_at``: the process start a
    header gave (llama-server's ``Process-Start-Time-Unix``), else the exposition's own."""

    def total(name: str | None) -> float | None:
        return exposition.total(name) if name is not None else None

    def mean(name: str | None) -> float | None:
        return exposition.mean(name) if name is not None else None

    if started_at is None:
        started_at = exposition.total(PROCESS_START)
    rate_gauge, length_gauge = mean(families.accept_rate_gauge), mean(families.accept_length_gauge)
    positions, note = per_position(exposition, families.accepted_per_position)
    if length_gauge is not None and length_gauge < 1:
        # a mean accepted length counts the bonus token, so it is at least 1 wherever something
        # was verified: SGLang's 0 means no speculative batch in its last logging interval
        rate_gauge = length_gauge = None
    return CounterReading(
        server=families.server,
        t_s=t_s,
        generated_tokens=total(families.generated_tokens),
        prompt_tokens=total(families.prompt_tokens),
        requests_running=total(families.requests_running),
        requests_waiting=total(families.requests_waiting),
        requests_finished=total(families.requests_finished),
        drafts=total(families.drafts),
        draft_tokens=total(families.draft_tokens),
        accepted_tokens=total(families.accepted_tokens),
        accepted_per_position=positions,
        accept_rate_gauge=rate_gauge,
        accept_length_gauge=length_gauge,
        verify_calls=total(families.verify_calls),
        decode_calls=total(families.decode_calls),
        started_at=started_at,
        note=note,
    )
