"""What a command checks before it prints or writes anything: every recording it reads (or the
one line that refuses it), and a terminal for a dashboard view.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from spectui.errors import SpectuiError

if TYPE_CHECKING:
    from spectui.recording.reader import Recording


def read_recordings(paths: Sequence[str], *, watches: bool = False) -> list[Recording]:
    """Every file read (or refused in one line) before a command prints or writes anything.
    A watch's recording (``spectui watch``) holds no session: refused unless ``watches``."""
    from spectui.recording.reader import read_recording

    recs = []
    for path in paths:
        if not os.path.isfile(path):
            raise SpectuiError(f"recording not found: {path}")
        rec = read_recording(path)
        if rec.header.watch is not None and not watches:
            raise SpectuiError(f"{path} is a watch's recording (spectui watch), not a session's: spectui report or replay read it")
        recs.append(rec)
    return recs


def need_terminal(what: str) -> None:
    """Refuse a dashboard view without a terminal: piped, it would only print escape codes."""
    if not (sys.stdout.isatty() and sys.stdin.isatty()):
        raise SpectuiError(f"{what} needs a terminal; for a text summary use: spectui report FILE / spectui diff A B")
