"""Backends: one model and its KV cache behind ``protocol.Backend`` (llama.cpp, MLX), and the
registry that names them.

A backend kind is found by the name a run's ``BackendConfig.name`` gives; its opener loads
the target (and a draft model) for a configuration and is named as ``"module:function"``, not
imported, so that a backend's library (llama.cpp, mlx) loads only for runs that ask for it.
What differs between backends once loaded is a method of the backend (``second_context``,
``batch_invariant_settings``), never a type check elsewhere.

May import ``spectui.engine.protocol`` and the layers below the engine; never the drafters,
the loop or the host measurements (their sibling parts above or beside it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spectui.errors import SpectuiError

if TYPE_CHECKING:
    from spectui.config import RunConfig
    from spectui.engine.protocol import Backend


@dataclass(frozen=True)
class Opened:
    """What an opener loaded: the target, the draft model where the run drafts with one, and
    how spectui made the target's file when it did (a requantized copy: its origin)."""

    target: Backend
    draft_model: Backend | None = None
    target_origin: str = ""


@dataclass(frozen=True)
class BackendKind:
    #: the ``--backend`` value and ``BackendConfig.name``
    name: str
    #: how screens and reports name it
    label: str
    #: ``"module:function"``: ``function(config) -> Opened``, which refuses bad input in one
    #: line (``SpectuiError``) before a model loads
    opener: str
    #: ``"module:function"`` returning "" where the backend can run here, else why not; "": always
    availability: str = ""

    def open(self, config: RunConfig) -> Opened:
        self.require()
        opened: Opened = _resolve(self.opener)(config)
        return opened

    def require(self) -> None:
        why: str = _resolve(self.availability)() if self.availability else ""
        if why:
            raise SpectuiError(why)


def _resolve(ref: str) -> Callable[..., Any]:
    module, _, name = ref.partition(":")
    found: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return found


_KINDS: dict[str, BackendKind] = {}


def register(kind: BackendKind) -> BackendKind:
    """Add (or replace) a backend kind: ``--backend NAME`` and the dashboard's backend switch
    (``x``) offer it from then on."""
    _KINDS[kind.name] = kind
    return kind


def backend_kind(name: str) -> BackendKind:
    try:
        return _KINDS[name]
    except KeyError:
        raise SpectuiError(f"the embedded engine runs {' or '.join(_KINDS)}, not {name!r}") from None


def backend_names() -> list[str]:
    return list(_KINDS)


register(BackendKind("llamacpp", "llama.cpp", "spectui.engine.openers:open_llamacpp"))
register(BackendKind("mlx", "MLX", "spectui.engine.openers:open_mlx", "spectui.engine.openers:mlx_missing"))
