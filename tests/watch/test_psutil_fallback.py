"""psutil 5.9 (still a distribution's package, and what pyproject allows) has no
``Process.net_connections``: it arrived in 6.0, renaming ``connections``. Where it is missing
the listener lookups use the old name, so a runtime starts and a watch finds its process; and an
error psutil did not foresee reads as "could not be read", never as "listens nowhere"."""

from __future__ import annotations

import os
import socket

import psutil

from spectui.watch import process
from spectui.watch.process import find_listener, listening_sockets


def _without_net_connections(monkeypatch) -> None:
    """This psutil as 5.9 was: ``connections`` only (and psutil's way, not Linux's netlink)."""
    monkeypatch.setattr(process, "listening_inodes", lambda: None)
    modern = psutil.Process.net_connections
    monkeypatch.delattr(psutil.Process, "net_connections")
    monkeypatch.setattr(psutil.Process, "connections", modern, raising=False)


def test_listeners_are_read_through_connections_where_net_connections_is_missing(monkeypatch):
    _without_net_connections(monkeypatch)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert ("127.0.0.1", port) in (listening_sockets(os.getpid()) or [])


def test_a_watch_finds_its_process_where_net_connections_is_missing(monkeypatch):
    _without_net_connections(monkeypatch)

    def refused(kind: str = "inet") -> list:
        raise psutil.AccessDenied()  # as on macOS without root: each process is asked instead

    monkeypatch.setattr(psutil, "net_connections", refused)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert find_listener(s.getsockname()[1]).pid == os.getpid()


def test_an_unforeseen_os_error_reads_as_unreadable_not_as_no_listener(monkeypatch):
    def broken(self, kind: str = "inet") -> list:  # e.g. /proc/net/tcp6 missing on a kernel without IPv6
        raise FileNotFoundError(2, "No such file or directory", "/proc/net/tcp6")

    monkeypatch.setattr(psutil.Process, "net_connections", broken)
    monkeypatch.setattr(process, "listening_inodes", lambda: None)  # where netlink is not to be had
    assert listening_sockets(os.getpid()) is None
