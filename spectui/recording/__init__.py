"""Recordings: the one event schema (``schema``), the crash-safe writer and the streaming
reader, replay timing (``timeline``), what a session generated (``output``) and redacted copies
without it (``redact``).

The contract between every layer: the engine yields these events, the recorder writes them,
replay, diff, metrics and the UI read them. May import ``spectui.config``, ``spectui.quality``,
``spectui.prompts``, ``spectui.paths``, ``spectui.errors`` and ``spectui.format``; nothing above.
"""
