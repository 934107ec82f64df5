"""The records of a watch (``spectui watch``): what a server said of itself, and each reading
of its counters. They are events of the one schema (``recording.schema``: ``Header.watch``
and the ``Event`` union carry them), kept apart because nothing but the watch writes them.
Watch records are numbered from tag 20, apart from a session's."""

from __future__ import annotations

import msgspec


class WatchInfo(msgspec.Struct, kw_only=True):
    """A watch's recording (``spectui watch``, ``spectui.watch``): the server watched, as it
    described itself, and what its counters can and cannot say. Its ``Header`` carries no
    session: the records after it are ``WatchReading`` s, one per ``/metrics`` read."""

    url: str = ""  # the server's base URL, as given
    server: str = ""  # "llama-server", "vLLM" or "SGLang" (``spectui.metrics.prometheus``)
    #: what the server said about itself: "build", "model", "slots" (llama-server ``/props``),
    #: "model" (``/v1/models``); never its API key
    identity: dict[str, str] = msgspec.field(default_factory=dict)
    interval_s: float = 1.0  # the reading grid
    metric_source: str = ""  # where the metric names come from (a file of the server's source)
    #: llama-server and SGLang add a request to their counters when it finishes
    counts_at_request_end: bool = False
    #: figure -> why this server cannot give it
    not_reported: dict[str, str] = msgspec.field(default_factory=dict)
    #: the process behind a loopback URL, "NAME pid N" ("" = not looked for: not loopback)
    process: str = ""
    #: why no process stats were taken ("" = taken, or not looked for)
    process_note: str = ""
    #: 1.8: this machine's energy counters read at each reading ("RAPL package-0 + NVML gpu0"),
    #: or why none were ("not available here: ..."); "" = not looked for (not a loopback server)
    energy: str = ""


class WatchSlots(msgspec.Struct, kw_only=True):
    """llama-server's ``/slots`` at one reading: the requests still running."""

    slots: int = 0
    processing: int = 0
    speculative: int = 0  # slots that can draft
    decoded_in_flight: int = 0  # tokens the running requests generated so far


class ProcessSample(msgspec.Struct, kw_only=True):
    """The server's process at one reading (a loopback URL: the process listening on its port)."""

    rss_bytes: int = 0
    cpu_pct: float = 0.0  # since the previous reading, percent of one core (200 = two cores busy)
    threads: int = 0


class WatchReading(msgspec.Struct, tag=20, kw_only=True, omit_defaults=True):
    """One ``/metrics`` read of a watch (``WatchInfo``): the counters as the server printed them
    (cumulative since it started; None = not reported), read back through the same fold as a
    live watch (``spectui.metrics.watch_rates``). A failed read keeps its ``error`` and no
    counters. Watch records are numbered from tag 20, apart from a session's."""

    t_us: int = 0  # since the watch's first reading
    error: str = ""
    generated_tokens: float | None = None
    prompt_tokens: float | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    requests_finished: float | None = None
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    accepted_per_position: list[float] = msgspec.field(default_factory=list)
    accept_rate_gauge: float | None = None
    accept_length_gauge: float | None = None
    verify_calls: float | None = None
    decode_calls: float | None = None
    started_at: float | None = None  # the server process's start, Unix seconds
    slots: WatchSlots | None = None
    process: ProcessSample | None = None
    #: 1.8: this machine's energy counter, joules since the watch's first reading (a loopback
    #: server's host, where a counter exists: RAPL, NVML, Apple silicon; None: none read)
    joules: float | None = None
