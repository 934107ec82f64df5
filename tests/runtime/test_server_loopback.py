"""A server spectui starts never serves beyond this machine: whatever its flags say, ``start``
reads where the started process listens while it loads and once it is ready, and a server
listening on any address but loopback is stopped and refused in one line. Real servers (Python's own
``http.server``, so that no model is needed), real sockets."""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field

import psutil
import pytest

from spectui.errors import SpectuiError
from spectui.runtime.server import RuntimeServer, start
from spectui.watch import process
from spectui.watch.process import beyond_loopback, is_loopback


@dataclass(frozen=True)
class HttpServer:
    """``python -m http.server`` as a ``Runtime``, bound where ``bind`` says."""

    bind: str
    name: str = "http.server"
    log_folder: str = "test-logs"

    def argv(self, port: int) -> list[str]:
        return [sys.executable, "-u", "-m", "http.server", "--bind", self.bind, str(port)]

    def environment(self, api_key: str) -> dict[str, str]:
        return {}

    def takes_key(self) -> bool:
        return False

    def listening(self, port: int) -> re.Pattern[str]:
        return re.compile(rf"Serving HTTP on \S+ port {port}\b")

    def bind_failed(self, log_tail: str) -> bool:
        return "Address already in use" in log_tail

    def ready(self, server: RuntimeServer) -> bool:
        return True

    def props(self) -> dict[str, str]:
        return {}


@dataclass(frozen=True)
class LoadingServer(HttpServer):
    """An ``HttpServer`` whose log never says it is ready: a server still loading its model."""

    def listening(self, port: int) -> re.Pattern[str]:
        return re.compile(r"(?!)")  # matches nothing


def _children() -> set[int]:
    """This process's live children. Session fixtures elsewhere in the suite (a node's sshd, a
    served model) may already be running, so the tests compare before with after."""
    return {p.pid for p in psutil.Process().children(recursive=True) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE}


def test_a_started_server_listening_beyond_loopback_is_stopped_and_refused(tmp_path):
    before = _children()
    refused = r"http\.server listened on 0\.0\.0\.0 \(port \d+\), beyond this machine; .* 127\.0\.0\.1 only: stopped"
    with pytest.raises(SpectuiError, match=refused) as err:
        start(HttpServer("0.0.0.0"), log_path=tmp_path / "wide.log")
    assert "\n" not in str(err.value)
    assert not _children() - before  # stopped, not left listening


def test_a_server_listening_beyond_loopback_while_it_loads_is_stopped_at_once(tmp_path):
    # a model takes minutes to load, and llama-server listens (answering 503) all that time:
    # a wide listener is refused when seen, not when the model is ready
    before = _children()
    started = time.monotonic()
    with pytest.raises(SpectuiError, match=r"http\.server listened on 0\.0\.0\.0 \(port \d+\), beyond this machine") as err:
        start(LoadingServer("0.0.0.0"), log_path=tmp_path / "loading.log", ready_timeout_s=120)
    assert time.monotonic() - started < 60, "refused only once the wait for readiness ran out"
    assert "\n" not in str(err.value)
    assert not _children() - before


def test_a_started_server_on_loopback_is_kept(tmp_path):
    before = _children()
    with start(HttpServer("127.0.0.1"), log_path=tmp_path / "loopback.log") as server:
        listening = [c.laddr for c in psutil.Process(server.pid).net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN]
        assert [a.ip for a in listening] == ["127.0.0.1"] and listening[0].port == server.port
    assert not _children() - before


@dataclass(frozen=True)
class AnsweredServer(HttpServer):
    """An ``HttpServer`` that notes when it answered: its listeners turn unreadable from then on."""

    answered: list[bool] = field(default_factory=list)

    def ready(self, server: RuntimeServer) -> bool:
        self.answered.append(True)
        return True


def test_a_server_whose_listeners_cannot_be_read_is_stopped_not_trusted(tmp_path, monkeypatch):
    # where the OS refuses to say what a process listens on (a hardened /proc, another user's
    # child), not seeing a wide listener is no proof that there is none: here read while it
    # loads, refused once it answered
    answered: list[bool] = []
    readable = psutil.Process.net_connections

    def refused(self, kind="inet"):  # noqa: ANN001, ANN202 - psutil's signature
        if answered:
            raise psutil.AccessDenied(self.pid)
        return readable(self, kind)

    def unreadable_fds(pid: int) -> set[int]:  # the same refusal where /proc/PID/fd is read (Linux)
        if answered:
            raise PermissionError(13, "Permission denied", f"/proc/{pid}/fd")
        return readable_fds(pid)

    readable_fds = process.socket_inodes
    before = _children()
    monkeypatch.setattr(psutil.Process, "net_connections", refused)
    monkeypatch.setattr(process, "socket_inodes", unreadable_fds)
    with pytest.raises(SpectuiError, match=r"http\.server answered on port \d+, but where its processes listen could not be read") as err:
        start(AnsweredServer("127.0.0.1", answered=answered), log_path=tmp_path / "unread.log")
    assert "\n" not in str(err.value)
    assert not _children() - before


def test_a_loading_server_whose_listeners_cannot_be_read_is_stopped_at_once(tmp_path, monkeypatch):
    # unread while it loads, it could be listening wide for the minutes a model takes
    def refused(self, kind="inet"):  # noqa: ANN001, ANN202 - psutil's signature
        raise psutil.AccessDenied(self.pid)

    def unreadable_fds(pid: int) -> set[int]:  # the same refusal where /proc/PID/fd is read (Linux)
        raise PermissionError(13, "Permission denied", f"/proc/{pid}/fd")

    before = _children()
    monkeypatch.setattr(psutil.Process, "net_connections", refused)
    monkeypatch.setattr(process, "socket_inodes", unreadable_fds)
    started = time.monotonic()
    with pytest.raises(SpectuiError, match=r"http\.server was loading on port \d+, but where its processes listen could not be read") as err:
        start(LoadingServer("127.0.0.1"), log_path=tmp_path / "unread-loading.log", ready_timeout_s=120)
    assert time.monotonic() - started < 60, "refused only once the wait for readiness ran out"
    assert "\n" not in str(err.value)
    assert not _children() - before


def test_ipv4_loopback_seen_through_an_ipv6_socket_is_loopback():
    assert is_loopback("::ffff:127.0.0.1") and is_loopback("[::ffff:127.0.0.2]")
    assert not is_loopback("::ffff:10.0.0.1") and not is_loopback("0.0.0.0") and not is_loopback("::")
    # every wildcard is beyond loopback for a started server, IPv4's through an IPv6 socket too
    assert beyond_loopback([("0.0.0.0", 1), ("::", 2), ("", 3), ("::ffff:0.0.0.0", 4), ("127.0.0.1", 5)]) == ["*", "0.0.0.0", "::", "::ffff:0.0.0.0"]


@dataclass(frozen=True)
class LaterWideServer(HttpServer):
    """An ``HttpServer`` on loopback that opens a second listener on every interface a second
    after it said it was serving: accepted by ``start``, then seen by the guard."""

    def argv(self, port: int) -> list[str]:
        script = ("import http.server, socket, threading, time\n"
                  f"s = http.server.HTTPServer(('127.0.0.1', {port}), http.server.SimpleHTTPRequestHandler)\n"
                  f"print('Serving HTTP on 127.0.0.1 port {port}', flush=True)\n"
                  "threading.Thread(target=s.serve_forever, daemon=True).start()\n"
                  "time.sleep(1.5)\n"
                  "wide = socket.socket(); wide.bind(('0.0.0.0', 0)); wide.listen()\n"
                  "time.sleep(600)\n")
        return [sys.executable, "-u", "-c", script]


def test_a_server_that_listens_beyond_loopback_after_it_was_accepted_is_stopped(tmp_path):
    before = _children()
    server = start(LaterWideServer("127.0.0.1"), log_path=tmp_path / "later.log")
    try:
        assert server.running and not server.refused  # on loopback alone when it was accepted
        deadline = time.monotonic() + 30
        while server.running and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not server.running, "a wide listener opened after the start was left listening"
        assert re.fullmatch(r"http\.server \(port \d+\) listened on 0\.0\.0\.0, beyond this machine; .* 127\.0\.0\.1 only: stopped",
                            server.refused), server.refused
        assert server.last_log_line() == server.refused
    finally:
        server.stop()
    assert not _children() - before
