"""What a watched server is, and one reading of it: GETs only.

``open_watch`` asks ``/metrics`` first (the one thing a watch needs): a server that does not
serve it, or serves series spectui does not know, is refused with one line that says what is
missing and how to turn it on. On llama-server it also reads ``/props`` once (build, model,
slots) and, when ``/slots`` answers, each slot's state at every reading (llama-server's counters
only move when a request finishes; ``/slots`` shows the requests still running). Nothing here
sends a completion, and no prompt or generated text is kept (``/slots`` sends none by default).

One side effect a watch cannot avoid: llama-server averages its two throughput gauges
(``prompt_tokens_seconds``, ``predicted_tokens_seconds``) over the window between two ``/metrics``
reads by anyone, so a watch beside another scraper shortens that scraper's windows. The watch
itself reads counters only.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from spectui.metrics.prometheus import (
    FAMILIES,
    LLAMA_SERVER,
    CounterReading,
    Exposition,
    MalformedMetrics,
    MetricFamilies,
    detect_families,
    parse_exposition,
    read_counters,
)
from spectui.server.client import Reply, ServerClient, ServerError
from spectui.server.wire import error_message

#: the reads a watch makes, and nothing else (tests/watch assert the server saw only these)
WATCH_PATHS = ("/metrics", "/props", "/slots", "/v1/models")


class WatchUnavailable(Exception):
    """The server answers but cannot be watched: one line saying what is missing and how to fix it."""


@dataclass(frozen=True)
class LiveSlots:
    """llama-server's ``/slots`` at one reading: requests still running, which ``/metrics``
    does not count until they finish."""

    slots: int
    processing: int
    speculative: int  # slots that can draft (its "speculative" flag)
    decoded_in_flight: int  # tokens generated so far by the requests still running


@dataclass(frozen=True)
class Poll:
    """One reading: the counters (None when the read failed), the live slots where read, and
    the failure in words."""

    reading: CounterReading | None
    live: LiveSlots | None = None
    error: str = ""


@dataclass
class WatchTarget:
    """A server found watchable, what it said about itself, and the reading that found it (the
    watch's first sample: every ``/metrics`` read is a sample, none is spent on finding out)."""

    url: str
    families: MetricFamilies
    identity: dict[str, str] = field(default_factory=dict)
    has_slots: bool = False
    first: Poll | None = None


def _refusal(reply: Reply, url: str) -> str:
    """Why ``/metrics`` cannot be read, and how to turn it on, in one line."""
    if reply.status in (401, 403):
        return f"{url} refused /metrics (HTTP {reply.status}: {error_message(reply.text)}); pass its API key with --api-key-env VAR"
    if reply.status == 501:  # llama-server without --metrics (ERROR_TYPE_NOT_SUPPORTED)
        return f"{url} has /metrics turned off ({error_message(reply.text)}): {LLAMA_SERVER.enable_metrics}"
    hints = "; ".join(f"{f.server}: {f.enable_metrics}" for f in FAMILIES)
    return f"{url} serves no /metrics (HTTP {reply.status}), so there is nothing to watch ({hints})"


def open_watch(client: ServerClient, clock: Any = time.monotonic) -> WatchTarget:
    """Identify the server from its ``/metrics``. Raises ``ServerError`` when it cannot be
    reached, ``WatchUnavailable`` when it answers without metrics spectui can read."""
    url = str(client.url)
    reply = client.get("/metrics")
    t_s = clock()
    if not reply.ok:
        raise WatchUnavailable(_refusal(reply, url))
    try:
        exposition = parse_exposition(reply.text)
    except MalformedMetrics as exc:
        raise WatchUnavailable(f"{url}: {exc}") from None
    families = detect_families(exposition)
    if families is None:
        prefixes = ", ".join(f.prefix for f in FAMILIES)
        raise WatchUnavailable(
            f"{url}/metrics has none of the series spectui reads (names starting {prefixes}): "
            "it is not llama-server, vLLM or SGLang, so its counters cannot be read as tokens and drafts"
        )
    target = WatchTarget(url=url, families=families, identity={"server": families.server})
    if families is LLAMA_SERVER:
        _llama_identity(client, target)
    else:
        _model_identity(client, target)
    target.first = _reading(client, target, reply, exposition, t_s)
    return target


def _get_json(client: ServerClient, path: str) -> Any:
    try:
        reply = client.get(path)
    except ServerError:
        return None
    return reply.json() if reply.ok else None


def _llama_identity(client: ServerClient, target: WatchTarget) -> None:
    props = _get_json(client, "/props")
    if isinstance(props, dict):
        for key, name in (("build_info", "build"), ("total_slots", "slots")):
            if props.get(key) not in (None, ""):
                target.identity[name] = str(props[key])
        if props.get("model_path"):
            target.identity["model"] = os.path.basename(str(props["model_path"]))
    slots = _get_json(client, "/slots")
    target.has_slots = isinstance(slots, list)  # llama-server --no-slots answers 501


def _model_identity(client: ServerClient, target: WatchTarget) -> None:
    models = _get_json(client, "/v1/models")
    data = models.get("data") if isinstance(models, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict) and data[0].get("id"):
        target.identity["model"] = str(data[0]["id"])


def live_slots(body: Any) -> LiveSlots | None:
    """llama-server ``/slots`` (a list of slot objects: ``is_processing``, ``speculative``,
    ``next_token[0].n_decoded``; ``tools/server/server-context.cpp``, ``server_slot::to_json``)."""
    if not isinstance(body, list):
        return None
    slots = [s for s in body if isinstance(s, dict)]
    running = [s for s in slots if s.get("is_processing")]
    decoded = 0
    for s in running:
        nxt = s.get("next_token")
        first = nxt[0] if isinstance(nxt, list) and nxt and isinstance(nxt[0], dict) else {}
        n = first.get("n_decoded")
        decoded += n if isinstance(n, int) and not isinstance(n, bool) else 0
    return LiveSlots(
        slots=len(slots),
        processing=len(running),
        speculative=sum(1 for s in slots if s.get("speculative") is True),
        decoded_in_flight=decoded,
    )


def poll(client: ServerClient, target: WatchTarget, clock: Any = time.monotonic) -> Poll:
    """One reading of ``/metrics`` (and ``/slots`` where the server has it). Never raises for
    the server's sake: a failed read is a ``Poll`` with its error (the next one may succeed,
    a restarting server comes back)."""
    try:
        reply = client.get("/metrics")
    except ServerError as exc:
        return Poll(None, error=str(exc))
    t_s = clock()
    if not reply.ok:
        return Poll(None, error=f"/metrics answered HTTP {reply.status}: {error_message(reply.text)}")
    try:
        exposition = parse_exposition(reply.text)
    except MalformedMetrics as exc:
        return Poll(None, error=str(exc))
    return _reading(client, target, reply, exposition, t_s)


def _reading(client: ServerClient, target: WatchTarget, reply: Reply, exposition: Exposition, t_s: float) -> Poll:
    started = reply.headers.get("process-start-time-unix")  # llama-server's process start
    try:
        started_at = float(started) if started else None
    except ValueError:
        started_at = None
    reading = read_counters(exposition, target.families, t_s, started_at)
    live = live_slots(_get_json(client, "/slots")) if target.has_slots else None
    return Poll(reading, live)
