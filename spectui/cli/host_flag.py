"""``--host NODE``: run a command on another machine over SSH (``spectui.remote``): the flag, the
engines it opens on the node, and the command line a node is asked to run (without it).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from spectui.cli.parsing import without_option


def add_host_argument(p: argparse.ArgumentParser) -> None:
    """``--host NODE``: run on another machine over SSH (``spectui.remote``)."""
    p.add_argument("--host", metavar="NODE", default=None,
                   help="run on NODE over SSH (an ssh destination: a ~/.ssh/config alias, user@host, ssh://user@host:port);"
                   " the node needs the same spectui, the recording is written here")


def host_engines(host: str | None):  # noqa: ANN201 - an EngineFactory, imported on use
    """``--host``: a factory opening engines on the node (``open_engine(config, host=...)``);
    None to open them here."""
    if not host:
        return None
    import functools

    from spectui.sessions.open import open_engine

    return functools.partial(open_engine, host=host)


def without_host(argv: Sequence[str]) -> list[str]:
    """A command line minus ``--host NODE`` / ``--host=NODE``: what a node is asked to run."""
    return without_option(argv, "--host")
