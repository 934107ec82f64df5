"""The engine thread behind the dashboard: one long-lived thread that runs every session.

``SessionRunner`` owns the app's engine (an ``EngineProtocol``). Only one thread ever calls into
it: the app starts ``serve`` once, in a Textual thread worker, and it runs the sessions it is
handed one after another (loading the models on the way, reusing them while they stay the
same, closing them at the end). Two reasons for one thread rather than a worker per session:

* Correctness: two runs can never share the llama.cpp context, and no model is used while
  half-loaded or closed under a run, because nothing else touches them.
* Speed: llama.cpp's CPU backend is built with OpenMP, and libgomp keeps a thread team per
  calling thread. Once a second thread has called llama.cpp (a restart landing on another
  pool thread), the process holds more OpenMP threads than cores, libgomp stops spinning
  between parallel regions, and decoding fell to about a third of its speed here (70 -> 23
  tok/s, 2 cores). One engine thread keeps one team.

A session reports through its ``post`` function with the plain notes of ``spectui.sessions.notes``
(the dashboard passes a wrapper around ``App.post_message``: thread-safe, never blocks the engine)
and calls nothing else. Every event is written to the recording here (``record_session``), on the
engine thread, before it is posted, so the file is complete even if the reader falls behind.
Stopping a session is its ``stop`` event: the engine ends after its current step. A session
stopped before its turn comes is skipped, so a burst of restarts runs only the last one.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path

from spectui.config import RunConfig
from spectui.engine.host.noise import CALIBRATION_DETAIL
from spectui.errors import SpectuiError
from spectui.recording.schema import Event, Step
from spectui.sessions.notes import Note, Outbox, SessionEvents, SessionFinished, SessionStatus
from spectui.sessions.open import EngineCache, EngineFactory
from spectui.sessions.protocol import EngineProtocol
from spectui.sessions.record import record_session

#: How long closing waits for a session to end its current step (or a model load to finish).
CLOSE_TIMEOUT_S = 120.0
#: How often an idle engine thread checks whether it should exit (its reader went away).
_POLL_S = 0.25
#: The loading detail the dashboard shows while a first greedy run calibrates its batch noise
#: (what, and how long; the controller adds why in a notification: ``CALIBRATION_NOTICE``).
CALIBRATING = CALIBRATION_DETAIL
#: ... and while a run's block sizes are evaluated once before it, unmeasured (``Engine.warm_up``)
WARMING_UP = "warming up: one evaluation per block size, not measured"
#: ... and while the verify-cost curve a cost-aware K prices blocks by is measured (``Engine.measure_cost``)
MEASURING_COST = "measuring what a block of each size costs (seconds, once per model and thread count)"


@dataclass
class SessionRequest:
    run_id: int
    config: RunConfig
    stop: threading.Event
    post: Callable[[Note], object]
    #: names the recording file; called on the engine thread right before the file is made,
    #: so runs started within the same second never pick the same free name
    record_to: Callable[[RunConfig], Path] | None = None


@dataclass
class PairRequest:
    """Two sessions interleaved block by block: each runs one decode step in turn, on its own
    engine (the second one is a second load of the same models). Both then see the same
    machine at the same moments, which cancels drift in its load. Each session's clock leaves
    out the time the other one ran (``record_session(interleaved=True)``)."""

    requests: tuple[SessionRequest, SessionRequest]


@dataclass
class JobRequest:
    """Work other than a session on the engine this thread keeps loaded (the dashboard's tune,
    for one): ``job`` is called on the engine thread with the engine that runs ``config``,
    reusing the loaded one when it fits, so a second copy of the weights is never loaded
    beside it. ``done(result, error)`` is called on the engine thread when it ends (``error``
    is "" on success, "stopped" when ``stop`` was set before it began)."""

    config: RunConfig
    job: Callable[[EngineProtocol], object]
    done: Callable[[object, str], object]
    stop: threading.Event
    #: told what is being loaded when the engine must be loaded first
    loading: Callable[[str], object] = lambda what: None


class _Stream:
    """One session on the engine thread: ``record_session`` writes each event, then it goes
    into the session's outbox for the reader. ``pump`` runs the session to its next step."""

    def __init__(self, request: SessionRequest, engine: EngineProtocol, *, interleaved: bool = False) -> None:
        self.request = request
        self.events: Generator[Event, None, None] = record_session(
            engine, request.config, request.record_to, stop=request.stop, interleaved=interleaved, on_start=self._started
        )
        self.outbox = Outbox()
        self.path: Path | None = None
        self.error = ""

    def _started(self, path: Path | None) -> None:
        self.path = path
        self.request.post(SessionStatus(self.request.run_id, "running", str(path or "")))

    def pump(self) -> bool:
        """Run to the next decode step (or the end); False once the session is over."""
        request = self.request
        try:
            for ev in self.events:
                if self.outbox.put(ev):
                    request.post(SessionEvents(request.run_id, self.outbox))
                if type(ev) is Step:
                    return True
        except SpectuiError as exc:  # bad input or disk trouble
            self.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a bug ends the session with its name, not the engine thread
            self.error = f"{type(exc).__name__}: {exc}"
        return False

    def finish(self) -> None:
        try:
            self.events.close()  # closes the engine's run and the recording
        except SpectuiError as exc:
            self.error = self.error or str(exc)
        self.request.post(SessionFinished(self.request.run_id, path=self.path, error=self.error))


def _refuse(request: SessionRequest | PairRequest | JobRequest, error: str) -> None:
    """Tell the sender of a request that will never run (``error`` says why, or is "")."""
    if isinstance(request, JobRequest):
        request.done(None, error or "the engine is shut down")
        return
    for r in request.requests if isinstance(request, PairRequest) else (request,):
        r.post(SessionFinished(r.run_id, error=error))


class SessionRunner:
    def __init__(self, engine_factory: EngineFactory | None = None) -> None:
        self.engines = EngineCache(engine_factory)
        #: the second engine of interleaved pairs: its own contexts (two sessions never share
        #: a KV cache), kept while pairs of the same setup follow
        self.peer_engines = EngineCache(engine_factory)
        self._requests: queue.Queue[SessionRequest | PairRequest | JobRequest | None] = queue.Queue()
        self._lock = threading.Lock()
        self._outstanding = 0  # submitted sessions not finished yet
        self._started = False
        self._done = threading.Event()  # serve() has returned and closed the engine
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

    def submit(self, request: SessionRequest | PairRequest | JobRequest) -> None:
        with self._lock:
            if self.closed:
                _refuse(request, "the engine is shut down")
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
                    elif isinstance(request, JobRequest):
                        self._job(request)
                    else:
                        self._session(request)
                finally:
                    with self._lock:
                        self._outstanding -= 1
        finally:
            with self._lock:
                self.closed = True
            self.engines.close()
            self.peer_engines.close()
            # Sessions still queued never run; their senders hear so.
            while True:
                try:
                    request = self._requests.get_nowait()
                except queue.Empty:
                    break
                if request is not None:
                    with self._lock:
                        self._outstanding -= 1
                    _refuse(request, "")
            self._done.set()

    @property
    def engine(self) -> EngineProtocol | None:
        return self.engines.engine

    @property
    def loads(self) -> int:
        """Engines loaded so far: reuse shows as a count that stays put."""
        return self.engines.loads + self.peer_engines.loads

    def _engine_for(self, request: SessionRequest) -> EngineProtocol:
        config = request.config
        what = config.target or "embedded default model"
        return self.engines.get(config, before_load=lambda: request.post(SessionStatus(request.run_id, "loading", what)))

    def _peer_engine_for(self, request: SessionRequest) -> EngineProtocol:
        what = "a second context for interleaving"
        return self.peer_engines.get(
            request.config, before_load=lambda: request.post(SessionStatus(request.run_id, "loading", what))
        )

    def _load(self, request: SessionRequest, load: Callable[[SessionRequest], EngineProtocol]) -> EngineProtocol | None:
        """The engine for ``request``, or None after posting why there is none."""
        if request.stop.is_set():  # stopped or superseded before its turn
            request.post(SessionFinished(request.run_id))
            return None
        try:
            engine = load(request)
            # a first greedy run at these settings calibrates the batch noise (seconds): say so
            # now, rather than leave the dashboard showing a run that has not started
            engine.calibrate(request.config, before=lambda: request.post(SessionStatus(request.run_id, "loading", CALIBRATING)))
            measure_cost = getattr(engine, "measure_cost", None)  # the embedded engine's: a server prices its own
            if measure_cost is not None:
                measure_cost(request.config, before=lambda: request.post(SessionStatus(request.run_id, "loading", MEASURING_COST)))
            warm_up = getattr(engine, "warm_up", None)  # the embedded engine's; a server warms its own kernels
            if warm_up is not None:
                warm_up(request.config, before=lambda: request.post(SessionStatus(request.run_id, "loading", WARMING_UP)))
        except SpectuiError as exc:
            request.post(SessionFinished(request.run_id, error=str(exc)))
            return None
        except Exception as exc:  # noqa: BLE001 - a loader bug must not kill the engine thread
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

    def _job(self, request: JobRequest) -> None:
        """One job on the loaded engine. Always ends with one ``done`` call."""
        if request.stop.is_set():
            request.done(None, "stopped")
            return
        what = request.config.target or "embedded default model"
        try:
            engine = self.engines.get(request.config, before_load=lambda: request.loading(what))
            result = request.job(engine)
        except SpectuiError as exc:
            request.done(None, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - a job's bug must not kill the engine thread
            request.done(None, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            return
        request.done(result, "")

    def _pair_session(self, pair: PairRequest) -> None:
        """Two sessions, one block each in turn, on two engines (see ``PairRequest``)."""
        first, second = pair.requests
        engine_a = self._load(first, self._engine_for)
        engine_b = self._load(second, self._peer_engine_for) if engine_a is not None else None
        if engine_a is None or engine_b is None:
            if engine_a is not None:
                first.post(SessionFinished(first.run_id))
            else:
                second.post(SessionFinished(second.run_id))
            return
        streams = [_Stream(r, e, interleaved=True) for r, e in zip(pair.requests, (engine_a, engine_b))]
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
            self.engines.close()
            return True
        return self._done.wait(timeout)
