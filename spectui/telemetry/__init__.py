"""Telemetry export of sessions (the ``otel`` extra): see ``spectui.telemetry.otel``.

Importing this package does not import OpenTelemetry; the functions do, when called.
"""

from spectui.telemetry.otel import MISSING_EXTRA, OtelDestination, emit_session, export_events, span_name

__all__ = ["MISSING_EXTRA", "OtelDestination", "emit_session", "export_events", "span_name"]
