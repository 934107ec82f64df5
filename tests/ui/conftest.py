"""Shared pieces of the dashboard tests: the fixed sessions, bounded waits, a gated engine.

Textual's Pilot is asyncio: the ``async def`` tests run under pytest-asyncio, each marked
``@pytest.mark.asyncio`` (strict mode: a sync test beside them stays a plain test)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from spectui.config import BackendConfig, RunConfig
from spectui.recording.schema import Step

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
#: Real runs of the embedded model, checked in (tests/data/make_fixed_sessions.py makes them).
FIXED_SPEC = DATA / "fixed-session.spectui"
FIXED_AR = DATA / "fixed-session-ar.spectui"

#: Bounded waits for the real model: generous, because the machine is shared and llama.cpp may
#: crawl under load. Nothing asserts on time; a wait that runs out fails with what it saw.
WAIT_S = 180.0

#: Short prompts for the real-model tests (the embedded SmolLM2 answers them in tens of tokens).
PROMPT = "Fix the typos and return the text otherwise unchanged: the quik brown fox jumps ovr the lazy dog."


def real_config(**changes) -> RunConfig:  # noqa: ANN003
    """A real-model config for the tests: one llama.cpp thread. On a shared 2-core machine a
    second thread spin-waits against other processes and decoding collapses (measured: 0.4
    tok/s with two threads beside a busy process, 40 tok/s with one)."""
    return RunConfig(prompt=PROMPT, backend=BackendConfig(n_threads=1), **changes)


async def visible(pilot, selector: str | None = None) -> str:  # noqa: ANN001
    """What a person sees: the screen's rendered text (or one widget's region of it), after
    letting pending repaints land."""
    app = pilot.app
    app.refresh_now()
    await pilot.pause()
    lines = [strip.text for strip in app.screen._compositor.render_strips()]
    if selector is None:
        return "\n".join(lines)
    r = app.screen.query_one(selector).region
    return "\n".join(line[r.x : r.right] for line in lines[r.y : r.bottom])


async def wait_until(pilot, condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await pilot.pause(0.05)


async def wait_thread(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)


class GatedEngine:
    """The real engine, holding a run after ``hold_after`` steps until that run is stopped.

    Lets a test stop (or restart) a run in its middle however fast or slow the machine is:
    the tokens before the hold are real, and the stop is seen by the real decode loop.
    ``hold_after = 0`` lets runs go through.
    """

    def __init__(self, engine, hold_after: int = 3) -> None:  # noqa: ANN001
        self.engine = engine
        self.hold_after = hold_after
        self.holding = threading.Event()
        self.runs = 0
        self.threads: list[threading.Thread] = []  # the thread each run was iterated on
        self.closed = False

    @property
    def config(self):  # noqa: ANN201
        return self.engine.config

    def fits(self, config) -> bool:  # noqa: ANN001
        return self.engine.fits(config)

    def check(self, config) -> None:  # noqa: ANN001
        self.engine.check(config)

    def calibrate(self, config, *, before=None):  # noqa: ANN001, ANN201
        return self.engine.calibrate(config, before=before)

    def __enter__(self) -> GatedEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, config, *, stop: threading.Event | None = None) -> Iterator:  # noqa: ANN001
        self.runs += 1
        self.threads.append(threading.current_thread())
        self.holding.clear()
        steps = 0
        for ev in self.engine.run(config, stop=stop):
            yield ev
            if type(ev) is Step:
                steps += 1
                if steps == self.hold_after and stop is not None:
                    self.holding.set()
                    stop.wait(WAIT_S)

    def close(self) -> None:
        self.closed = True
        self.engine.close()


class GatedFactory:
    """An ``engine_factory`` that loads the real engine (``Engine.load``) and gates it."""

    def __init__(self, hold_after: int = 3) -> None:
        self.hold_after = hold_after
        self.engines: list[GatedEngine] = []

    def __call__(self, config):  # noqa: ANN001, ANN204
        from spectui.engine.embedded import Engine

        gated = GatedEngine(Engine.load(config), self.hold_after)
        self.engines.append(gated)
        return gated

    @property
    def engine(self) -> GatedEngine:
        return self.engines[-1]
