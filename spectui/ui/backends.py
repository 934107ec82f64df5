"""The dashboard's engine switch (``x``): the embedded backends in the registry's order
(``spectui.engine.backends``: llama.cpp, MLX), then the runtimes spectui starts
(``config.RUNTIMES``: llama-server, mlx-lm), and round again. No Textual.

An engine that cannot run here is skipped with one line saying why, never a failed run: an
embedded backend whose library is missing (``BackendKind.availability``), a llama-server that
is neither given, on ``$PATH`` nor built (building takes minutes: ``spectui runtime build``
does it, the switch does not), mlx_lm.server without MLX, or a setting the runtime cannot take
(``RunConfig.validate``'s line).

A runtime drafts with its own methods, so the switch carries the drafting across: spectui's
model-free drafters become the runtime's n-gram method (llama-server's default, ngram-mod), a
draft model becomes the runtime's draft-model method with the same file, a fixed K stays that
K and a cost-aware K becomes the runtime's own. The embedded drafting is kept while a runtime
runs and comes back when the switch returns to an embedded backend. A trained head (EAGLE-3,
DFlash, DSpark: ``spectui.models.heads``) drafts only inside llama-server: an embedded backend
gets spectui's default drafter instead, and llama-server gets the head back with its method.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from spectui.config import RUNTIME_METHODS, RUNTIMES, BackendConfig, RunConfig
from spectui.drafting import DraftConfig, Model, Runtime
from spectui.engine.backends import backend_kind, backend_names
from spectui.errors import SpectuiError
from spectui.models.heads import is_head_file
from spectui.ui.labels import backend_label


def llama_server_missing(backend: BackendConfig) -> str:
    """Why no llama-server can start now ("" where one can): found without building one."""
    from spectui.runtime.build import find_server
    from spectui.runtime.cmake import BuildError

    try:
        find_server(backend.runtime_binary or None, build=False)
    except BuildError as exc:
        return str(exc)
    return ""


def mlx_lm_missing(_backend: BackendConfig) -> str:
    try:
        from spectui.runtime.mlx_lm_server import missing
    except ImportError:  # a spectui without that runtime
        return "this spectui does not start mlx_lm.server"
    return missing()


#: per runtime: why it cannot start here ("" where it can)
RUNTIME_AVAILABILITY: dict[str, Callable[[BackendConfig], str]] = {"llama-server": llama_server_missing, "mlx-lm": mlx_lm_missing}


def engine_names() -> list[str]:
    """What ``x`` cycles through, in order."""
    embedded = backend_names()
    return embedded + [r for r in RUNTIMES if r not in embedded]


def engine_label(config: RunConfig) -> str:
    """``llama.cpp``, ``MLX``, ``llama-server (ngram-mod)``: the engine and a runtime's method."""
    method = f" ({config.draft.runtime_method})" if config.backend.is_runtime and config.draft.is_runtime else ""
    return backend_label(config.backend.name) + method


def _embedded_draft(draft: DraftConfig) -> DraftConfig:
    """The embedded drafting a runtime's maps back to: its draft model, else spectui's default
    drafter as the flags make it (cost-aware)."""
    if not draft.is_runtime:
        return draft
    model = draft.drafter.draft_model if isinstance(draft.drafter, Runtime) else ""
    if model and is_head_file(model):  # no embedded backend runs a head
        model = ""
    return DraftConfig().drafting_with(Model(path=model) if model else DraftConfig().drafter, fixed_k=draft.fixed_k)


class BackendCycle:
    """The next engine for ``x``, and the drafting each kind of engine keeps."""

    def __init__(self, config: RunConfig) -> None:
        self.embedded_draft = _embedded_draft(config.draft)
        #: a llama-server method with a trained head, kept for when the switch comes back to it
        d = config.draft.drafter
        self.head_draft = config.draft if isinstance(d, Runtime) and d.draft_model and is_head_file(d.draft_model) else None
        self.binary = config.backend.runtime_binary  # ``--llama-server PATH``: llama-server's only

    def next(self, config: RunConfig) -> tuple[RunConfig | None, list[str]]:
        """The configuration of the next engine that can run here (None: no other can), and a
        line for each one skipped on the way."""
        if not config.backend.is_runtime:
            self.embedded_draft = config.draft
        names = engine_names()
        at = names.index(config.backend.name) if config.backend.name in names else -1
        skipped = []
        for step in range(1, len(names)):
            name = names[(at + step) % len(names)]
            try:
                candidate = self.config_for(config, name)
            except SpectuiError as exc:
                skipped.append(f"{backend_label(name)} skipped: {exc}")
                continue
            return candidate, skipped
        return None, skipped

    def config_for(self, config: RunConfig, name: str) -> RunConfig:
        """``config`` on engine ``name``; ``SpectuiError`` (one line) where it cannot run here."""
        backend = msgspec.structs.replace(config.backend, name=name, runtime_binary=self.binary if name == "llama-server" else "")
        if name in RUNTIMES:
            check = RUNTIME_AVAILABILITY.get(name)
            why = check(backend) if check is not None else ""
            draft = self.runtime_draft(name, config.mode)
        else:
            backend_kind(name).require()
            why, draft = "", self.embedded_draft
        if why:
            raise SpectuiError(why)
        candidate = msgspec.structs.replace(config, backend=backend, draft=draft)
        candidate.validate()
        return candidate

    def runtime_draft(self, name: str, mode: str) -> DraftConfig:
        """The embedded drafting as runtime ``name``'s method (see the module docstring)."""
        d = self.embedded_draft
        if name == "llama-server" and self.head_draft is not None and mode == "spec":
            return self.head_draft
        free, with_model = RUNTIME_METHODS.get(name, ("", ""))
        method, draft_model = (with_model, d.flag) if d.has_model else (free, "")
        if not method and mode == "spec":
            raise SpectuiError(f"{name} drafts only with a draft model: choose one first (--draft MODEL)"
                               if with_model else f"spectui knows no method of {name} for this drafting")
        method = method or with_model or free
        if not method:  # AR on a runtime spectui knows no method of: the drafting stays as it is
            return d
        # a cost-aware K is spectui's own: the runtime keeps its own K
        draft = d.drafting_with(Runtime(method=method), fixed_k=d.fixed_k, chain="")
        assert isinstance(draft.drafter, Runtime)
        return msgspec.structs.replace(draft, drafter=msgspec.structs.replace(draft.drafter, draft_model=draft_model))
