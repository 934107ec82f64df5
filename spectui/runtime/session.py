"""``RuntimeEngine``: a runtime spectui starts for one configuration, measured as any server
is, and stopped when the engine closes (``--runtime llama-server``, ``--runtime mlx-lm``).

llama-server takes its speculative settings on the command line only (the request-level
fields are compiled out in the vendored revision), so one server runs one setting: an AR run
gets a server without speculation, a speculative run a server with its method, and
``fits`` tells the engine cache (``spectui.sessions.open.EngineCache``) when a configuration
needs a server of its own. A compare therefore runs AR and the method on two servers, one
after the other, over the same GGUF file the embedded engine would run (``host.weights``), so
embedded and runtime runs of one target compare on the same weights. mlx_lm.server
(``spectui.runtime.mlx_lm_server``) likewise runs one setting per server: its draft model and
draft length are given at start.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator

from spectui.config import RunConfig
from spectui.drafting import RUNTIME_PREFIX, Runtime
from spectui.engine.host.weights import resolve_target
from spectui.errors import SpectuiError
from spectui.models.heads import read_head
from spectui.recording.schema import BatchNoise, Event, HeadArtifacts, Header
from spectui.runtime import mlx_lm_server as mlx
from spectui.runtime.build import find_server
from spectui.runtime.cmake import BuildError
from spectui.runtime.engine import runtime_engine
from spectui.runtime.llama_server import LaunchSettings, launch
from spectui.runtime.methods import RuntimeMethod
from spectui.runtime.server import RuntimeServer, start
from spectui.server.engine import ServerEngine


def method_of(config: RunConfig) -> RuntimeMethod:
    """The runtime method a configuration runs: none for AR, else ``--draft runtime:METHOD``
    with spectui's K (when one was fixed) and p-min mapped onto the flags it reads."""
    d = config.draft.drafter
    if config.mode == "ar":
        return RuntimeMethod(("none",))
    if not isinstance(d, Runtime):
        raise SpectuiError(f"llama-server drafts with its own methods (--draft {RUNTIME_PREFIX}METHOD), not --draft {config.draft.flag}")
    return RuntimeMethod.parse(d.method, k=config.draft.fixed_k, p_min=d.p_min or None, draft_model=d.draft_model or None,
                               lookup=d.lookup or None, n_min=d.n_min if d.n_min >= 0 else None)


def launch_settings(config: RunConfig, *, parallel: int = 1) -> LaunchSettings:
    """The server ``config`` runs on; ``parallel``: its slots (clients served at once)."""
    b = config.backend
    method = method_of(config)  # a bad method is refused before the target's weights are probed
    model = resolve_target(config.target, b).path
    return LaunchSettings(
        model=model, method=method, threads=b.n_threads, ctx=b.n_ctx, flash_attn=b.flash_attn,
        gpu_layers=b.n_gpu_layers, parallel=parallel,
    )


class RuntimeEngine:
    """A started runtime and the server engine that measures it."""

    def __init__(self, config: RunConfig, server: RuntimeServer, inner: ServerEngine,
                 settings: LaunchSettings | mlx.MlxLaunch) -> None:
        self.config = config
        self.server = server
        self.inner = inner
        self.settings = settings
        self.draft_model = None  # the runtime drafts: spectui loads no model
        #: the trained head it runs (EAGLE-3, DFlash, DSpark), for the header; None: no head
        self.head: HeadArtifacts | None = None
        if isinstance(settings, LaunchSettings) and settings.method.draft_model:
            head = read_head(settings.method.draft_model)
            self.head = head.artifacts() if head is not None else None

    @classmethod
    def load(cls, config: RunConfig, *, recording: str | None = None, parallel: int = 1) -> RuntimeEngine:
        """Find (or build, once) the runtime, refuse what cannot work from the model files,
        start it and probe it; ``parallel``: llama-server's slots. Every failure is one line."""
        config.validate()
        if config.backend.name == "mlx-lm":
            return cls._load_mlx(config, recording)
        settings = launch_settings(config, parallel=parallel)
        if settings.method.uses_draft_model:  # a draft or head that cannot work: refused before a binary is found or built
            settings.method.check(settings.model)
        try:
            binary = find_server(config.backend.runtime_binary or None)
        except BuildError as exc:
            raise SpectuiError(str(exc)) from None
        server = launch(binary, settings, recording=recording)
        try:
            inner = runtime_engine(server, config, method=settings.method.describe())
        except BaseException:
            server.stop()
            raise
        return cls(config, server, inner, settings)

    @classmethod
    def _load_mlx(cls, config: RunConfig, recording: str | None) -> RuntimeEngine:
        settings = mlx.prepare(config)
        server = start(mlx.MlxLmServer(settings), recording=recording)
        try:
            inner = mlx.mlx_engine(server, config, settings)
        except BaseException:
            server.stop()
            raise
        return cls(config, server, inner, settings)

    def fits(self, config: RunConfig) -> bool:
        """The same runtime and the same launch settings: one server per setting."""
        if config.backend != self.config.backend:
            return False
        if isinstance(self.settings, mlx.MlxLaunch):  # compared without exporting anything
            return config.target == self.config.target and mlx.method_of(config) == self.settings.method
        return launch_settings(config, parallel=self.settings.parallel) == self.settings

    def check(self, config: RunConfig) -> None:
        config.validate()
        if config.backend.name == "mlx-lm":
            mlx.check(config)
            return
        method_of(config).check(launch_settings(config).model)

    def calibrate(self, config: RunConfig, *, before: Callable[[], object] | None = None) -> BatchNoise | None:
        return None  # a runtime's kernels cannot be driven block by block from here

    def run(self, config: RunConfig | None = None, *, stop: threading.Event | None = None,
            memory_interval_s: float | None = None) -> Generator[Event, None, None]:
        config = config or self.config
        if not self.fits(config):
            raise SpectuiError("this runtime was started for other settings; open an engine for these")
        if self.server.refused:  # the guard stopped it: it listened beyond this machine
            raise SpectuiError(self.server.refused)
        events = _with_head(self.inner.run(config, stop=stop), self.head)
        try:
            yield from mlx.say_no_acceptance(events) if isinstance(self.settings, mlx.MlxLaunch) else events
        except Exception:
            if self.server.refused:  # stopped mid-run: say why, not that the connection dropped
                raise SpectuiError(self.server.refused) from None
            raise

    def close(self) -> None:
        self.server.stop()

    def __enter__(self) -> RuntimeEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _with_head(events: Generator[Event, None, None], head: HeadArtifacts | None) -> Generator[Event, None, None]:
    """The run's events, its header saying which head ran."""
    for event in events:
        if head is not None and isinstance(event, Header):
            event.artifacts.head = head
        yield event
