"""``RemoteEngine``: the ``EngineProtocol`` surface over an engine loaded on a node.

``load`` connects (``spectui.remote.ssh``: the handshake refuses another spectui in one line)
and asks the node to load the models of the configuration, model paths and catalogue names
being the node's. ``run`` sends the configuration and yields the node's events as they arrive,
the header marked with the node's name; the recorder, metrics, diff and the dashboard take them
as they take a local run's. The header's host facts, fingerprints and memory samples are the
node's own, measured there.

A connection lost mid-run ends the run with what arrived and ``End(reason="interrupted")``
whose ``error`` says the link was lost: the recording is complete and readable, marked cut
short (the CLI exits 1 for such an end). The node's process ends with the connection
(``spectui.remote.node``), so no engine is left running there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterator

import msgspec

from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.recording.schema import BatchNoise, End, Event, Header, MemorySample, PolicyChange, Prefill, Step
from spectui.remote.ssh import NodeChannel
from spectui.remote.wire import BrokenStream, Hello, Reply, Request

#: How often a run checks its stop event to pass it on to the node.
_STOP_POLL_S = 0.1


class RemoteEngine:
    """An engine loaded on ``host`` (an ``ssh`` destination), driven over one SSH channel."""

    draft_model = None  # the models live on the node

    def __init__(self, config: RunConfig, channel: NodeChannel) -> None:
        self.config = config
        self.channel = channel
        self.node = channel.host
        self._lost = ""  # why the channel ended, once it did
        self._running = False  # one run at a time: the channel carries one stream

    @classmethod
    def load(cls, config: RunConfig, host: str) -> RemoteEngine:
        channel = NodeChannel.connect(host)
        engine = cls(config, channel)
        try:
            engine._ask(Request(op="open", config=config))
        except BaseException:
            channel.close()
            raise
        return engine

    @property
    def hello(self) -> Hello:
        return self.channel.hello

    def _ask(self, request: Request) -> Reply:
        """Send a request that runs nothing and wait for its reply; a refusal is one line."""
        self._check_alive()
        if not self.channel.send(request):
            raise SpectuiError(self._lose())
        try:
            record = self.channel.reader.next()
        except BrokenStream as exc:
            raise SpectuiError(self._lose(str(exc))) from None
        if record is None:
            raise SpectuiError(self._lose())
        if not isinstance(record, Reply):
            raise SpectuiError(self._lose(f"a {type(record).__name__} record where a reply was due"))
        if not record.ok:
            raise SpectuiError(f"on node {self.node}: {record.error}")
        return record

    def _check_alive(self) -> None:
        if self._lost:
            raise SpectuiError(f"the connection to node {self.node} is closed ({self._lost})")

    def _lose(self, why: str = "") -> str:
        """Mark the channel gone; the one line that says so."""
        if not self._lost:
            self._lost = why or self.channel.lost()
            self.channel.close()
        return f"the connection to node {self.node} was lost: {self._lost}"

    def check(self, config: RunConfig) -> None:
        self._ask(Request(op="check", config=config))

    def fits(self, config: RunConfig) -> bool:
        if self._lost:
            return False
        return self._ask(Request(op="fits", config=config)).fits

    def calibrate(self, config: RunConfig, *, before: Callable[[], object] | None = None) -> BatchNoise | None:
        if before is not None:
            before()
        return self._ask(Request(op="calibrate", config=config)).batch_noise

    def run(self, config: RunConfig | None = None, *, stop: threading.Event | None = None) -> Generator[Event, None, None]:
        config = config or self.config
        self._check_alive()
        if self._running:
            raise SpectuiError(f"node {self.node} runs one session at a time (interleaved sessions need engines here)")
        self._running = True
        try:
            yield from self._run(config, stop)
        finally:
            self._running = False

    def _run(self, config: RunConfig, stop: threading.Event | None) -> Iterator[Event]:
        if not self.channel.send(Request(op="run", config=config)):
            raise SpectuiError(self._lose())
        finished = threading.Event()
        if stop is not None:
            threading.Thread(target=self._pass_stop, args=(stop, finished), name="spectui-remote-stop", daemon=True).start()
        last_t, n_tokens, started, ended = 0, 0, False, False
        try:
            while True:
                try:
                    record = self.channel.reader.next()
                    why = ""
                except BrokenStream as exc:
                    record, why = None, str(exc)
                if record is None:
                    message = self._lose(why)
                    if not started:  # nothing arrived: no recording is made, as for bad input
                        raise SpectuiError(message)
                    ended = True
                    yield End(t_us=last_t, reason="interrupted", n_tokens=n_tokens, error=message)
                    return
                if isinstance(record, Reply):  # refused before its header (bad input)
                    ended = True
                    raise SpectuiError(f"on node {self.node}: {record.error}")
                if isinstance(record, Header):
                    started = True
                    yield msgspec.structs.replace(record, node=self.node)
                    continue
                if not isinstance(record, (Prefill, Step, MemorySample, PolicyChange, End)):
                    raise SpectuiError(f"node {self.node} sent a {type(record).__name__} record inside a run")
                if type(record) is Step:
                    n_tokens += len(record.tokens)
                    last_t = record.t_us[-1] if record.t_us else last_t
                elif type(record) is MemorySample:
                    last_t = max(last_t, record.t_us)
                if type(record) is End:
                    ended = True
                yield record
                if ended:
                    return
        finally:
            finished.set()
            if not ended and not self._lost:
                self._abandon()

    def _abandon(self) -> None:
        """The caller left a run before its end: stop it on the node and read past its
        remaining records, so the next request's answer is the next thing read."""
        self.channel.send(Request(op="stop"))
        try:
            while (record := self.channel.reader.next()) is not None:
                if isinstance(record, (End, Reply)):
                    return
        except BrokenStream:
            pass
        self._lose()

    def _pass_stop(self, stop: threading.Event, finished: threading.Event) -> None:
        """Tell the node when the local side asks the run to stop (Ctrl-C, the dashboard's stop)."""
        while not finished.is_set():
            if stop.wait(_STOP_POLL_S):
                if not finished.is_set():
                    self.channel.send(Request(op="stop"))
                return

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> RemoteEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
