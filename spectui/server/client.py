"""HTTP to an OpenAI-compatible server, standard library only: GETs for what a server says
about itself, and a streaming POST whose server-sent events carry their arrival time.

Why by hand: the measurement is the arrival time of each chunk, so the reader must hand every
event over the moment its line arrives (no client library buffering in between), and the
failure modes (refused, timed out, HTTP error, connection lost mid-stream, malformed data) must
each become one clear line. Every failure raises ``ServerError``.

A server's bytes are bounded in size and in time. A socket timeout bounds one silence, not an
exchange: a server that sends a byte every few seconds never trips it. So every request also
has a deadline (``_Deadline``): a GET must be answered whole within its timeout, and each line
of a stream must arrive whole within the read timeout, the stream within ``STREAM_DEADLINE_S``.
A body larger than ``MAX_BODY_BYTES`` is refused in one line, never parsed in part.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from spectui.errors import SpectuiError
from spectui.server.chunked import ChunkingError, Dechunker
from spectui.server.sse import SSEEvent, SSEParser
from spectui.server.wire import error_message, parse_json

#: Seconds to wait for a TCP connection.
CONNECT_TIMEOUT_S = 10.0
#: Longest silence tolerated while a completion streams: a long prompt's prefill on a slow node
#: sends nothing until the first token, so this is generous; a stalled server still ends.
READ_TIMEOUT_S = 120.0
#: Probes (``/props``, ``/metrics`` ...) answer at once or not at all: the whole answer, headers
#: and body, within this.
PROBE_TIMEOUT_S = 10.0
#: A line longer than this is not a chunk any server sends: refused rather than buffered.
MAX_LINE_BYTES = 1 << 20
#: what one read of a stream takes at most (``read1``: whatever has arrived, up to this)
READ_BYTES = 64 << 10
#: A GET's body: the largest answer spectui reads (a busy vLLM's ``/metrics`` is some hundred
#: kilobytes, ``/props`` and ``/slots`` less); a larger one is refused, not cut and parsed.
MAX_BODY_BYTES = 1 << 20
#: A deadline falls this long after the socket timeout it goes with: a server that sends
#: nothing at all is the socket timeout's to report (it says what happened), the deadline is
#: for one that sends too slowly.
DEADLINE_GRACE_S = 0.5
#: The longest a completion may stream. Each line has the read timeout already; this ends a
#: server that keeps a stream open forever with keepalive comments. Generous: a run of many
#: thousand tokens on a slow CPU takes an hour or two.
STREAM_DEADLINE_S = 6 * 3600.0
#: An error body is read up to this size for its message.
MAX_ERROR_BYTES = 64 << 10


class ServerError(Exception):
    """A server or connection failure, as one line that says what happened."""


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``host`` as an IP address (an IPv4 one seen through an IPv6 socket, ``::ffff:127.0.0.1``,
    as the IPv4 address it is), or None for a name."""
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    mapped = getattr(addr, "ipv4_mapped", None)
    return mapped if mapped is not None else addr


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a URL's host name or address, or a socket's address) is this machine."""
    if host.lower() in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    addr = _address(host)  # a name such as "127.example.com" is somebody else's machine
    return addr is not None and addr.is_loopback


def is_wildcard(host: str) -> bool:
    """Whether a listening socket's address is every interface (``0.0.0.0``, ``::``, "")."""
    addr = _address(host) if host else None
    return not host or (addr is not None and addr.is_unspecified)


@dataclass(frozen=True)
class ServerURL:
    scheme: str
    host: str
    port: int
    prefix: str  # path before /v1/..., without a trailing slash ("" at the root)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.prefix}"

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)


def parse_server_url(url: str) -> ServerURL:
    """``http(s)://host[:port][/prefix][/v1]`` -> its parts; anything else is one line.

    A trailing ``/v1`` is dropped: the OpenAI paths are added per request, and the server's own
    endpoints (``/props``, ``/metrics``, ``/health``) live beside it.
    """
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise SpectuiError(f"bad server URL {url!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpectuiError(f"bad server URL {url!r}: expected http://HOST:PORT or https://HOST[:PORT]")
    if parts.username or parts.password:
        raise SpectuiError("put no credentials in the server URL; pass the API key with --api-key-env VAR")
    if parts.query or parts.fragment:
        raise SpectuiError(f"bad server URL {url!r}: no query or fragment expected")
    prefix = parts.path.rstrip("/")
    if prefix.endswith("/v1"):
        prefix = prefix[: -len("/v1")]
    return ServerURL(parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80), prefix)


@dataclass(frozen=True)
class Reply:
    status: int
    reason: str
    headers: dict[str, str]  # lower-case names
    text: str

    @property
    def ok(self) -> bool:
        return self.status == 200

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON (or nests past what spectui reads)."""
        try:
            return parse_json(self.text)
        except ValueError:
            return None


class _Deadline:
    """Shuts a request's socket down when its time is up, so a read blocked on a trickling
    server returns at once; ``expired`` then tells a deadline from the server hanging up.
    One waiting thread per request: ``extend`` moves the deadline without a new thread (a
    stream extends it at each line)."""

    def __init__(self, seconds: float, total_s: float | None = None) -> None:
        self.seconds = seconds
        self.total_s = total_s
        now = time.monotonic()
        self._end = now + total_s if total_s is not None else None
        self._at = self._bound(now + seconds)
        self._sock: socket.socket | None = None
        self._done = threading.Event()
        self.expired = False
        threading.Thread(target=self._wait, name="spectui-http-deadline", daemon=True).start()

    def _bound(self, at: float) -> float:
        return at if self._end is None else min(at, self._end)

    @property
    def total_passed(self) -> bool:
        """Whether the whole exchange's time (not only a line's) is what ran out."""
        return self._end is not None and time.monotonic() >= self._end

    def watch(self, sock: socket.socket) -> None:
        self._sock = sock
        if self.expired:
            self._shut()

    def extend(self) -> None:
        """Another ``seconds`` from now (never past the total)."""
        self._at = self._bound(time.monotonic() + self.seconds)

    def cancel(self) -> None:
        self._done.set()

    def _wait(self) -> None:
        while not self._done.wait(max(0.0, self._at - time.monotonic())):
            if time.monotonic() >= self._at:
                self.expired = True
                self._shut()
                return

    def _shut(self) -> None:
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):  # closed meanwhile: nothing is waiting on it
                # the plain socket's shutdown, under TLS too: the TLS layer's own would change
                # its state under the reading thread's feet
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


class ServerClient:
    """Requests to one server. The API key goes in an ``Authorization: Bearer`` header and
    nowhere else (not in errors, not in the recording)."""

    def __init__(
        self,
        url: ServerURL,
        api_key: str = "",
        *,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        read_timeout_s: float = READ_TIMEOUT_S,
        probe_timeout_s: float = PROBE_TIMEOUT_S,
    ) -> None:
        self.url = url
        self._api_key = api_key
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.probe_timeout_s = probe_timeout_s

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream", "User-Agent": "spectui"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        headers.update(extra or {})
        return headers

    def _connect(self, read_timeout_s: float, deadline: _Deadline) -> http.client.HTTPConnection:
        u = self.url
        if u.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                u.host, u.port, timeout=self.connect_timeout_s, context=ssl.create_default_context()
            )
        else:
            conn = http.client.HTTPConnection(u.host, u.port, timeout=self.connect_timeout_s)
        try:
            conn.connect()
        except TimeoutError:
            conn.close()
            raise ServerError(f"cannot connect to {u}: no answer within {self.connect_timeout_s:g} s") from None
        except OSError as exc:
            conn.close()
            raise ServerError(f"cannot connect to {u}: {_os_error(exc)}") from None
        conn.sock.settimeout(read_timeout_s)  # from here on: the longest silence allowed
        deadline.watch(conn.sock)  # and the deadline: the longest a whole answer (or line) may take
        return conn

    def _send(
        self,
        conn: http.client.HTTPConnection,
        method: str,
        path: str,
        body: bytes | None,
        headers: dict[str, str],
        deadline: _Deadline,
    ) -> http.client.HTTPResponse:
        timeout = conn.sock.gettimeout()
        try:
            conn.request(method, self.url.prefix + path, body=body, headers=headers)
            return conn.getresponse()
        except TimeoutError:
            raise ServerError(f"{method} {path}: no response from {self.url} within {timeout:g} s") from None
        except (http.client.HTTPException, OSError) as exc:
            if deadline.expired:
                raise ServerError(
                    f"{method} {path}: {self.url} did not send its answer's headers within {deadline.seconds:g} s"
                ) from None
            raise ServerError(f"{method} {path}: the connection to {self.url} failed: {_os_error(exc)}") from None

    def get(self, path: str, *, timeout_s: float | None = None) -> Reply:
        """``path``'s answer, whole within ``timeout_s`` (default ``probe_timeout_s``: headers and
        body, so a server that trickles bytes is cut off there) and at most ``MAX_BODY_BYTES``;
        ``ServerError`` otherwise."""
        return self._whole("GET", path, None, timeout_s)

    def post(self, path: str, body: dict[str, Any], *, timeout_s: float | None = None) -> Reply:
        """POST ``body`` as JSON and read the whole answer, as ``get`` reads one."""
        return self._whole("POST", path, json.dumps(body).encode(), timeout_s)

    def _whole(self, method: str, path: str, data: bytes | None, timeout_s: float | None) -> Reply:
        timeout_s = self.probe_timeout_s if timeout_s is None else timeout_s
        deadline = _Deadline(timeout_s + DEADLINE_GRACE_S)
        headers = self._headers({"Content-Type": "application/json"} if data is not None else None)
        try:
            conn = self._connect(timeout_s, deadline)
            try:
                resp = self._send(conn, method, path, data, headers, deadline)
                too_large = (f"{method} {path}: the answer is larger than the {MAX_BODY_BYTES >> 20} MiB spectui reads;"
                             " refused rather than read in part")
                if resp.length is not None and resp.length > MAX_BODY_BYTES:
                    raise ServerError(too_large)
                try:
                    raw = resp.read(MAX_BODY_BYTES + 1)
                except (TimeoutError, http.client.HTTPException, OSError) as exc:
                    why = f"not all of it came within {deadline.seconds:g} s" if deadline.expired else _os_error(exc)
                    raise ServerError(f"{method} {path}: reading the answer failed: {why}") from None
                if deadline.expired:  # cut short by the deadline: not an answer to parse
                    raise ServerError(f"{method} {path}: reading the answer failed: not all of it came within {deadline.seconds:g} s")
                if len(raw) > MAX_BODY_BYTES:
                    raise ServerError(too_large)
                headers = {k.lower(): v for k, v in resp.getheaders()}
                return Reply(resp.status, resp.reason, headers, raw.decode("utf-8", "replace"))
            finally:
                conn.close()
        finally:
            deadline.cancel()

    def get_json(self, path: str) -> Any:
        """The JSON a GET answers with; None for a non-200 answer or a body that is not JSON."""
        reply = self.get(path)
        return reply.json() if reply.ok else None

    def stream(self, path: str, body: dict[str, Any], *, total_s: float = STREAM_DEADLINE_S) -> Iterator[SSEEvent]:
        """POST ``body`` and yield the server-sent events of the answer as their lines arrive.

        Ends quietly at the end of the stream; the caller decides whether the stream was
        complete. Raises ``ServerError`` for an HTTP error (with the server's own message), a
        timeout (a silence, a line not whole within the read timeout, or a stream longer than
        ``total_s``), or a connection lost or broken mid-stream.
        """
        deadline = _Deadline(self.read_timeout_s + DEADLINE_GRACE_S, total_s)
        try:
            yield from self._stream(path, body, deadline)
        finally:
            deadline.cancel()

    def _stream(self, path: str, body: dict[str, Any], deadline: _Deadline) -> Iterator[SSEEvent]:
        conn = self._connect(self.read_timeout_s, deadline)
        try:
            data = json.dumps(body).encode()
            resp = self._send(conn, "POST", path, data, self._headers({"Content-Type": "application/json"}), deadline)
            if resp.status != 200:
                try:
                    text = resp.read(MAX_ERROR_BYTES).decode("utf-8", "replace")
                except (TimeoutError, http.client.HTTPException, OSError):
                    text = ""
                raise ServerError(f"HTTP {resp.status} {resp.reason}".rstrip() + f" from POST {path}: {error_message(text)}")
            parser = SSEParser()
            partial = b""  # a line not yet whole
            # what has arrived, in one read: chunked (every streaming server) decoded here,
            # else http.client's reader (a body with a length, or one the close ends)
            dechunk = Dechunker() if resp.chunked else None
            deadline.extend()
            while True:
                try:
                    block = _arrived(resp, dechunk)
                    if block is None:
                        continue  # a size line or a chunk's CRLF alone: nothing to read yet
                except TimeoutError:
                    raise ServerError(f"timed out: the server sent nothing for {self.read_timeout_s:g} s") from None
                except (http.client.HTTPException, OSError) as exc:
                    if deadline.expired:
                        raise self._late(deadline) from None
                    raise ServerError(f"the connection was lost mid-stream: {_os_error(exc)}") from None
                except ChunkingError as exc:
                    raise ServerError(f"malformed stream: {exc}") from None
                t_ns = time.perf_counter_ns()
                if deadline.expired:  # the line (or end) the deadline cut: not the server's
                    raise self._late(deadline)
                if not block:
                    event = parser.feed(partial.decode("utf-8", "replace"), t_ns) if partial else None
                    tail = event or parser.finish()
                    if tail is not None:
                        yield tail
                    return
                *lines, partial = (partial + block).split(b"\n")
                if len(partial) > MAX_LINE_BYTES or (lines and max(map(len, lines)) > MAX_LINE_BYTES):
                    raise ServerError(f"malformed stream: a line longer than {MAX_LINE_BYTES} bytes")
                if lines:
                    deadline.extend()  # each line has the read timeout to arrive whole
                for line in lines:
                    event = parser.feed(line.decode("utf-8", "replace"), t_ns)
                    if event is not None:
                        yield event
        finally:
            conn.close()  # also on an early stop: the server sees the client go away

    def _late(self, deadline: _Deadline) -> ServerError:
        if deadline.total_passed:
            return ServerError(f"timed out: the stream went on for more than {deadline.total_s:g} s; spectui stopped reading it")
        return ServerError(
            f"timed out: no whole line from the server within {deadline.seconds:g} s (it sends bytes too slowly to read)"
        )


def _arrived(resp: http.client.HTTPResponse, dechunk: Dechunker | None) -> bytes | None:
    """What has arrived of a streamed body, decoded: b"" at its end, None where what arrived
    held no body bytes (chunk framing alone)."""
    if dechunk is None:
        return resp.read1(READ_BYTES)
    if dechunk.done:
        return b""
    raw = resp.fp.read1(READ_BYTES)
    if not raw:
        raise http.client.IncompleteRead(b"")  # closed before the last chunk, as http.client says it
    return dechunk.feed(raw) or (b"" if dechunk.done else None)


def _os_error(exc: BaseException) -> str:
    """A socket error as words: ``ConnectionRefusedError`` -> "connection refused"."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is the server running, and on that port?)"
    if isinstance(exc, ConnectionResetError):
        return "connection reset by the server"
    if isinstance(exc, http.client.IncompleteRead):
        return f"the server closed the connection inside a chunk ({len(exc.partial)} bytes of it received)"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    if isinstance(exc, socket.gaierror):
        return f"unknown host ({exc.strerror or exc})"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed: {exc.reason or exc}"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return text.lower() if text[:1].isupper() and not text[1:2].isupper() else text
