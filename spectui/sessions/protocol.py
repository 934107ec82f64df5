"""``EngineProtocol``: what the layers above ask of any engine.

Three implementations, none importing another: ``spectui.engine.embedded.Engine`` (models
loaded into this process, llama.cpp or MLX), ``spectui.server.engine.ServerEngine`` (a
running OpenAI-compatible server) and ``spectui.remote.engine.RemoteEngine`` (either of them on
a node). ``spectui.sessions.open.open_engine`` picks one. (The protocol is not called
``Engine``: that name is the embedded engine's, the one class that loads models here.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from typing import Protocol, runtime_checkable

from spectui.config import RunConfig
from spectui.recording.schema import BatchNoise, Event


@runtime_checkable
class EngineProtocol(Protocol):
    """A loaded engine: runs configurations into the one event stream."""

    #: The configuration it was loaded for (its target, backend and draft model).
    config: RunConfig

    def run(self, config: RunConfig | None = None, *, stop: threading.Event | None = None) -> Generator[Event, None, None]:
        """Yield ``Header``, ``Prefill``, ``Step``..., ``End`` (memory samples between them).

        Bad input (a prompt too long for the context, say) raises ``SpectuiError`` before the
        first event; a failure once running becomes ``End(reason="error")``, so a recording
        always ends with a record saying how. ``stop`` ends the run after the current step
        (``End(reason="interrupted")``)."""
        ...

    def check(self, config: RunConfig) -> None:
        """Raise ``SpectuiError`` (one line) if ``config`` cannot run on this engine; nothing
        runs. Lets a many-run command refuse bad input before its first run, not an hour in."""
        ...

    def fits(self, config: RunConfig) -> bool:
        """Whether ``config`` runs on this engine as loaded (same target and backend, and the
        draft model it asks for), so a caller may reuse it instead of loading again."""
        ...

    def calibrate(self, config: RunConfig, *, before: Callable[[], object] | None = None) -> BatchNoise | None:
        """The batch-shape noise a greedy run of ``config`` will be judged against, measured
        now if nothing cached covers it (``before`` is called first: it can take seconds), so
        the run itself starts at once; None where the engine calibrates nothing (a server, a
        sampled run)."""
        ...

    def close(self) -> None:
        """Free the models (or connections); the engine is unusable afterwards."""
        ...

    def __enter__(self) -> EngineProtocol: ...

    def __exit__(self, *exc: object) -> None: ...
