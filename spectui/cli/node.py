"""``spectui node``: the node's side of ``--host`` (hidden; the local spectui starts it over SSH).

``spectui node serve`` speaks the channel of ``spectui.remote.wire`` on stdin/stdout until stdin
ends; ``spectui node watch URL`` watches a server from the node and streams its readings back
(``spectui watch --host``: ``spectui.cli.watch``); ``spectui node hello`` prints the handshake as
JSON (what a node offers, for a person checking a node by hand: ``ssh NODE spectui node hello``).
How a person uses nodes: docs/guide/remote.md.
"""

from __future__ import annotations

import argparse

from spectui.cli.watch import add_node_watch
from spectui.config import RunConfig


def register(sub: argparse._SubParsersAction) -> None:
    # no help text, and left out of the usage's {choices}: `spectui --help` does not list it
    node = sub.add_parser("node", description="the node's side of --host: started by spectui over SSH")
    sub.metavar = "{" + ",".join(name for name in sub.choices if name != "node") + "}"
    actions = node.add_subparsers(dest="node_command", required=True)
    actions.add_parser("serve", help="serve the channel on stdin/stdout (spectui.remote.wire)").set_defaults(func=cmd_serve)
    actions.add_parser("hello", help="print the handshake (version, schema, backends, models) as JSON").set_defaults(func=cmd_hello)
    add_node_watch(actions)  # `spectui watch --host`: the watch runs here, its readings stream back


def prepare(config: RunConfig) -> RunConfig:
    """A configuration as the node runs it: catalogue names turned into the node's model paths,
    an undeclared headroom floor taken from the node's memory."""
    import msgspec
    import psutil

    from spectui.cli.run_flags import model_path
    from spectui.drafting import Model
    from spectui.metrics.envelope import resolve_envelope

    draft, drafter = config.draft, config.draft.drafter
    if isinstance(drafter, Model):
        draft = msgspec.structs.replace(draft, drafter=msgspec.structs.replace(drafter, path=model_path(drafter.path)))
    envelope = resolve_envelope(config.envelope, psutil.virtual_memory().total)
    return msgspec.structs.replace(config, target=model_path(config.target), draft=draft, envelope=envelope)


def cmd_serve(args: argparse.Namespace) -> int:
    from spectui.remote.node import node_hello, serve
    from spectui.sessions.open import open_engine
    from spectui.sessions.record import record_session

    return serve(node_hello(), open_engine, record_session, prepare)


def cmd_hello(args: argparse.Namespace) -> int:
    import msgspec

    from spectui.remote.node import node_hello

    print(msgspec.json.encode(node_hello()).decode())
    return 0
