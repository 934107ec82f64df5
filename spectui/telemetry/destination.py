"""Where a session's telemetry goes: SDK providers wired to a JSON-lines file (written
through ``spectui.storage``: atomic, never over a file of another kind) and/or an OTLP/HTTP
collector, with export failures collected into one line (``OtelDestination``).

The mapping of events onto OpenTelemetry names is ``spectui.telemetry.otel``'s; this module
only delivers what it emits. opentelemetry is imported inside the functions, as there.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from spectui import __version__, file_kinds, storage
from spectui.errors import SpectuiError
from spectui.recording.schema import Event
from spectui.telemetry.otel import emit_session, require_otel


def otlp_urls(endpoint: str) -> tuple[str, str]:
    """A base URL (as in OTEL_EXPORTER_OTLP_ENDPOINT) -> the traces and metrics URLs."""
    base = endpoint.rstrip("/")
    return base + "/v1/traces", base + "/v1/metrics"


class _CapturedLogs(logging.Handler):
    """The SDK reports export failures only through logging (an exporter's result goes
    nowhere); collect them instead of letting several lines reach stderr."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.errors: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.errors.append(record.getMessage().splitlines()[0])


def _is_otel_line(doc: object) -> bool:
    """A line spectui's JSON-lines exporters write: a span (the SDK's ``to_json``) or a metrics export."""
    return isinstance(doc, dict) and (("context" in doc and "name" in doc) or "resource_metrics" in doc)


#: what ``--otel-json FILE`` / ``export -o FILE`` may replace: an earlier export of spectui's
OTEL_KIND = file_kinds.jsonl_kind("an OpenTelemetry JSON-lines export", _is_otel_line)


class OtelDestination:
    """SDK providers wired to where the telemetry goes; several sessions may share one.

    Give any of: ``span_exporter`` and/or ``metric_reader`` (yours, e.g. the SDK's in-memory
    ones: spans are exported as each ends, metrics when the reader collects), ``jsonl`` (a path
    or an open text stream: one JSON object per span and per metrics export), ``endpoint`` (an
    OTLP/HTTP base URL; ``timeout_s`` per signal, retries included: a dead collector costs
    twice that, not the SDK's 10 s each). ``close()`` flushes and shuts down; it raises
    ``SpectuiError`` if an export failed. Use it as a context manager.
    """

    def __init__(
        self,
        *,
        span_exporter: Any = None,
        metric_reader: Any = None,
        jsonl: str | os.PathLike[str] | IO[str] | None = None,
        endpoint: str | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        require_otel()
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        if span_exporter is None and metric_reader is None and jsonl is None and endpoint is None:
            raise SpectuiError("no OpenTelemetry destination given (a JSON-lines file, an endpoint or exporters)")
        self._logs = _CapturedLogs()
        self._file: IO[str] | None = None
        self._target: Path | None = None  # the JSON-lines file, written as a temporary one first
        self._tmp: Path | None = None
        self._jsonl = None
        self._closed = False
        self._endpoint = endpoint
        processors: list[SpanProcessor] = []
        readers: list[MetricReader] = []
        if span_exporter is not None:
            processors.append(SimpleSpanProcessor(span_exporter))
        if metric_reader is not None:
            readers.append(metric_reader)
        if jsonl is not None:
            from spectui.telemetry.jsonl import JsonLines, JsonLinesMetricExporter, JsonLinesSpanExporter

            if isinstance(jsonl, (str, os.PathLike)):
                self._file = stream = self._open_file(Path(jsonl))
            else:
                stream = jsonl
            self._jsonl = JsonLines(stream)
            processors.append(SimpleSpanProcessor(JsonLinesSpanExporter(self._jsonl)))
            # math.inf: no background thread; the one collection happens in close()
            readers.append(PeriodicExportingMetricReader(JsonLinesMetricExporter(self._jsonl), math.inf))
        if endpoint is not None:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            traces_url, metrics_url = otlp_urls(endpoint)
            # batched: one request for a session's spans rather than one per span
            processors.append(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_url, timeout=timeout_s)))
            metric_exporter = OTLPMetricExporter(endpoint=metrics_url, timeout=timeout_s)
            readers.append(PeriodicExportingMetricReader(metric_exporter, math.inf))
        resource = Resource.create({"service.name": "spectui", "service.version": __version__})
        self.tracer_provider = TracerProvider(resource=resource)
        for p in processors:
            self.tracer_provider.add_span_processor(p)
        self.meter_provider = MeterProvider(metric_readers=readers, resource=resource)

    def _open_file(self, path: Path) -> IO[str]:
        """A temporary file beside ``path`` that takes its name in ``close`` (``_publish``): a
        kill or a full disk leaves the earlier file whole. A file of another kind at ``path``
        is refused before anything is exported."""
        try:
            storage.claim(path, OTEL_KIND)
            storage.prepare_dir(path.parent)
            storage.remove_stale_temps(path)
            fd, tmp = storage.temp_file(path)
            os.fchmod(fd, 0o666 & ~storage.current_umask())  # no user text in it: the usual modes
        except OSError as exc:
            raise storage.disk_error(path, exc) from None
        self._target, self._tmp = path, Path(tmp)
        return os.fdopen(fd, "w", encoding="utf-8")

    def _publish(self) -> None:
        assert self._file is not None
        try:
            try:
                self._file.flush()
                os.fsync(self._file.fileno())
            finally:
                self._file.close()
            if self._tmp is None or self._target is None or (self._jsonl is not None and self._jsonl.error):
                return
            storage.fault_point(f"write:{self._target.name}")
            os.replace(self._tmp, self._target)
            self._tmp = None
        except OSError as exc:
            if self._jsonl is not None and not self._jsonl.error:
                self._jsonl.error = str(exc.strerror or exc)
        finally:
            if self._tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(self._tmp)

    @contextlib.contextmanager
    def _capturing(self) -> Iterator[None]:
        root = logging.getLogger("opentelemetry")
        propagate = root.propagate
        root.addHandler(self._logs)
        root.propagate = False
        try:
            yield
        finally:
            root.removeHandler(self._logs)
            root.propagate = propagate

    def emit(self, events: Sequence[Event]) -> int:
        """One session's spans and metric points; returns its trace id."""
        with self._capturing():
            return emit_session(events, tracer_provider=self.tracer_provider, meter_provider=self.meter_provider)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._capturing():
            try:
                self.tracer_provider.force_flush()
                self.meter_provider.force_flush()
                self.tracer_provider.shutdown()
                self.meter_provider.shutdown()
            finally:
                if self._file is not None:
                    self._publish()
        if self._jsonl is not None and self._jsonl.error:
            raise SpectuiError(f"writing the OpenTelemetry JSON lines failed: {self._jsonl.error}")
        if self._logs.errors:
            where = f" to {self._endpoint}" if self._endpoint else ""
            raise SpectuiError(f"OpenTelemetry export{where} failed: {self._logs.errors[0]}")

    def __enter__(self) -> OtelDestination:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None:
            self.close()
        else:  # an error is already on its way out: do not mask it with an export failure
            self._target = None  # nor replace an earlier file with half an export
            with contextlib.suppress(SpectuiError):
                self.close()


def export_events(
    events: Sequence[Event], *, jsonl: str | os.PathLike[str] | IO[str] | None = None, endpoint: str | None = None
) -> int:
    """One session to a JSON-lines file and/or an OTLP endpoint; returns its trace id."""
    with OtelDestination(jsonl=jsonl, endpoint=endpoint) as dest:
        return dest.emit(events)
