"""Opening each setting's engine for a workload, kept up until the workload ends.

* **llama-server**: a ``RuntimeEngine`` with ``slots`` slots (``-np``), its log in the setting's
  folder. Its requests go through the server engine with the per-request ``/metrics`` reading
  off: with several clients in flight a counter's change across one request is every request's,
  so the workload reads the counters around each level instead (``metrics_reading``); each
  request's own ``timings.draft_n`` stays per request.
* **a server spectui did not start** (``--server URL``): the same; on this machine, the process
  behind its port is found as the watch finds it, for its CPU and memory.
* **embedded**: the engine loaded in this process (one request at a time; the workload queues).
* **from several nodes** (``--hosts``, a server's setting): ``Spread``, one node stream per client.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Generator, Sequence
from pathlib import Path

from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.recording.schema import BatchNoise, Event
from spectui.server.engine import ServerEngine
from spectui.server.probe import read_metrics
from spectui.sessions.protocol import EngineProtocol
from spectui.watch.process import find_listener
from spectui.workload.plan import EMBEDDED, LLAMA_SERVER, SERVER, Setting

PER_LEVEL = "read around each level by the workload: with several requests in flight, a change across one request is everyone's"


class _Served:
    """A server's requests for a workload: ``run`` per request (any thread), the counters,
    and ``close`` (which stops a server spectui started)."""

    def __init__(self, inner: ServerEngine, close: Callable[[], object] = lambda: None) -> None:
        info = dataclasses.replace(inner.info, metrics=False, metrics_note=PER_LEVEL if inner.info.metrics else inner.info.metrics_note)
        self.engine = ServerEngine(inner.config, inner.client, info, inner.vocab, logprobs=inner.logprobs)
        self._metrics = inner.info.metrics
        self._close = close
        self.config = inner.config

    def run(self, config: RunConfig | None = None, *, stop: threading.Event | None = None) -> Generator[Event, None, None]:
        return self.engine.run(config, stop=stop)

    def metrics_reading(self) -> dict[str, float]:
        return read_metrics(self.engine.client) if self._metrics else {}

    def fits(self, config: RunConfig) -> bool:
        return True

    def check(self, config: RunConfig) -> None:
        self.engine.check(config)

    def calibrate(self, config: RunConfig, *, before: Callable[[], object] | None = None) -> BatchNoise | None:
        return None

    def close(self) -> None:
        self._close()

    def __enter__(self) -> _Served:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Spread:
    """A setting's load sent from several nodes (``--hosts``): client ``i`` sends through its own
    engine on node ``i`` mod the nodes (a node's channel carries one stream at a time), each
    request recorded here as every ``--host`` run is. The server's counters are read from here
    where its URL answers here too."""

    def __init__(self, engines: list[EngineProtocol], counters: _Served | None) -> None:
        self.engines = engines
        self.config = engines[0].config
        self._counters = counters

    def for_client(self, client: int) -> EngineProtocol:
        return self.engines[client % len(self.engines)]

    def run(self, config: RunConfig | None = None, *, stop: threading.Event | None = None) -> Generator[Event, None, None]:
        return self.engines[0].run(config, stop=stop)

    def metrics_reading(self) -> dict[str, float]:
        return self._counters.metrics_reading() if self._counters is not None else {}

    def fits(self, config: RunConfig) -> bool:
        return True

    def check(self, config: RunConfig) -> None:
        self.engines[0].check(config)

    def calibrate(self, config: RunConfig, *, before: Callable[[], object] | None = None) -> BatchNoise | None:
        return None

    def close(self) -> None:
        for engine in self.engines:
            engine.close()

    def __enter__(self) -> Spread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_spread(setting: Setting, slots: int, hosts: Sequence[str]) -> Spread:
    """``slots`` engines over ``hosts`` in turn, each one a node's stream to the server."""
    from spectui.sessions.open import open_engine

    engines: list[EngineProtocol] = []
    try:
        for i in range(slots):
            engines.append(open_engine(setting.config, host=hosts[i % len(hosts)]))
        try:
            counters: _Served | None = _Served(ServerEngine.load(setting.config))
        except SpectuiError:  # the server answers the nodes, not this machine: the requests' own counts
            counters = None
        return Spread(engines, counters)
    except BaseException:
        for engine in engines:
            engine.close()
        raise


def open_setting(setting: Setting, slots: int, folder: Path, hosts: Sequence[str] = ()) -> tuple[EngineProtocol, int | None, Callable[[], str]]:
    """(engine, the server's pid or None, why it no longer serves or ""); ``hosts``: the nodes
    that send the load (a server's setting only)."""
    config = setting.config
    if hosts:
        if setting.family != SERVER:
            raise SpectuiError("--hosts sends the load from several nodes to one server: name it with --server URL")
        return open_spread(setting, slots, hosts), None, lambda: ""
    if setting.family == EMBEDDED:
        from spectui.sessions.open import open_engine

        return open_engine(config), None, lambda: ""
    if setting.family == LLAMA_SERVER:
        from spectui.runtime.session import RuntimeEngine

        runtime = RuntimeEngine.load(config, recording=str(folder / "server.spectui"), parallel=slots)
        server = runtime.server

        def alive() -> str:
            if server.refused:
                return server.refused
            return "" if server.running else f"llama-server exited ({server.last_log_line()})"

        try:
            served = _Served(runtime.inner, runtime.close)
        except BaseException:
            runtime.close()
            raise
        return served, server.pid, alive
    inner = ServerEngine.load(config)
    client = inner.client

    def reachable() -> str:
        try:
            return "" if client.get("/health", timeout_s=5.0).status < 500 else "the server answers /health with an error"
        except Exception as exc:  # noqa: BLE001 - any failure to reach it is the answer
            return f"the server no longer answers ({exc})"

    # a server on this machine: the process behind its port, as the watch finds it (its CPU and memory)
    pid = find_listener(client.url.port).pid if client.url.loopback else None
    return _Served(inner), pid, reachable


def embedded_noise(setting: Setting, reach: int) -> BatchNoise | None:
    """The batch-shape noise a greedy parting of ``setting`` is judged against: the llama.cpp
    calibration of the same GGUF at the same threads and flash attention (llama-server runs the
    same ggml kernels: it is built from the llama.cpp llama-cpp-python vendors, and by default
    linked to its libraries), with what a neighbouring request in the batch moves (a request
    under load shares the server's batch with the others). None for a server spectui did not
    start (its kernels are unknown)."""
    if setting.family not in (EMBEDDED, LLAMA_SERVER) or setting.config.backend.name not in ("llamacpp", "llama-server"):
        return None
    import msgspec

    from spectui.drafting import DraftConfig
    from spectui.engine.embedded import Engine

    backend = msgspec.structs.replace(setting.config.backend, name="llamacpp", runtime_binary="")
    # AR: the drafting is inert; the default is valid on every engine, a runtime's method is not
    config = msgspec.structs.replace(setting.config, mode="ar", backend=backend, draft=DraftConfig())
    try:
        with Engine.load(config) as engine:
            return engine.calibrate(config, prompt_tokens=max(reach - config.max_tokens, 1), beside=setting.family == LLAMA_SERVER)
    except SpectuiError:
        return None
