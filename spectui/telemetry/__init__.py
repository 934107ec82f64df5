"""Telemetry export of sessions (the ``otel`` extra): see ``spectui.telemetry.otel``.

Importing this package does not import OpenTelemetry; the functions do, when called.

May import ``spectui.sessions``, ``spectui.engine``, ``spectui.server``, ``spectui.metrics``,
``spectui.models``, ``spectui.recording``, ``spectui.prompts``, ``spectui.config``,
``spectui.quality``, ``spectui.format`` and ``spectui.errors``. Only ``spectui.cli`` and
``spectui.ui`` sit above it; ``lab``, ``compare`` and ``report`` are its siblings.
"""

from spectui.telemetry.destination import OtelDestination, export_events
from spectui.telemetry.otel import MISSING_EXTRA, emit_session, span_name

__all__ = ["MISSING_EXTRA", "OtelDestination", "emit_session", "export_events", "span_name"]
