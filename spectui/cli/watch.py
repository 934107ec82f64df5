"""``spectui watch URL``: watch a server that is already serving, sending it only GETs.

``--headless`` prints a line per reading, ``--json`` a JSON object per line (a ``start``
object, one ``sample`` per reading, an ``end`` summary); ``--interval`` sets the rate,
``--samples`` / ``--duration`` end it (else Ctrl-C does, and the summary still prints). The work
is ``spectui.watch``'s; this module parses flags and prints. A bad URL is one line and exit 2;
a server that cannot be reached or has no ``/metrics`` is one line and exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys

from spectui.errors import SpectuiError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "watch",
        help="watch a running llama-server / vLLM / SGLang from its /metrics: tokens/s, queue, acceptance (sends no request)",
    )
    p.add_argument("url", metavar="URL", help="the server, http://HOST:PORT")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--headless", action="store_true", help="a line per reading (the default until the dashboard view lands)")
    out.add_argument("--json", action="store_true", help="a JSON object per line: start, one per reading, end")
    p.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between readings (default 1)")
    bound = p.add_mutually_exclusive_group()
    bound.add_argument("--samples", type=int, default=None, metavar="N", help="stop after N readings")
    bound.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds")
    p.add_argument("--api-key-env", metavar="VAR", default="", help="environment variable holding the server's API key (never recorded)")
    p.set_defaults(func=cmd_watch)


def _check(args: argparse.Namespace) -> None:
    if not args.interval > 0:
        raise SpectuiError(f"--interval must be > 0 seconds, got {args.interval:g}")
    if args.samples is not None and args.samples < 1:
        raise SpectuiError(f"--samples must be >= 1, got {args.samples}")
    if args.duration is not None and not args.duration > 0:
        raise SpectuiError(f"--duration must be > 0 seconds, got {args.duration:g}")
    if args.api_key_env and args.api_key_env not in os.environ:
        raise SpectuiError(f"--api-key-env {args.api_key_env}: that environment variable is not set")


def _emit(args: argparse.Namespace, line: str | None, obj: dict | None) -> None:
    text = json.dumps(obj) if args.json else line
    if text is not None:
        print(text, flush=True)


def cmd_watch(args: argparse.Namespace) -> int:
    from spectui.server.client import PROBE_TIMEOUT_S, ServerClient, ServerError, parse_server_url
    from spectui.watch.sampler import WatchSample, WatchSampler
    from spectui.watch.source import WatchUnavailable, open_watch
    from spectui.watch.text import (
        opening_json,
        opening_lines,
        sample_json,
        sample_line,
        speculation_missing,
        summary_json,
        summary_lines,
    )

    _check(args)
    url = parse_server_url(args.url)  # a malformed URL: SpectuiError, exit 2
    api_key = os.environ.get(args.api_key_env, "") if args.api_key_env else ""
    # a reading that takes longer than the interval would fall behind the grid; never wait long
    client = ServerClient(url, api_key, connect_timeout_s=min(PROBE_TIMEOUT_S, max(1.0, args.interval * 2)))
    try:
        target = open_watch(client)
    except (ServerError, WatchUnavailable) as exc:
        print(f"spectui: error: {exc}", file=sys.stderr)
        return 1
    fam = target.families
    if args.json:
        _emit(args, None, opening_json(target, args.interval))
    else:
        for line in opening_lines(target, args.interval):
            _emit(args, line, None)

    samples: queue.Queue[WatchSample] = queue.Queue()
    sampler = WatchSampler(
        client, target, samples.put, interval_s=args.interval, max_samples=args.samples, duration_s=args.duration
    )
    n = failed = 0
    said_missing = False
    sampler.start()
    try:
        while not (sampler.done.is_set() and samples.empty()):
            try:
                sample = samples.get(timeout=0.2)
            except queue.Empty:
                continue
            n += 1
            failed += bool(sample.error)
            missing = None if said_missing else speculation_missing(fam, sample)
            if missing and not args.json:
                _emit(args, missing, None)
            said_missing = said_missing or missing is not None
            obj = sample_json(sample)
            if missing:
                obj["note"] = missing
            _emit(args, sample_line(fam, sample), obj)
    except KeyboardInterrupt:  # the usual end of an unbounded watch
        pass
    finally:
        sampler.stop()
    if args.json:
        _emit(args, None, summary_json(sampler.totals, n, failed))
    else:
        for line in summary_lines(sampler.totals, n, failed):
            _emit(args, line, None)
    return 0
