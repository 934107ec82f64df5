"""The engine side of the dashboard: one long-lived engine thread that runs every session.

``SessionRunner`` owns the app's ``Engine``. Only one thread ever calls into it: the app
starts ``serve`` once, in a Textual thread worker, and it runs the sessions it is handed one
after another (loading the models on the way, reusing them while they stay the same, closing
them at the end). Two reasons for one thread rather than a worker per session:

* Correctness: two runs can never share the llama.cpp context, and no model is used while
  half-loaded or closed under a run, because nothing else touches them.
* Speed: llama.cpp's CPU backend is built with OpenMP, and libgomp keeps a thread team per
  calling thread. Once a second thread has called llama.cpp (a restart landing on another
  pool thread), the process holds more OpenMP threads than cores, libgomp stops spinning
  between parallel regions, and decoding fell to about a third of its speed here (70 -> 23
  tok/s, 2 cores). One engine thread keeps one team.

A session reports through ``post`` (``App.post_message``: thread-safe, never blocks the engine)
and never calls into the UI otherwise. Every event is written to the recording here, on the
engine thread, before it is posted, so the file is complete even if the UI falls behind.
Stopping a session is its ``stop`` event: the engine ends after its current step. A session
stopped before its turn comes is skipped, so a burst of restarts runs only the last one.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.recording.schema import INTERLEAVED_CLOCK, Step
from spectui.recording.timeline import shift_event
from spectui.recording.writer import RecordingWriter
from spectui.ui.messages import Outbox, SessionEvents, SessionFinished, SessionStatus

EngineFactory = Callable[[RunConfig], Any]  # returns an Engine (or a stand-in with .run/.close)

#: How long closing waits for a session to end its current step (or a model load to finish).
CLOSE_TIMEOUT_S = 120.0
#: How often an idle engine thread checks whether it should exit (its app went away).
_POLL_S = 0.25


def _default_factory(config: RunConfig) -> Any:
    from spectui.engine.session import Engine  # llama.cpp loads on first use, not at import

    return Engine.load(config)


def engine_fits(engine: Any, config: RunConfig) -> bool:
    """Whether a loaded engine can run ``config`` without loading models again.

    An engine holds a target (and maybe a draft model); it runs AR and n-gram configs of the
    same target, and model-drafted configs only with the draft model it loaded.
    """
    loaded: RunConfig = engine.config
    if loaded.target != config.target or loaded.backend != config.backend:
        return False
    if config.mode == "spec" and not config.draft.is_ngram:
        return getattr(engine, "draft_model", None) is not None and loaded.draft.source == config.draft.source
    return True


@dataclass
class SessionRequest:
    run_id: int
    config: RunConfig
    stop: threading.Event
    post: Callable[[Any], object]
    #: names the recording file; called on the engine thread right before the file is made,
    #: so runs started within the same second never pick the same free name
    record_to: Callable[[RunConfig], Path] | None = None


@dataclass
class PairRequest:
    """Two sessions interleaved block by block: each runs one decode step in turn, on its own
    engine (the second one is a second load of the same models). Both then see the same
    machine at the same moments, which cancels drift in its load. Each session's clock leaves
    out the time the other one ran: see ``_Stream``."""

    requests: tuple[SessionRequest, SessionRequest]

    @property
    def run_id(self) -> int:
        return self.requests[0].run_id


class _Stream:
    """One session's events on the engine thread: written to its recording first, then put in
    its outbox for the UI. ``pump`` runs the session up to its next decode step.

    Interleaved, a session's generator sits suspended while the other session decodes; that
    time is taken off every timestamp it yields afterwards (``shift_event``), so its numbers
    are its own work, as if it had run alone, and its header says so (``clock``).
    """

    def __init__(self, request: SessionRequest, engine: Any, *, interleaved: bool = False) -> None:
        self.request = request
        self.events = engine.run(request.config, stop=request.stop)
        self.interleaved = interleaved
        self.writer: RecordingWriter | None = None
        self.path: Path | None = None
        self.outbox = Outbox()
        self.error = ""
        self.started = False
        self._away_ns = 0  # time spent suspended while the other session ran
        self._yielded_at: int | None = None

    def _emit(self, ev: Any) -> None:
        if self._away_ns:
            ev = shift_event(ev, self._away_ns // 1000)
        if self.writer is not None:
            self.writer.write(ev)
        if self.outbox.put(ev):
            self.request.post(SessionEvents(self.request.run_id, self.outbox))

    def _start(self, header: Any) -> None:
        # Bad input raises at the first event: no recording file is made for it.
        request = self.request
        if self.interleaved:
            header = msgspec.structs.replace(header, clock=INTERLEAVED_CLOCK)
        if request.record_to is not None:
            self.path = request.record_to(request.config)
            self.writer = RecordingWriter(self.path)
        request.post(SessionStatus(request.run_id, "running", str(self.path or "")))
        self.started = True
        self._emit(header)

    def pump(self) -> bool:
        """Run to the next decode step (or the end); False once the session is over."""
        if self._yielded_at is not None:
            self._away_ns += time.perf_counter_ns() - self._yielded_at
        try:
            for ev in self.events:
                if not self.started:
                    self._start(ev)
                    continue
                self._emit(ev)
                if type(ev) is Step:
                    self._yielded_at = time.perf_counter_ns()
                    return True
        except SpectuiError as exc:  # bad input or disk trouble
            self.error = str(exc)
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        return False

    def finish(self) -> None:
        self.events.close()  # ends the engine's own threads (memory sampler) at once
        if self.writer is not None:
            try:
                self.writer.close()
            except SpectuiError as exc:
                self.error = self.error or str(exc)
        path = self.path if self.writer is not None else None
        self.request.post(SessionFinished(self.request.run_id, path=path, error=self.error))


class SessionRunner:
    def __init__(self, engine_factory: EngineFactory | None = None) -> None:
        self._factory = engine_factory or _default_factory
        self._requests: queue.Queue[SessionRequest | None] = queue.Queue()
        self._lock = threading.Lock()
        self._outstanding = 0  # submitted sessions not finished yet
        self._started = False
        self._done = threading.Event()  # serve() has returned and closed the engine
        self.engine: Any = None
        self.peer_engine: Any = None  # the second engine of interleaved pairs
        self.loads = 0  # engines loaded so far: reuse shows as a count that stays put
        self.closed = False
        self.thread: threading.Thread | None = None  # the engine thread, once serving

    @property
    def busy(self) -> bool:
        """A submitted session has not finished yet (queued, loading or running)."""
        with self._lock:
            return self._outstanding > 0

    @property
    def serving(self) -> bool:
        """``serve`` is running on the engine thread (started and not yet returned)."""
        return self._started and not self._done.is_set()

    def submit(self, request: SessionRequest | PairRequest) -> None:
        with self._lock:
            if self.closed:
                for r in request.requests if isinstance(request, PairRequest) else (request,):
                    r.post(SessionFinished(r.run_id, error="the engine is shut down"))
                return
            self._outstanding += 1
        self._requests.put(request)

    # -- the engine thread --------------------------------------------------------------

    def serve(self, should_exit: Callable[[], bool] = lambda: False) -> None:
        """Run submitted sessions until ``shutdown`` (or ``should_exit()`` turns true while
        idle); then close the engine. Call once, on the thread that is to own the engine."""
        with self._lock:
            if self.closed:  # shut down before it started
                self._done.set()
                return
            self._started = True
        self.thread = threading.current_thread()
        try:
            while True:
                try:
                    request = self._requests.get(timeout=_POLL_S)
                except queue.Empty:
                    if should_exit():
                        break
                    continue
                if request is None:
                    break
                try:
                    if isinstance(request, PairRequest):
                        self._pair_session(request)
                    else:
                        self._session(request)
                finally:
                    with self._lock:
                        self._outstanding -= 1
        finally:
            with self._lock:
                self.closed = True
            self._close_engine()
            self._close_peer_engine()
            # Sessions still queued never run; their senders hear so.
            while True:
                try:
                    request = self._requests.get_nowait()
                except queue.Empty:
                    break
                if request is not None:
                    with self._lock:
                        self._outstanding -= 1
                    for r in request.requests if isinstance(request, PairRequest) else (request,):
                        r.post(SessionFinished(r.run_id))
            self._done.set()

    def _close_engine(self) -> None:
        if self.engine is not None:
            engine, self.engine = self.engine, None
            engine.close()

    def _engine_for(self, request: SessionRequest) -> Any:
        config = request.config
        if self.engine is not None and engine_fits(self.engine, config):
            return self.engine
        # Closed before the new load, so two models never sit in memory at once.
        self._close_engine()
        request.post(SessionStatus(request.run_id, "loading", config.target or "embedded default model"))
        self.engine = self._factory(config)
        self.loads += 1
        return self.engine

    def _peer_engine_for(self, request: SessionRequest) -> Any:
        """A second engine for the other half of an interleaved pair: its own contexts (two
        sessions never share a KV cache), kept while pairs of the same setup follow."""
        if self.peer_engine is not None and engine_fits(self.peer_engine, request.config):
            return self.peer_engine
        self._close_peer_engine()
        request.post(SessionStatus(request.run_id, "loading", "a second context for interleaving"))
        self.peer_engine = self._factory(request.config)
        self.loads += 1
        return self.peer_engine

    def _close_peer_engine(self) -> None:
        if self.peer_engine is not None:
            engine, self.peer_engine = self.peer_engine, None
            engine.close()

    def _load(self, request: SessionRequest, load: Callable[[SessionRequest], Any]) -> Any:
        """The engine for ``request``, or None after posting why there is none."""
        if request.stop.is_set():  # stopped or superseded before its turn
            request.post(SessionFinished(request.run_id))
            return None
        try:
            engine = load(request)
        except SpectuiError as exc:
            request.post(SessionFinished(request.run_id, error=str(exc)))
            return None
        except Exception as exc:  # a loader bug must not kill the engine thread
            request.post(SessionFinished(request.run_id, error=f"{type(exc).__name__}: {exc}"))
            return None
        if request.stop.is_set():  # stopped while the models loaded: no prefill for nothing
            request.post(SessionFinished(request.run_id))
            return None
        return engine

    def _session(self, request: SessionRequest) -> None:
        """One session, start to finish. Always ends with one ``SessionFinished``."""
        engine = self._load(request, self._engine_for)
        if engine is None:
            return
        stream = _Stream(request, engine)
        while stream.pump():
            pass
        stream.finish()

    def _pair_session(self, pair: PairRequest) -> None:
        """Two sessions, one block each in turn, on two engines (see ``PairRequest``)."""
        first, second = pair.requests
        engines = (self._load(first, self._engine_for), None)
        if engines[0] is not None:
            engines = (engines[0], self._load(second, self._peer_engine_for))
        if engines[1] is None:
            if engines[0] is not None:
                first.post(SessionFinished(first.run_id))
            else:
                second.post(SessionFinished(second.run_id))
            return
        streams = [_Stream(r, e, interleaved=True) for r, e in zip(pair.requests, engines)]
        live = list(streams)
        while live:
            live = [s for s in live if s.pump()]
        for s in streams:
            s.finish()

    # -- from the UI thread -------------------------------------------------------------

    def shutdown(self, timeout: float = CLOSE_TIMEOUT_S) -> bool:
        """Ask the engine thread to finish (after the current session, whose stop event the
        caller sets first) and wait until it closed the engine.

        Returns False if it did not finish within ``timeout``; the engine is then left to the
        process exit rather than freed under a running step.
        """
        self._requests.put(None)  # also ends a serve() that starts late
        with self._lock:
            started = self._started
            if not started:  # never served: nothing runs, close here
                self.closed = True
        if not started:
            self._close_engine()
            return True
        return self._done.wait(timeout)
