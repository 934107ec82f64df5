"""The kernel's listeners read by netlink give psutil's answer: the same addresses and ports a
process listens on, IPv4 and IPv6, and no connection that is not listening."""

from __future__ import annotations

import os
import socket
import sys

import pytest

from spectui.watch import process
from spectui.watch.listeners import listening_inodes, socket_inodes

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="netlink socket diagnostics are Linux's")


def test_the_listeners_of_a_process_are_psutils_and_only_the_listening_ones(monkeypatch):
    v4, v6, client = socket.socket(), socket.socket(socket.AF_INET6), socket.socket()
    try:
        v4.bind(("127.0.0.1", 0))
        v4.listen()
        v6.bind(("::", 0))
        v6.listen()
        client.connect(v4.getsockname())  # an established connection: not a listener
        ports = v4.getsockname()[1], v6.getsockname()[1], client.getsockname()[1]
        fast = process.listening_sockets(os.getpid())
        monkeypatch.setattr(process, "listening_inodes", lambda: None)  # psutil's way
        slow = process.listening_sockets(os.getpid())
    finally:
        for s in (v4, v6, client):
            s.close()
    assert fast is not None and sorted(fast) == sorted(slow or [])
    assert ("127.0.0.1", ports[0]) in fast and ("::", ports[1]) in fast
    assert ports[2] not in {port for _, port in fast}  # the connection's own end listens nowhere


def test_a_process_whose_sockets_cannot_be_read_is_unreadable_not_listening_nowhere(monkeypatch):
    def refused(pid: int) -> set[int]:
        raise PermissionError(13, "Permission denied", f"/proc/{pid}/fd")  # another user's process

    monkeypatch.setattr(process, "socket_inodes", refused)
    assert process.listening_sockets(os.getpid()) is None


def test_a_socket_closed_is_no_longer_listed():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    inodes = socket_inodes(os.getpid())
    assert any(listening_inodes()[i] == ("127.0.0.1", port) for i in inodes if i in listening_inodes())
    s.close()
    assert ("127.0.0.1", port) not in (listening_inodes() or {}).values()
