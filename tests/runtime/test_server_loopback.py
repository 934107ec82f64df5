"""A server spectui starts never serves beyond this machine: whatever its flags say, ``start``
reads where the started process listens once it is ready, and a server listening on any
address but loopback is stopped and refused in one line. Real servers (Python's own
``http.server``, so that no model is needed), real sockets."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

import psutil
import pytest

from spectui.errors import SpectuiError
from spectui.runtime.server import RuntimeServer, start
from spectui.watch.process import is_loopback


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


def test_a_started_server_on_loopback_is_kept(tmp_path):
    before = _children()
    with start(HttpServer("127.0.0.1"), log_path=tmp_path / "loopback.log") as server:
        listening = [c.laddr for c in psutil.Process(server.pid).net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN]
        assert [a.ip for a in listening] == ["127.0.0.1"] and listening[0].port == server.port
    assert not _children() - before


def test_a_server_whose_listeners_cannot_be_read_is_stopped_not_trusted(tmp_path, monkeypatch):
    # where the OS refuses to say what a process listens on (a hardened /proc, another user's
    # child), not seeing a wide listener is no proof that there is none
    def refused(self, kind="inet"):  # noqa: ANN001, ANN202 - psutil's signature
        raise psutil.AccessDenied(self.pid)

    before = _children()
    monkeypatch.setattr(psutil.Process, "net_connections", refused)
    with pytest.raises(SpectuiError, match=r"http\.server answered on port \d+, but where its processes listen could not be read") as err:
        start(HttpServer("127.0.0.1"), log_path=tmp_path / "unread.log")
    assert "\n" not in str(err.value)
    assert not _children() - before


def test_ipv4_loopback_seen_through_an_ipv6_socket_is_loopback():
    assert is_loopback("::ffff:127.0.0.1") and is_loopback("[::ffff:127.0.0.2]")
    assert not is_loopback("::ffff:10.0.0.1") and not is_loopback("0.0.0.0") and not is_loopback("::")
