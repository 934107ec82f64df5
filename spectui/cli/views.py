"""The dashboard views of recordings: ``spectui replay`` and ``spectui compare`` (``--hosts``, two
nodes side by side: ``spectui.cli.compare_nodes``).

Every file is read (and refused in one line) before the dashboard starts, so a bad path
never leaves a half-drawn terminal behind. The UI is imported only when a view opens: the
headless commands stay free of Textual.
"""

from __future__ import annotations

import argparse
import os

from spectui.cli.host_flag import add_host_argument, host_engines
from spectui.cli.inputs import need_terminal, read_recordings
from spectui.cli.run_flags import add_run_arguments, config_from_args
from spectui.errors import SpectuiError


def register(sub: argparse._SubParsersAction) -> None:
    replay = sub.add_parser("replay", help="play a recording (or a conversation's folder, turn by turn) in the dashboard (no models needed)")
    replay.add_argument("file", help="a recording, or a conversation's folder (spectui chat, the dashboard's composer)")
    replay.add_argument("--speed", default="1", help="0.5, 1, 2, 4 or max (default 1: the original timing)")
    replay.add_argument("--paused", action="store_true", help="open paused at the start: space plays, n steps a block")
    replay.add_argument("--theme", default=None, help="dashboard theme: spectui-dark, spectui-light, spectui-256, ...")
    replay.add_argument("--json", action="store_true",
                        help="no dashboard: print the recorded session as `run --json` printed it (a JSON object per turn)")
    replay.set_defaults(func=cmd_replay)

    compare = sub.add_parser("compare", help="AR and speculative side by side (two recordings, or both run live), or node A vs node B (--hosts)")
    compare.add_argument("files", nargs="*", metavar="FILE", help="two recordings (baseline first); none: run both live")
    compare.add_argument("--theme", default=None, help="dashboard theme: spectui-dark, spectui-light, spectui-256, ...")
    compare.add_argument("--json", action="store_true", help="no dashboard: the two recordings' comparison as one JSON object (as diff --json)")
    compare.add_argument("--no-record", action="store_true", help="live: do not record the two sessions")
    compare.add_argument(
        "--interleave",
        action="store_true",
        help="live: alternate the two runs block by block (two contexts) instead of one after the other",
    )
    add_run_arguments(compare)  # the live pair takes every run knob
    add_host_argument(compare)
    compare.add_argument("--hosts", metavar="A,B", default=None,
                         help="node A vs node B: the same session on each (ssh destinations), one after the other, side by side")
    compare.add_argument("--out", metavar="DIR", default=None,
                         help="--hosts: folder for the two recordings (default recordings/compare-nodes-<time>)")
    compare.add_argument("--headless", action="store_true", help="--hosts: no dashboard, print the two runs as spectui diff does")
    compare.set_defaults(func=cmd_compare)


def cmd_replay(args: argparse.Namespace) -> int:
    from spectui.ui.replay import parse_speed

    try:
        speed = parse_speed(args.speed)
    except ValueError:
        raise SpectuiError(f"--speed {args.speed!r}: expected 0.5, 1, 2, 4 or max") from None
    if os.path.isdir(args.file):  # a conversation: every turn, read (and refused) before the screen opens
        from spectui.sessions.conversation import turn_paths

        recordings = read_recordings([str(p) for p in turn_paths(args.file)])
    else:
        recordings = read_recordings([args.file], watches=True)
        if recordings[0].header.watch is not None:  # a watch's recording: the watch dashboard
            from spectui.cli.watch import replay_watch

            return replay_watch(recordings[0], speed=speed, json_lines=args.json, theme=args.theme)
    if args.json:
        return print_sessions(recordings)
    need_terminal("replay")
    from spectui.ui.launch import run_replay

    return run_replay(args.file, speed=speed, paused=args.paused, theme=args.theme)


def print_sessions(recordings: list) -> int:
    """``replay --json``: each recorded session as ``run --json`` printed it, one line each."""
    import msgspec

    from spectui.metrics.stats import summarize
    from spectui.recording.output import OutputText
    from spectui.recording.schema import Step

    for rec in recordings:
        text = OutputText()
        parts = [chunk for ev in rec.events if (chunk := text.feed(ev))]
        tokens = [t for ev in rec.events if type(ev) is Step for t in ev.tokens]
        doc = {"text": "".join(parts), "tokens": tokens, "summary": msgspec.to_builtins(summarize(rec.events)), "recording": str(rec.path)}
        print(msgspec.json.encode(doc).decode())
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    if args.hosts is not None:
        from spectui.cli.compare_nodes import cmd_compare_nodes

        return cmd_compare_nodes(args)
    if args.out is not None or args.headless:
        raise SpectuiError("--out and --headless go with --hosts (a local compare opens the dashboard; compare --json prints)")
    if len(args.files) not in (0, 2):
        raise SpectuiError("compare takes two recordings (baseline first), or none to run AR and speculative live")
    recordings = read_recordings(args.files)
    if args.json:
        if not recordings:
            raise SpectuiError("compare --json compares two recordings (baseline first); record them with spectui run --headless")
        import msgspec

        from spectui.compare.diff import diff_json, diff_recordings

        print(msgspec.json.encode(diff_json(diff_recordings(*recordings))).decode())
        return 0
    config = config_from_args(args) if not args.files else None
    if config is not None and (config.backend.name == "server" or config.backend.is_runtime) and args.interleave:
        # a server keeps generating while its turn waits: its clock cannot be taken out
        raise SpectuiError("--interleave needs embedded engines; a server run cannot be paused between blocks")
    if args.host and args.interleave:  # one channel carries one stream at a time
        raise SpectuiError("--interleave runs two sessions at once on engines here; with --host the pair runs one after the other")
    need_terminal("compare")
    from spectui.ui.launch import run_compare

    return run_compare(args.files, config=config, record=not args.no_record, theme=args.theme, interleave=args.interleave,
                       engine_factory=host_engines(args.host))
