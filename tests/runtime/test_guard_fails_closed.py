"""The listener guard fails closed: any error while it reads where a started server listens
stops the server, with one line saying why, rather than ending the guard's thread and leaving
the server running unguarded. Real children (Python's ``http.server``), started by ``start``."""

from __future__ import annotations

import time

import psutil
import pytest

from spectui.errors import SpectuiError
from spectui.runtime import server as runtime_server
from spectui.runtime.server import start
from tests.runtime.test_server_loopback import HttpServer, LoadingServer


def _stopped_within(server, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while server.running and time.monotonic() < deadline:
        time.sleep(0.1)
    return not server.running


def test_an_unexpected_error_in_the_guard_stops_the_server_with_one_line(tmp_path, monkeypatch):
    server = start(HttpServer("127.0.0.1"), log_path=tmp_path / "guarded.log")
    pid = server.pid
    try:
        assert server.running and not server.refused

        def broken(_pid: int) -> list:
            raise RuntimeError("a psutil nobody foresaw")

        monkeypatch.setattr(runtime_server, "listening_sockets", broken)
        assert _stopped_within(server, 20), "the guard died on the error and left the server running"
        assert "its listeners could no longer be read (RuntimeError: a psutil nobody foresaw)" in server.refused
        assert server.refused.endswith("127.0.0.1 only: stopped") and "\n" not in server.refused
        assert server.last_log_line() == server.refused
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    finally:
        server.stop()


def test_an_unexpected_error_while_it_loads_is_one_line_and_no_server(tmp_path, monkeypatch):
    def broken(_pid: int) -> list:
        raise ValueError("unreadable table")

    monkeypatch.setattr(runtime_server, "listening_sockets", broken)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(SpectuiError, match=r"http\.server was loading on port \d+, but where its processes listen could not be read") as err:
        start(LoadingServer("127.0.0.1"), log_path=tmp_path / "loading.log", ready_timeout_s=60)
    assert "\n" not in str(err.value)
    assert not {p.pid for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE} - before
