"""Choosing and keeping an engine: the one place that knows both kinds."""

from __future__ import annotations

from collections.abc import Callable

from spectui.config import RunConfig
from spectui.sessions.protocol import EngineProtocol

EngineFactory = Callable[[RunConfig], EngineProtocol]


def open_engine(config: RunConfig, *, host: str | None = None, recording: str | None = None) -> EngineProtocol:
    """The engine ``config`` asks for: a running server (``--server URL``), a runtime spectui
    starts (``--runtime llama-server``) or models loaded here (llama.cpp or MLX), or either of them on a node reached over SSH (``host``,
    ``spectui.remote``). Every check that can fail on bad input runs here, before
    anything decodes. Each is imported on use: llama.cpp, MLX, HTTP or SSH load only when asked.
    ``recording``: the file the session will be recorded to, when named already (a runtime's
    server log is kept beside it)."""
    if host:
        from spectui.remote.engine import RemoteEngine

        return RemoteEngine.load(config, host)
    if config.backend.name == "server":
        from spectui.server.engine import ServerEngine

        return ServerEngine.load(config)
    if config.backend.is_runtime:
        from spectui.runtime.session import RuntimeEngine

        return RuntimeEngine.load(config, recording=recording)
    from spectui.engine.embedded import Engine as EmbeddedEngine

    return EmbeddedEngine.load(config)


class EngineCache:
    """One loaded engine, reused while configurations fit it (``EngineProtocol.fits``).

    Another setup closes it before the next load, so two sets of weights never sit in memory
    at once. An engine with a draft model also runs the AR and n-gram configurations of the
    same target, so a sweep over AR, n-gram and one draft model loads the draft model once.
    """

    def __init__(self, factory: EngineFactory | None = None) -> None:
        self._factory = factory or open_engine
        self.engine: EngineProtocol | None = None
        #: engines loaded so far: reuse shows as a count that stays put
        self.loads = 0

    def get(self, config: RunConfig, *, before_load: Callable[[], object] | None = None) -> EngineProtocol:
        """An engine that runs ``config``; ``before_load`` is called when one must be loaded."""
        if self.engine is not None and self.engine.fits(config):
            return self.engine
        self.close()
        if before_load is not None:
            before_load()
        self.engine = self._factory(config)
        self.loads += 1
        return self.engine

    def close(self) -> None:
        if self.engine is not None:
            engine, self.engine = self.engine, None
            engine.close()
