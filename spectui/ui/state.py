"""Plain state shared by the controller, the view and the widgets: what the dashboard is doing
(``RunState``) and the AR baselines that measured speedups are read against. No Textual."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from spectui.config import RunConfig
from spectui.metrics.live import LiveRun


class RunState(str, Enum):
    """What the dashboard is doing; the header shows the value."""

    IDLE = "idle"
    STARTING = "starting"  # submitted, waiting for the engine thread
    LOADING = "loading"  # the engine thread loads models
    RUNNING = "running"
    STOPPING = "stopping"  # stop asked, the engine ends after its current step
    DONE = "done"
    INTERRUPTED = "interrupted"
    ERROR = "error"
    REPLAY = "replay"  # a recording is on screen

    def __str__(self) -> str:
        return self.value

    @property
    def busy(self) -> bool:
        """A session is under way (the engine is, or is about to be, busy)."""
        return self in _BUSY

    @classmethod
    def after(cls, end_reason: str) -> RunState:
        """The state a run's ``End`` leaves the dashboard in."""
        return _FINISHED.get(end_reason, cls.DONE)


_BUSY = frozenset({RunState.STARTING, RunState.LOADING, RunState.RUNNING, RunState.STOPPING})
_FINISHED = {
    "length": RunState.DONE,
    "stop": RunState.DONE,
    "context": RunState.DONE,
    "interrupted": RunState.INTERRUPTED,
    "error": RunState.ERROR,
}


@dataclass(frozen=True)
class Baseline:
    """An AR run of the same target, prompt and settings: the measured speedup's yardstick."""

    decode_tok_s: float
    ar_step_us: float


class Baselines:
    """The latest finished AR run of each setup since the dashboard started (run or opened)."""

    def __init__(self) -> None:
        self._by_setup: dict[tuple, Baseline] = {}

    @staticmethod
    def setup(cfg: RunConfig) -> tuple:
        # What must match for an AR run to be the yardstick of a speculative one.
        return (cfg.target, cfg.backend, cfg.prompt, cfg.chat, cfg.max_tokens, cfg.sampling)

    def note(self, live: LiveRun) -> None:
        """Keep ``live`` if it is an AR run that ended normally (a stopped one is no yardstick)."""
        h = live.header
        if h is None or h.config.mode != "ar" or live.end is None or live.end.reason not in ("length", "stop"):
            return
        rate = live.decode_tok_s()
        if not math.isnan(rate):
            self._by_setup[self.setup(h.config)] = Baseline(rate, live.mean_ar_step_us)

    def for_run(self, live: LiveRun) -> Baseline | None:
        if live.header is None:
            return None
        return self._by_setup.get(self.setup(live.header.config))
