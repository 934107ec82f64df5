"""What the watch dashboard shows, without a terminal (``spectui.watch.board``), and the process
behind a loopback port (``spectui.watch.process``): an interval in which llama-server finished
no request adds no acceptance point (never a flat line at zero), tokens/s is live from
``/slots``, a restart is said; the probe finds this process on a socket it listens on."""

from __future__ import annotations

import os
import socket

from spectui.metrics.prometheus import LLAMA_SERVER, CounterReading
from spectui.recording.watch_records import ProcessSample
from spectui.watch.board import WatchBoard
from spectui.watch.process import ProcessProbe, find_listener, is_loopback, open_probe
from spectui.watch.record import watch_info
from spectui.watch.sampler import WatchCore
from spectui.watch.source import LiveSlots, Poll, WatchTarget


def reading(t: float, generated: float, drafted: float, accepted: float, drafts: float, per_pos: tuple[float, ...] = ()) -> CounterReading:
    return CounterReading(server="llama-server", t_s=t, generated_tokens=generated, draft_tokens=drafted, accepted_tokens=accepted,
                          drafts=drafts, accepted_per_position=per_pos, requests_running=1.0, requests_waiting=0.0)  # fmt: skip


def board_of(readings: list[tuple[CounterReading, LiveSlots | None]]) -> WatchBoard:
    target = WatchTarget("http://127.0.0.1:8080", LLAMA_SERVER, {"server": "llama-server", "build": "b1"})
    board = WatchBoard(watch_info(target, 1.0))
    core = WatchCore(0.0)
    for r, live in readings:
        board.add(core.take(Poll(r, live), r.t_s, ProcessSample(rss_bytes=1 << 30, cpu_pct=150.0, threads=8)))
    return board


def test_no_request_finished_is_no_acceptance_point_and_the_screen_says_why():
    board = board_of([
        (reading(0.0, 100, 40, 30, 10, (9, 8, 7, 6)), LiveSlots(1, 1, 1, 0)),
        (reading(1.0, 100, 40, 30, 10, (9, 8, 7, 6)), LiveSlots(1, 1, 1, 20)),  # running: nothing counted yet
        (reading(2.0, 160, 60, 40, 15, (13, 11, 9, 7)), LiveSlots(1, 0, 1, 0)),  # it finished: 60 tokens, 20 drafted
    ])  # fmt: skip
    assert board.series.acceptance == [0.5]  # one point, for the interval that counted drafts
    assert board.series.accepted_length == [1 + 10 / 5]
    assert board.series.tok_s == [20.0, 40.0]  # live: counter + tokens in flight
    rows = dict(board.stat_rows())
    assert rows["acceptance"].startswith("50.0% · 10/20 · len 3.00")
    assert rows["server proc"] == "1.00 GiB · CPU 150% · 8 thr"
    assert [(p, round(w, 3)) for p, w, _ in board.position_rows()] == [(1, 0.8), (2, 0.6), (3, 0.4), (4, 0.2)]
    notes = " ".join(board.notes())
    assert "counts a request's tokens and drafts when it finishes" in notes and "none while they run" in notes


def test_a_restart_is_said_and_counted_from_zero():
    board = board_of([(reading(0.0, 1000, 400, 300, 100), None), (reading(1.0, 50, 20, 10, 5), None)])
    assert board.totals.restarts == 1 and board.totals.generated_tokens == 50
    assert any("restarted 1 time" in n for n in board.notes())


def test_the_probe_finds_the_process_listening_on_a_loopback_port():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("[::1]") and not is_loopback("10.0.0.1")
    assert open_probe("example.com", 80) is None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert find_listener(port).pid == os.getpid()
        probe = ProcessProbe(port)
        assert probe.found and probe.label.endswith(f"pid {os.getpid()}")
        taken = probe.read()
        assert taken is not None and taken.rss_bytes > 0 and taken.threads >= 1
    with socket.socket() as s:  # bound, not listening: nobody serves there
        s.bind(("127.0.0.1", 0))
        nobody = ProcessProbe(s.getsockname()[1])
    assert not nobody.found and "no process here listens on port" in nobody.note and nobody.read() is None
