"""A runtime never outlives spectui, whichever thread started it: the exit hooks are installed
on the main thread at start (the command line's parser does it before any command runs), so a
runtime the dashboard starts from a worker thread is still stopped when the terminal closes on
macOS, which has no PDEATHSIG; and a child is registered before ``spawn`` returns, so a Ctrl-C
between the fork and ``keep`` leaves nothing running. Real children, no model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from spectui.runtime import lifetime
from spectui.runtime.server import start
from tests.runtime.test_build_safety import _gone
from tests.runtime.test_server_loopback import HttpServer

ROOT = Path(__file__).resolve().parents[2]


def _live_children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE}


# a spectui whose command line was parsed on the main thread, as macOS sees it (no PDEATHSIG),
# that starts a runtime from a worker thread (as the dashboard loads its engines) and waits
_WORKER_START = textwrap.dedent("""
    import sys, threading, time
    from spectui.cli import build_parser
    from spectui.runtime import lifetime
    from spectui.runtime.server import start
    from tests.runtime.test_server_loopback import HttpServer

    build_parser()
    lifetime._PRCTL = None
    started = []
    worker = threading.Thread(target=lambda: started.append(start(HttpServer("127.0.0.1"), log_path=sys.argv[1])))
    worker.start()
    worker.join()
    print(started[0].pid, flush=True)
    time.sleep(120)
""")


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_a_runtime_started_from_a_worker_thread_stops_when_spectui_is_hung_up(tmp_path, sig):
    spectui = subprocess.Popen([sys.executable, "-c", _WORKER_START, str(tmp_path / "worker.log")], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    child = 0
    try:
        assert spectui.stdout is not None
        child = int(spectui.stdout.readline())
        assert psutil.pid_exists(child)
        spectui.send_signal(sig)  # the terminal closed (SIGHUP), or `kill` (SIGTERM)
        assert spectui.wait(timeout=30) == 128 + sig
        assert _gone(child), "the runtime outlived the spectui that started it"
    finally:
        spectui.kill()
        spectui.wait()
        if child and psutil.pid_exists(child):
            os.killpg(child, signal.SIGKILL)


def test_the_command_line_installs_the_signal_hooks_on_the_main_thread():
    probe = ("import signal\nfrom spectui.cli import build_parser\nfrom spectui.runtime import lifetime\nbuild_parser()\n"
             "print(lifetime.hooks_installed(), all(signal.getsignal(s) is lifetime._exit_on_signal for s in lifetime.EXIT_SIGNALS))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.split() == ["(True,", "True)", "True"], out.stderr


def test_a_ctrl_c_between_spawn_and_keep_leaves_no_child(tmp_path, monkeypatch):
    def interrupted(_server: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(lifetime, "keep", interrupted)
    before = _live_children()
    with pytest.raises(KeyboardInterrupt):
        start(HttpServer("127.0.0.1"), log_path=tmp_path / "interrupted.log")
    assert not _live_children() - before


def test_a_ctrl_c_while_the_child_starts_leaves_no_child(monkeypatch):
    # the spawner thread forks while the caller waits for it: a Ctrl-C then reaches the caller,
    # and the child it never received is killed, whether it started before or after
    started: list[subprocess.Popen] = []
    real = lifetime._Spawner._popen

    def slow(*args: object) -> subprocess.Popen:
        proc = real(*args)
        started.append(proc)
        time.sleep(0.5)  # the caller is interrupted meanwhile
        return proc

    monkeypatch.setattr(lifetime._Spawner, "_popen", staticmethod(slow))
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    main = threading.main_thread().ident
    assert main is not None
    timer = threading.Timer(0.1, lambda: signal.pthread_kill(main, signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            lifetime.spawn(["sleep", "60"], env=dict(os.environ), stdout=subprocess.DEVNULL)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, old)
    deadline = time.monotonic() + 5
    while not started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started and _gone(started[0].pid, 10), "the child the interrupted caller never received is still running"


def test_a_child_spawned_and_never_kept_is_stopped_on_exit():
    proc = lifetime.spawn(["sleep", "60"], env=dict(os.environ), stdout=subprocess.DEVNULL)
    try:
        lifetime.stop_all()  # what atexit runs
        assert _gone(proc.pid, 10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
