"""``spectui watch URL``: watch a server that is already serving, sending it only GETs.

In a terminal it opens the watch dashboard (``spectui.ui.watch_app``); ``--headless`` prints a
line per reading, ``--json`` a JSON object per line (a ``start`` object, one ``sample`` per
reading, an ``end`` summary); output that is not a terminal gets the lines too. ``--interval``
sets the rate, ``--samples`` / ``--duration`` end it (else q, Ctrl-C or SIGTERM do, and the
summary still prints). Every watch is recorded (``-o FILE``, default the recordings folder;
``--no-record``): ``spectui replay`` plays it in the dashboard, ``spectui report`` sums it up,
``spectui history`` lists it under its server. The work is ``spectui.watch``'s; this module
parses flags and prints. A bad URL is one line and exit 2; a server that cannot be reached or
has no ``/metrics`` is one line and exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
from typing import TYPE_CHECKING

from spectui.errors import SpectuiError
from spectui.format import terminal_safe

if TYPE_CHECKING:
    from spectui.recording.reader import Recording
    from spectui.recording.watch_records import WatchInfo
    from spectui.watch.feed import LiveFeed
    from spectui.watch.node import NodeFeed
    from spectui.watch.record import WatchRecorder
    from spectui.watch.source import WatchTarget


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "watch",
        help="watch a running llama-server / vLLM / SGLang from its /metrics: tokens/s, queue, acceptance (sends no request)",
    )
    p.add_argument("url", metavar="URL", help="the server, http://HOST:PORT")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--headless", action="store_true", help="no dashboard: a line per reading")
    out.add_argument("--json", action="store_true", help="no dashboard: a JSON object per line (start, one per reading, end)")
    p.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between readings (default 1)")
    bound = p.add_mutually_exclusive_group()
    bound.add_argument("--samples", type=int, default=None, metavar="N", help="stop after N readings")
    bound.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds")
    p.add_argument("--api-key-env", metavar="VAR", default="", help="environment variable holding the server's API key (never recorded)")
    rec = p.add_mutually_exclusive_group()
    rec.add_argument("-o", "--output", metavar="FILE", default=None,
                     help="the watch's recording (default: a readable name in the recordings folder)")
    rec.add_argument("--no-record", action="store_true", help="do not record this watch")
    p.add_argument("--theme", default=None, help="dashboard theme: spectui-dark, spectui-light, spectui-256, ...")
    p.add_argument("--host", metavar="NODE", default=None,
                   help="watch from NODE over SSH (an ssh destination): the URL as the node sees it (127.0.0.1 is the node's"
                   " own server); the readings stream back and the recording is written here")
    p.set_defaults(func=cmd_watch)


def _watch_flags(p: argparse.ArgumentParser) -> None:
    """The flags the node's watch takes (``spectui node watch``), as ``spectui watch`` spells them."""
    p.add_argument("url", metavar="URL", help="the server, http://HOST:PORT, as this machine reaches it")
    p.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between readings")
    bound = p.add_mutually_exclusive_group()
    bound.add_argument("--samples", type=int, default=None, metavar="N", help="stop after N readings")
    bound.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds")
    p.add_argument("--api-key-env", metavar="VAR", default="", help="environment variable (here) holding the server's API key")


def add_node_watch(actions: argparse._SubParsersAction) -> None:
    """``spectui node watch URL``: the node's side of ``spectui watch --host`` (started over SSH)."""
    p = actions.add_parser("watch", help="watch URL from here, streaming the readings on stdout (spectui.watch.node)")
    _watch_flags(p)
    p.set_defaults(func=cmd_node_watch, output=None)


def _check(args: argparse.Namespace) -> None:
    if not args.interval > 0:
        raise SpectuiError(f"--interval must be > 0 seconds, got {args.interval:g}")
    if args.samples is not None and args.samples < 1:
        raise SpectuiError(f"--samples must be >= 1, got {args.samples}")
    if args.duration is not None and not args.duration > 0:
        raise SpectuiError(f"--duration must be > 0 seconds, got {args.duration:g}")
    if args.api_key_env and args.api_key_env not in os.environ and not getattr(args, "host", None):  # with --host: the node's
        raise SpectuiError(f"--api-key-env {args.api_key_env}: that environment variable is not set")
    if args.output is not None and os.path.exists(args.output):
        raise SpectuiError(f"recording {args.output} already exists; choose another file name")


def _emit(args: argparse.Namespace, line: str | None, obj: dict | None) -> None:
    text = json.dumps(obj) if args.json else line
    if text is not None:
        print(text, flush=True)


def cmd_watch(args: argparse.Namespace) -> int:
    from spectui.metrics.energy import open_energy
    from spectui.server.client import PROBE_TIMEOUT_S, ServerClient, ServerError, parse_server_url
    from spectui.watch.feed import LiveFeed
    from spectui.watch.process import open_probe
    from spectui.watch.record import WatchRecorder, default_watch_path, watch_header, watch_info
    from spectui.watch.source import WatchUnavailable, open_watch

    _check(args)
    url = parse_server_url(args.url)  # a malformed URL: SpectuiError, exit 2
    if args.host:
        return _watch_on_node(args)
    api_key = os.environ.get(args.api_key_env, "") if args.api_key_env else ""
    # a reading that takes longer than the interval would fall behind the grid; never wait long
    client = ServerClient(url, api_key, connect_timeout_s=min(PROBE_TIMEOUT_S, max(1.0, args.interval * 2)))
    # before the first reading, so the process's CPU clock starts before it
    probe = open_probe(url.host, url.port)
    try:
        target = open_watch(client)
    except (ServerError, WatchUnavailable) as exc:
        print(f"spectui: error: {terminal_safe(str(exc))}", file=sys.stderr)
        return 1
    # a server on this machine: this machine's energy counters, read at each reading
    energy = open_energy() if probe is not None else None
    info = watch_info(target, args.interval, process=probe.label if probe is not None and probe.found else "",
                      process_note=probe.note if probe is not None else "",
                      energy="" if energy is None else (energy.sources or energy.why_not))  # fmt: skip
    recorder = None
    if not args.no_record:
        recorder = WatchRecorder(args.output or default_watch_path(info), watch_header(info))
    feed = LiveFeed(client, target, interval_s=args.interval, max_samples=args.samples, duration_s=args.duration, probe=probe,
                    recorder=recorder, energy=energy.total_joules if energy is not None and energy.available else None)
    try:
        return _follow(args, target, info, feed, recorder)
    finally:
        if energy is not None:
            energy.close()



def _watch_on_node(args: argparse.Namespace) -> int:
    """``--host NODE``: the node watches (``spectui node watch``) and streams its readings back."""
    from spectui.remote.ssh import check_host
    from spectui.watch.node import NodeFeed
    from spectui.watch.record import WatchRecorder, default_watch_path, target_of
    from spectui.watch.source import WatchUnavailable

    check_host(args.host)
    words = [args.url, "--interval", repr(args.interval)]
    if args.samples is not None:
        words += ["--samples", str(args.samples)]
    if args.duration is not None:
        words += ["--duration", repr(args.duration)]
    if args.api_key_env:
        words += ["--api-key-env", args.api_key_env]
    try:
        feed = NodeFeed(args.host, words)
    except WatchUnavailable as exc:
        print(f"spectui: error: {terminal_safe(str(exc))}", file=sys.stderr)
        return 1
    recorder = None
    if not args.no_record:
        recorder = WatchRecorder(args.output or default_watch_path(feed.info), feed.header)
    feed.recorder = recorder
    return _follow(args, target_of(feed.info), feed.info, feed, recorder)


def _follow(args: argparse.Namespace, target: WatchTarget, info: WatchInfo, feed: LiveFeed | NodeFeed,
            recorder: WatchRecorder | None) -> int:  # fmt: skip
    """The watch until it ends: the dashboard in a terminal, else lines; then the recording's End."""
    headless = args.headless or args.json or not (sys.stdout.isatty() and sys.stdin.isatty())
    try:
        code = _headless(args, target, info, feed, recorder) if headless else _dashboard(args, feed, info)
    finally:
        feed.finish()  # the sampler's thread ends, then the recording gets its End
    if recorder is not None and not args.json:
        print(f"recorded {recorder.samples} readings to {recorder.path}" + (f" (then: {recorder.error})" if recorder.error else ""),
              file=sys.stderr)  # fmt: skip
    return code


def _dashboard(args: argparse.Namespace, feed: LiveFeed | NodeFeed, info: WatchInfo) -> int:
    from spectui.ui.launch import run_watch
    from spectui.watch.board import WatchBoard

    return run_watch(WatchBoard(info), feed, theme=args.theme)


def _headless(args: argparse.Namespace, target: WatchTarget, info: WatchInfo, feed: LiveFeed | NodeFeed,
              recorder: WatchRecorder | None) -> int:  # fmt: skip
    from spectui.cli.signals import StopOnSignal
    from spectui.watch.sampler import WatchSample
    from spectui.watch.text import (
        energy_figures,
        opening_json,
        opening_lines,
        sample_json,
        sample_line,
        speculation_missing,
        summary_json,
        summary_lines,
    )

    fam = target.families
    process, note = info.process, info.process_note
    if args.json:
        _emit(args, None, opening_json(target, args.interval, process=process, process_note=note,
                                       recording=str(recorder.path) if recorder is not None else ""))  # fmt: skip
    else:
        for line in opening_lines(target, args.interval, process=process, process_note=note):
            _emit(args, line, None)
        if recorder is not None:
            _emit(args, f"recording to {recorder.path}", None)

    samples: queue.Queue[WatchSample] = queue.Queue()
    n = failed = 0
    joules_seen: list[float] = []
    said_missing = False
    with StopOnSignal() as stop:  # Ctrl-C, SIGTERM, a closed terminal: the summary and the End still come
        feed.start(samples.put)
        while not (feed.done.is_set() and samples.empty()):
            if stop.is_set():
                feed.request_stop()
            try:
                sample = samples.get(timeout=0.2)
            except queue.Empty:
                continue
            n += 1
            failed += bool(sample.error)
            if sample.joules is not None:
                joules_seen.append(sample.joules)
            missing = None if said_missing else speculation_missing(fam, sample)
            if missing and not args.json:
                _emit(args, missing, None)
            said_missing = said_missing or missing is not None
            obj = sample_json(sample)
            if missing:
                obj["note"] = missing
            _emit(args, sample_line(fam, sample), obj)
    totals = feed.totals
    energy = energy_figures(joules_seen[-1] - joules_seen[0] if len(joules_seen) >= 2 else None, totals, info.energy)
    if args.json:
        _emit(args, None, summary_json(totals, n, failed, energy))
    else:
        for line in summary_lines(totals, n, failed, energy):
            _emit(args, line, None)
    return 0


# -- a recorded watch: spectui replay / report (spectui.cli.views and recordings dispatch here) --


def replay_watch(rec: Recording, *, speed: float, json_lines: bool, theme: str | None) -> int:
    """``spectui replay`` of a watch's recording: the dashboard at the recorded pace (``speed``
    times it), or with ``--json`` the lines ``watch --json`` printed."""
    from spectui.watch.record import read_watch
    from spectui.watch.text import energy_figures, sample_json, summary_json, watch_joules

    watch = read_watch(rec)
    if json_lines:
        for sample in watch.samples:
            print(json.dumps(sample_json(sample)))
        energy = energy_figures(watch_joules(watch.samples), watch.totals, watch.info.energy)
        print(json.dumps(summary_json(watch.totals, len(watch.samples), watch.failed, energy)))
        return 0
    from spectui.cli.inputs import need_terminal

    need_terminal("replay")
    from spectui.ui.launch import run_watch
    from spectui.watch.board import WatchBoard
    from spectui.watch.feed import ReplayFeed

    feed = ReplayFeed(watch.samples, speed=speed)
    try:
        return run_watch(WatchBoard(watch.info, replay=True), feed, theme=theme)
    finally:
        feed.finish()


# -- the node's side of --host ---------------------------------------------------------------


def cmd_node_watch(args: argparse.Namespace) -> int:
    """``spectui node watch URL``: watch from this machine, the readings streamed on stdout as the
    recording format's frames (``spectui.watch.node`` reads them); a watch that cannot start is
    one ``Reply`` with its error. End of file on stdin ends the watch."""
    import threading

    from spectui.remote.node import open_stream
    from spectui.remote.wire import Reply
    from spectui.server.client import PROBE_TIMEOUT_S, ServerClient, ServerError, parse_server_url
    from spectui.watch.feed import LiveFeed
    from spectui.watch.process import open_probe
    from spectui.watch.record import reading_record, watch_header, watch_info
    from spectui.watch.source import WatchUnavailable, open_watch

    out = open_stream()  # from here on, stdout carries frames only
    try:
        _check(args)
        url = parse_server_url(args.url)
        api_key = os.environ.get(args.api_key_env, "") if args.api_key_env else ""
        client = ServerClient(url, api_key, connect_timeout_s=min(PROBE_TIMEOUT_S, max(1.0, args.interval * 2)))
        probe = open_probe(url.host, url.port)
        target = open_watch(client)
    except (SpectuiError, ServerError, WatchUnavailable) as exc:
        out.write(Reply(ok=False, error=str(exc)))
        return 1
    info = watch_info(target, args.interval, process=probe.label if probe is not None and probe.found else "",
                      process_note=probe.note if probe is not None else "")  # fmt: skip
    out.write(watch_header(info))
    feed = LiveFeed(client, target, interval_s=args.interval, max_samples=args.samples, duration_s=args.duration, probe=probe)

    def until_eof() -> None:
        for _ in sys.stdin.buffer:
            pass
        feed.request_stop()  # the local side stopped the watch, or the link dropped

    threading.Thread(target=until_eof, name="spectui-node-watch-stdin", daemon=True).start()
    feed.start(lambda sample: out.write(reading_record(sample)))
    feed.done.wait()
    feed.finish()
    return 0
