"""What the dashboard remembers between sessions: the theme, K and mode a person last chose
there, in a state file of its own (``spectui.paths.dashboard_state_file``).

Never in their config files: a config is what a person writes, and spectui only reads it
(``spectui.profiles``); this is what the dashboard noticed. A remembered value fills in only
what neither a flag nor a config file set, so the dashboard starts from the profile, and a
headless run never reads this file at all. No Textual here.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Collection
from dataclasses import asdict, dataclass
from pathlib import Path

import msgspec

from spectui import file_kinds, paths, storage
from spectui.config import RunConfig
from spectui.errors import SpectuiError

_MAGIC = "spectui-dashboard-state"
KIND = file_kinds.json_kind("dashboard state", lambda doc: isinstance(doc, dict) and doc.get("kind") == _MAGIC)
#: The options whose values the dashboard remembers (their long names, as in the config files).
REMEMBERED = ("theme", "k", "mode")


@dataclass(frozen=True)
class Remembered:
    theme: str | None = None
    k: int | None = None
    mode: str | None = None


def load(path: Path | None = None) -> Remembered:
    """The state file's values; nothing remembered when it is missing or unreadable (it is
    only a convenience: a damaged one is written over by the next change)."""
    path = path or paths.dashboard_state_file()
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Remembered()
    if not isinstance(doc, dict) or doc.get("kind") != _MAGIC:
        return Remembered()
    theme, k, mode = doc.get("theme"), doc.get("k"), doc.get("mode")
    return Remembered(
        theme=theme if isinstance(theme, str) else None,
        k=k if isinstance(k, int) and not isinstance(k, bool) else None,
        mode=mode if mode in ("ar", "spec") else None,
    )


def remember(*, theme: str | None = None, k: int | None = None, mode: str | None = None, path: Path | None = None) -> None:
    """Keep what is given (None: as remembered already). A file that cannot be written is said
    in one warning line: the dashboard goes on."""
    path = path or paths.dashboard_state_file()
    old = load(path)
    state = Remembered(theme=theme or old.theme, k=old.k if k is None else k, mode=mode or old.mode)
    try:
        storage.write_atomic(path, json.dumps({"kind": _MAGIC, **asdict(state)}, indent=1) + "\n", KIND, own_dir=False)
    except (OSError, SpectuiError) as exc:
        warnings.warn(f"spectui: the dashboard's state was not kept ({path}): {exc}", storage.StorageNotice, stacklevel=2)


@dataclass(frozen=True)
class Memory:
    """The dashboard's hold on the state file: ``keep`` writes when ``enabled`` (``spectui``'s
    dashboard) and does nothing otherwise (tests, benchmarks, replays)."""

    enabled: bool = False
    path: Path | None = None

    def keep(self, *, theme: str | None = None, k: int | None = None, mode: str | None = None) -> None:
        if self.enabled:
            remember(theme=theme, k=k, mode=mode, path=self.path)


def restore(config: RunConfig, theme: str | None, *, set_elsewhere: Collection[str], path: Path | None = None) -> tuple[RunConfig, str | None]:
    """``config`` and ``theme`` with the remembered values filling in what neither a flag nor
    a config file set (``set_elsewhere``: the option names those did set)."""
    state = load(path)
    if state.theme and theme is None and "theme" not in set_elsewhere:
        theme = state.theme
    if state.mode and "mode" not in set_elsewhere:
        config = msgspec.structs.replace(config, mode=state.mode)
    fixed = config.draft.fixed_k
    if state.k is not None and "k" not in set_elsewhere and fixed is not None:  # a fixed K's (+/-)
        config = msgspec.structs.replace(config, draft=config.draft.stepped(state.k - fixed))
    return config, theme
