"""Recordings: the event schema, the crash-safe writer and the streaming reader."""
