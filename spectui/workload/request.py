"""One request of a workload: the configuration it runs with, the engine it runs on tagged with
its load (so that its recording says where it ran, and is judged by ``spectui diff`` as the
workload judges it), and what came of it, read from its events. ``run.WorkloadRun`` sends the
requests; this module knows nothing of levels, servers or pairing."""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator

import msgspec

from spectui.config import RunConfig
from spectui.recording.schema import BatchNoise, End, Event, Header, LoadTag, Prefill, Step
from spectui.sessions.protocol import EngineProtocol
from spectui.workload.result import NAN, RequestOutcome
from spectui.workload.source import WorkRequest


def request_config(base: RunConfig, r: WorkRequest, workload: str, keep_sampling: bool) -> RunConfig:
    """The configuration one request runs with: the setting's, with the request's text."""
    sampling = r.sampling if keep_sampling and r.sampling is not None else base.sampling
    return msgspec.structs.replace(
        base, prompt=r.prompt, system=r.system, history=r.history, chat=r.chat, max_tokens=r.max_tokens, sampling=sampling,
        prompt_name=f"{workload}#{r.index}", prompt_tier="workload", prompt_check="", conversation="",
    )


class TaggedEngine:
    """An engine whose sessions' headers carry the request's ``LoadTag`` and, where the engine
    records none (a server), the batch-noise calibration its partings are judged against, so
    that ``spectui diff`` of its recording judges it as the workload does (the rest is the
    engine's own)."""

    def __init__(self, engine: EngineProtocol, tag: LoadTag, noise: BatchNoise | None = None) -> None:
        self.engine, self.tag, self.noise = engine, tag, noise
        self.config = engine.config

    def run(self, config: RunConfig | None = None, *, stop: threading.Event | None = None) -> Generator[Event, None, None]:
        events = self.engine.run(config, stop=stop)
        try:
            header = next(events)
            assert type(header) is Header
            yield msgspec.structs.replace(header, load=self.tag, batch_noise=header.batch_noise or self.noise)
            yield from events
        finally:
            events.close()

    def check(self, config: RunConfig) -> None:
        self.engine.check(config)

    def fits(self, config: RunConfig) -> bool:
        return self.engine.fits(config)

    def calibrate(self, config: RunConfig, *, before: Callable[[], object] | None = None) -> BatchNoise | None:
        return self.engine.calibrate(config, before=before)

    def close(self) -> None:
        """The engine outlives the request: the workload closes it."""

    def __enter__(self) -> TaggedEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def outcome_of(events: list[Event], r: WorkRequest, tag: LoadTag, recording: str) -> RequestOutcome:
    head = events[0] if events and type(events[0]) is Header else None
    recorded = head.load if head is not None and head.load is not None else tag
    # the embedded engine's queue (recorded in the header's tag): its session's clock starts after
    # the wait, a server's when the request is sent, so its times move by the wait
    waited = max(0.0, recorded.queue_ms - tag.queue_ms)
    out = RequestOutcome(index=r.index, pass_no=tag.pass_no, client=tag.client, recording=recording, queue_ms=recorded.queue_ms)
    prefill: Prefill | None = None
    drafted = accepted = 0
    for ev in events:
        if type(ev) is Prefill:
            prefill = ev
        elif type(ev) is Step:
            out.tokens += ev.tokens
            out.token_ms += [t / 1000 + waited for t in ev.t_us]
            drafted, accepted = drafted + max(ev.drafted, 0), accepted + max(ev.accepted, 0)
        elif type(ev) is End:
            out.reason, out.error = ev.reason, ev.error
            if ev.server is not None:
                drafted, accepted = ev.server.drafted, ev.server.accepted
    out.n_tokens = len(out.tokens)
    out.drafted, out.accepted = drafted, accepted
    if out.token_ms:
        out.ttft_ms, out.latency_ms = out.token_ms[0], out.token_ms[-1]
        span_s = (out.token_ms[-1] - out.token_ms[0]) / 1000
        out.decode_tok_s = (out.n_tokens - 1) / span_s if out.n_tokens > 1 and span_s > 0 else NAN
        if prefill is not None and "llama-server" in prefill.source and not tag.queue_ms:
            # the server's own prompt time out of the client's wait: what is left is the queue
            out.queue_ms = max(0.0, out.ttft_ms - prefill.us / 1000)
    return out
