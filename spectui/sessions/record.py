"""``record_session``: run an engine into a recording, for every caller.

The CLI's ``run``, ``quality``, ``sweep`` and ``soak`` and the dashboard's engine thread all
go through here, so every recording is made the same way: the file is opened only once the
engine accepted the configuration (bad input leaves no file behind), every event is written
before anyone else sees it (a crash loses nothing that was shown), and the file is closed
however the run ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator
from pathlib import Path

import msgspec

from spectui.config import RunConfig
from spectui.recording.schema import INTERLEAVED_CLOCK, End, Event, Header, Provenance, Step
from spectui.recording.timeline import shift_event
from spectui.recording.writer import RecordingWriter
from spectui.sessions.protocol import EngineProtocol

#: Where a session is recorded: a path, a function naming the file from the configuration
#: (called right before the file is made, so runs started within one second never pick the
#: same free name), or None for no recording.
RecordTo = Path | str | Callable[[RunConfig], Path] | None

#: The provenance of the command this process runs (the profile, each setting's origin), set
#: once by the CLI after parsing: every session the command starts keeps it in its header,
#: whichever path it takes (run, compare, sweep, soak, chat, quality, the dashboard's thread).
_command_provenance: Provenance | None = None


def set_command_provenance(provenance: Provenance | None) -> None:
    """Say what the command line and config files set for every session this process records."""
    global _command_provenance
    _command_provenance = provenance


def _named_for(config: RunConfig, header: Header) -> RunConfig:
    """``config`` as a namer should see it: a target file spectui made for the run (the
    embedded default's copy in this machine's weight type) names the recording, not the
    configuration's name for it."""
    target = header.artifacts.target
    return msgspec.structs.replace(config, target=target.path) if target.origin and target.path else config


def record_session(
    engine: EngineProtocol,
    config: RunConfig,
    record_to: RecordTo = None,
    *,
    stop: threading.Event | None = None,
    interleaved: bool = False,
    on_start: Callable[[Path | None], object] | None = None,
    provenance: Provenance | None = None,
    host_readings: bool = True,
    sync_folder: bool = True,
) -> Generator[Event, None, None]:
    """Yield the session's events, each already written to its recording.

    ``on_start(path)`` is called once the engine accepted the configuration and the file
    exists (``None`` when not recording), right before the header is yielded. Bad input
    raises ``SpectuiError`` from the first ``next()``, before any file is made.

    ``interleaved``: the session shares the thread with another one, one decode step each in
    turn (``spectui compare --interleave``). The time this generator sits suspended after a
    step, while the other session runs, is taken off every later timestamp, so the numbers
    are this session's own work as if it ran alone, and the header's ``clock`` says so.

    ``provenance``: the profile and the origin of each setting of the command that started
    the session (``spectui.cli.profiles``), kept in the header; by default the command's
    (``set_command_provenance``).

    ``host_readings``: the machine's energy over the session and the other processes busy beside
    it, as every session records them. A workload's requests leave them out: with many sessions
    at once each reading would be every session's, and the workload reads them per level.
    ``sync_folder``: the recording's folder fsynced as the file is made (``RecordingWriter``).
    """
    from spectui.metrics.energy_session import SessionMeter, not_this_sessions
    from spectui.metrics.host import cpu_snapshot, top_other_processes  # psutil: not for --help

    # the energy counters are opened before the engine's clock starts (it starts at the header)
    meter = SessionMeter() if host_readings else None
    events = engine.run(config, stop=stop)
    writer: RecordingWriter | None = None
    try:
        header = next(events)  # validation happens here: raising now leaves no file
        assert type(header) is Header  # every engine's run starts with its header (EngineProtocol.run)
        # who else uses the CPU: a snapshot now, the busiest others named in the End record;
        # a node's run (``--host``) names its own machine's, measured there
        local = not getattr(header, "node", "") and host_readings
        others_before, started = (cpu_snapshot() if local else None), time.perf_counter()
        if interleaved:
            header = msgspec.structs.replace(header, clock=INTERLEAVED_CLOCK)
        provenance = provenance if provenance is not None else _command_provenance
        if provenance is not None:
            header = msgspec.structs.replace(header, provenance=provenance)
        path = record_to(_named_for(config, header)) if callable(record_to) else (Path(record_to) if record_to is not None else None)
        writer = RecordingWriter(path, sync_folder=sync_folder) if path is not None else None
        if on_start is not None:
            on_start(path)
        if writer is not None:
            writer.write(header)
        yield header
        # the machine's energy over the session, read on a thread of its own; a node's run
        # (``--host``) is measured on the node, its End arriving with the node's figures
        measuring = meter.start(not_this_sessions(header, interleaved=interleaved)) if local and meter is not None else None
        first_token_pending = measuring is not None
        away_us = 0
        for ev in events:
            if away_us:
                ev = shift_event(ev, away_us)
            if first_token_pending and type(ev) is Step and measuring is not None:
                measuring.first_token()  # sets an event: the reading happens on the sampler's thread
                first_token_pending = False
            if type(ev) is End and measuring is not None:
                ev = msgspec.structs.replace(ev, energy=measuring.finish(ev.n_tokens))
            if type(ev) is End and others_before is not None:
                top = top_other_processes(others_before, time.perf_counter() - started)
                ev = msgspec.structs.replace(ev, other_processes=top)
            if writer is not None:
                writer.write(ev)
            if interleaved and type(ev) is Step:
                suspended = time.perf_counter_ns()
                yield ev
                away_us += (time.perf_counter_ns() - suspended) // 1000
            else:
                yield ev
    finally:
        events.close()  # ends the engine's own threads (memory sampler) at once
        if meter is not None:
            meter.close()  # a run that never reached its End (or a node's): stop the sampler, release the counters
        if writer is not None:
            writer.close()
