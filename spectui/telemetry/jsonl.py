"""JSON-lines exporters: each span, and each metrics export, as one line of the SDK's own JSON.

The lines are what the SDK's ``to_json()`` gives (the shape its console exporters print), one
object a line: a span line has ``name``, ``context``, ``parent_id``, ``start_time``, ...; a
metrics line has ``resource_metrics``. Imported only once the ``otel`` extra is known present.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import IO, Any

from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


class JsonLines:
    """One text stream shared by the span and the metric exporter; remembers the first
    write error (the SDK drops exporter results, so the destination asks here)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()  # a batch processor may export from its own thread
        self.error = ""

    def write(self, lines: list[str]) -> bool:
        if not lines:
            return True
        try:
            with self._lock:
                self._stream.write("".join(line + "\n" for line in lines))
                self._stream.flush()
        except (OSError, ValueError) as exc:  # ValueError: the stream was closed
            self.error = self.error or str(getattr(exc, "strerror", None) or exc)
            return False
        return True


class JsonLinesSpanExporter(SpanExporter):
    def __init__(self, out: JsonLines) -> None:
        self._out = out

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        ok = self._out.write([span.to_json(indent=None) for span in spans])
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class JsonLinesMetricExporter(MetricExporter):
    def __init__(self, out: JsonLines) -> None:
        super().__init__()
        self._out = out

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **_: Any) -> MetricExportResult:
        ok = self._out.write([metrics_data.to_json(indent=None)])
        return MetricExportResult.SUCCESS if ok else MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **_: Any) -> None:
        pass
