"""Recordings: the one event schema (``schema``), the crash-safe writer and the streaming
reader, replay timing (``timeline``) and what a session generated (``output``).

The contract between every layer: the engine yields these events, the recorder writes them,
replay, diff, metrics and the UI read them. May import ``spectui.config``, ``spectui.quality``,
``spectui.prompts``, ``spectui.errors`` and ``spectui.format``; nothing above.
"""
