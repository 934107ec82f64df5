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

import itertools
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spectui.config import RunConfig
from spectui.errors import SpectuiError
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


class SessionRunner:
    def __init__(self, engine_factory: EngineFactory | None = None) -> None:
        self._factory = engine_factory or _default_factory
        self._requests: queue.Queue[SessionRequest | None] = queue.Queue()
        self._lock = threading.Lock()
        self._outstanding = 0  # submitted sessions not finished yet
        self._started = False
        self._done = threading.Event()  # serve() has returned and closed the engine
        self.engine: Any = None
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

    def submit(self, request: SessionRequest) -> None:
        with self._lock:
            if self.closed:
                request.post(SessionFinished(request.run_id, error="the engine is shut down"))
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
                    self._session(request)
                finally:
                    with self._lock:
                        self._outstanding -= 1
        finally:
            with self._lock:
                self.closed = True
            self._close_engine()
            # Sessions still queued never run; their senders hear so.
            while True:
                try:
                    request = self._requests.get_nowait()
                except queue.Empty:
                    break
                if request is not None:
                    with self._lock:
                        self._outstanding -= 1
                    request.post(SessionFinished(request.run_id))
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

    def _session(self, request: SessionRequest) -> None:
        """One session, start to finish. Always ends with one ``SessionFinished``."""
        run_id, config, stop, post = request.run_id, request.config, request.stop, request.post
        if stop.is_set():  # stopped or superseded before its turn
            post(SessionFinished(run_id))
            return
        try:
            engine = self._engine_for(request)
        except SpectuiError as exc:
            post(SessionFinished(run_id, error=str(exc)))
            return
        except Exception as exc:  # a loader bug must not kill the engine thread
            post(SessionFinished(run_id, error=f"{type(exc).__name__}: {exc}"))
            return
        if stop.is_set():  # stopped while the models loaded: no prefill for nothing
            post(SessionFinished(run_id))
            return
        writer = None
        record_path = None
        error = ""
        events = engine.run(config, stop=stop)
        try:
            # Bad input raises at the first event: no recording file is made for it.
            first = next(events)
            if request.record_to is not None:
                record_path = request.record_to(config)
                writer = RecordingWriter(record_path)
            post(SessionStatus(run_id, "running", str(record_path or "")))
            write = writer.write if writer is not None else None
            outbox = Outbox()
            for ev in itertools.chain((first,), events):
                if write is not None:
                    write(ev)
                if outbox.put(ev):
                    post(SessionEvents(run_id, outbox))
        except SpectuiError as exc:  # bad input or disk trouble
            error = str(exc)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        finally:
            events.close()  # ends the engine's own threads (memory sampler) at once
            if writer is not None:
                try:
                    writer.close()
                except SpectuiError as exc:
                    error = error or str(exc)
        post(SessionFinished(run_id, path=record_path if writer is not None else None, error=error))

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
