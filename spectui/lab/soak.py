"""Soak: decode back to back for a long while, then ask whether memory stayed flat.

``run_soak`` keeps one loaded engine busy with sessions back to back, cycling through the
prompts, and records every session into one folder. It keeps no events in memory (a soak that
held its own event lists would grow by tens of MB and report its own leak): the analysis reads
the folder back afterwards, which is also what ``spectui soak --analyze DIR`` does, so the live
report and a later one are the same computation on the same bytes.

The analysis (memory trend, swap, windows, verdict) is ``spectui.lab.soak_analysis``, its text
``spectui.lab.soak_report``; both are re-exported here, where the CLI imports them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.lab.soak_analysis import (
    MIB,
    SoakReport,
    SoakThresholds,
    SoakWindow,
    analyze_folder,
    analyze_soak,
    soak_paths,
)
from spectui.lab.soak_report import format_soak_report
from spectui.prompts import PromptSpec, list_prompts, prompts_dir
from spectui.recording.schema import Step
from spectui.recording.writer import SUFFIX, check_run_folder
from spectui.sessions.protocol import EngineProtocol
from spectui.sessions.record import record_session

__all__ = [
    "MIB", "SoakReport", "SoakRun", "SoakThresholds", "SoakWindow", "analyze_folder", "analyze_soak",
    "format_soak_report", "run_soak", "session_configs", "soak_paths", "soak_prompts",
]


@dataclass
class SoakRun:
    folder: Path
    paths: list[Path] = field(default_factory=list)
    tokens: int = 0
    elapsed_s: float = 0.0
    stopped: bool = False  # ended by the caller's stop event, not by the duration


def soak_prompts(directory: str | Path | None = None) -> list[PromptSpec]:
    """Every prompt in prompts/ but the quality-* ones (those grade output, not load)."""
    specs = [s for s in list_prompts(directory) if not s.name.startswith("quality-")]
    if not specs:
        raise SpectuiError(f"no prompts to soak on in {directory or prompts_dir()}")
    return specs


def session_configs(base: RunConfig, prompts: Sequence[PromptSpec], max_tokens: int | None = None) -> list[RunConfig]:
    """``base`` once per prompt, each with its own token ceiling unless ``max_tokens`` is given."""
    return [
        msgspec.structs.replace(
            base,
            prompt=p.text,
            prompt_tier=p.tier,
            prompt_name=p.name,
            prompt_check=p.check,
            max_tokens=p.max_tokens if max_tokens is None else max_tokens,
        )
        for p in prompts
    ]


def run_soak(
    engine: EngineProtocol,
    configs: Sequence[RunConfig],
    *,
    duration_s: float,
    folder: str | Path,
    stop: threading.Event | None = None,
    progress: Callable[[float, int, int], None] | None = None,
    progress_every_s: float = 0.5,
) -> SoakRun:
    """Run sessions back to back on ``engine``, cycling through ``configs``, for ``duration_s``.

    Each session is recorded to ``folder`` as ``NNNN-<prompt name>.spectui``. The session
    running at the deadline, or when ``stop`` is set, ends after its current step with an
    ``interrupted`` End, so every recording is complete. ``progress(elapsed_s, sessions done,
    tokens)`` is called at most every ``progress_every_s`` and after each session. Bad input
    (a prompt too long for the context) raises before anything runs.
    """
    if not configs:
        raise SpectuiError("a soak needs at least one prompt")
    if not duration_s > 0:
        raise SpectuiError(f"the duration must be > 0 seconds, got {duration_s}")
    for config in configs:
        engine.check(config)  # a prompt too long for the context: refuse now, not an hour in
    folder = Path(folder)
    check_run_folder(folder, "soak")
    run = SoakRun(folder)
    halt = threading.Event()  # the engine's stop: set at the deadline or by ``stop``
    start = time.monotonic()
    deadline = start + duration_s
    last_report = start
    i = 0
    while not halt.is_set():
        config = configs[i % len(configs)]
        path = folder / f"{i + 1:04d}-{config.prompt_name or 'prompt'}{SUFFIX}"
        for ev in record_session(engine, config, path, stop=halt):
            if type(ev) is Step:
                run.tokens += len(ev.tokens)
            now = time.monotonic()
            if now >= deadline or (stop is not None and stop.is_set()):
                halt.set()
            if progress is not None and now - last_report >= progress_every_s:
                last_report = now
                progress(now - start, len(run.paths), run.tokens)
        run.paths.append(path)
        i += 1
        now = time.monotonic()
        if now >= deadline or (stop is not None and stop.is_set()):
            halt.set()
        if progress is not None:
            last_report = now
            progress(now - start, len(run.paths), run.tokens)
    run.elapsed_s = time.monotonic() - start
    run.stopped = stop is not None and stop.is_set()
    return run
