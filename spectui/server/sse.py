"""Server-sent events as the HTML standard reads them: the wire format every OpenAI-style
streaming endpoint answers in, parsed line by line apart from the HTTP client that reads the
lines (``spectui.server.client``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SSEEvent:
    """One server-sent event: ``kind`` is "data" (the OpenAI chunks) or "error" (llama-server
    streams errors under that field name); ``t_ns`` is when its last line arrived."""

    kind: str
    data: str
    t_ns: int


class SSEParser:
    """Server-sent events, line by line, as the HTML standard defines them ("Interpreting an
    event stream"): ``field: value`` lines accumulate, a blank line dispatches, lines starting
    with ``:`` are comments (mlx-lm's keepalives, sse-starlette's pings)."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._error: list[str] = []
        self._t_ns = 0

    def feed(self, line: str, t_ns: int) -> SSEEvent | None:
        line = line.rstrip("\r\n")
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
            self._t_ns = t_ns
        elif field == "error":
            self._error.append(value)
            self._t_ns = t_ns
        return None  # "event", "id", "retry" and unknown fields change nothing here

    def _dispatch(self) -> SSEEvent | None:
        if self._error:
            event = SSEEvent("error", "\n".join(self._error), self._t_ns)
        elif self._data:
            event = SSEEvent("data", "\n".join(self._data), self._t_ns)
        else:
            return None
        self._data, self._error = [], []
        return event

    def finish(self) -> SSEEvent | None:
        """An event left undispatched when the stream ended (no final blank line)."""
        return self._dispatch()
