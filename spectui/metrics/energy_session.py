"""A session's energy: an ``EnergySampler`` around one recorded session, its joules, watts and
joules per generated token written into the session's ``End`` (``SessionEnergy``), and the
words every view uses for them.

``record_session`` (``spectui.sessions.record``), the one place every run passes through
(embedded, server, runtime, the dashboard's), opens a ``SessionMeter`` before the engine starts,
``start`` s it at the header, calls ``first_token`` once when the first ``Step`` arrives and
``finish`` at the ``End``. The counters are read on the sampler's own thread: the decode thread only sets an
event at the first token and takes one last reading after the run has ended, so decoding never
waits for a counter (NVML's read is a driver call of a millisecond or so).

What the numbers cover: the whole machine's counters (RAPL packages and DRAM, every NVIDIA GPU,
an Apple chip's CPU/GPU/ANE/DRAM), so other load during a run is in them (the report's
"conditions" shows how much there was). The per-token figure takes the window and tokens of
decode tok/s (first token to last, tokens after the first), so AR and speculative runs of one
prompt compare without their shared prefill; the session's joules and watts include it.

Where no counter exists the ``SessionEnergy`` holds why (``"not available here: ..."``), never a
number. Sessions whose energy would not be theirs say so instead of measuring: interleaved
pairs (both sessions run at once) and servers on another machine.

``SPECTUI_RAPL_ROOT`` points the RAPL reader at another powercap tree than
``/sys/class/powercap``: a container with the host's tree mounted elsewhere, and tests, which
point it at a fixture tree whose counters they advance.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from urllib.parse import urlsplit

from spectui.format import num
from spectui.metrics.energy import EnergyProbe, EnergySampler, energy_between, open_energy
from spectui.metrics.energy_rapl import DEFAULT_ROOT
from spectui.recording.schema import End, Event, Header, SessionEnergy

__all__ = ["RAPL_ROOT_ENV", "SessionMeter", "energy_text", "not_this_sessions", "session_energy"]

RAPL_ROOT_ENV = "SPECTUI_RAPL_ROOT"
#: The window's ends are readings of their own (at the start, woken at the first token, at the
#: end), so the grid between them only has to see every wrap of a counter (a RAPL package's
#: range lasts ~44 minutes at 100 W) while keeping a soak of hours to a few hundred readings.
INTERVAL_S = 30.0
INTERLEAVED = "interleaved with another session: the machine's energy is both sessions' at once"


def rapl_root() -> str:
    return os.environ.get(RAPL_ROOT_ENV) or DEFAULT_ROOT


def not_this_sessions(header: Header, *, interleaved: bool = False) -> str:
    """Why the counters of this machine would not measure this session ("" = they would)."""
    if interleaved:
        return INTERLEAVED
    server = header.artifacts.server
    if server is not None and server.url:
        host = urlsplit(server.url if "//" in server.url else "//" + server.url).hostname or ""
        if not (host == "localhost" or host.startswith("127.") or host == "::1"):
            return f"the server runs on another machine ({host}): this machine's counters are not its energy"
    return ""


class SessionMeter:
    """One session's energy. Made before the engine's clock starts (opening the counters takes
    milliseconds, up to tens on the first session of a process: NVML's library, and none of it
    may land in the session's TTFT); ``start`` at the header starts the sampler's thread,
    ``finish`` at the end. Never raises: a counter that fails becomes the reason in the result."""

    def __init__(self, *, interval_s: float = INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.why_not = ""
        self._t0_ns = time.perf_counter_ns()
        self._first_token_us: int | None = None
        self._sampler: EnergySampler | None = None
        self._probe: EnergyProbe | None = None
        try:
            self._probe = open_energy(rapl_root=rapl_root())
            self.why_not = self._probe.why_not
        except Exception as exc:  # noqa: BLE001 - a counter's failure must never fail the run
            self.why_not = f"the energy counters failed to open ({type(exc).__name__}: {exc})"

    def start(self, why_not: str = "") -> SessionMeter:
        """Start sampling, or keep ``why_not`` (the counters would not measure this session) as
        the answer and release them."""
        self.why_not = why_not or self.why_not
        probe = self._probe
        if self.why_not or probe is None:
            self.close()
            return self
        try:
            self._t0_ns = time.perf_counter_ns()
            self._sampler = EnergySampler(self._t0_ns, probe, interval_s=self.interval_s)
            self._sampler.start()
        except Exception as exc:  # noqa: BLE001 - as above
            self.why_not = f"the energy sampler failed to start ({type(exc).__name__}: {exc})"
            self.close()
        return self

    def _now_us(self) -> int:
        return (time.perf_counter_ns() - self._t0_ns) // 1000

    def first_token(self) -> None:
        """The decode window starts: note the time and wake a reading on the sampler's thread."""
        if self._first_token_us is None and self._sampler is not None:
            self._first_token_us = self._now_us()
            self._sampler.wake()

    def finish(self, n_tokens: int) -> SessionEnergy:
        """Stop the sampler (its last reading covers the end) and say what the session spent."""
        sampler = self._sampler
        if sampler is None:
            self.close()
            return SessionEnergy(why_not=self.why_not)
        end_us = self._now_us()
        try:
            sampler.stop()
            return self._result(sampler, end_us, n_tokens)
        except Exception as exc:  # noqa: BLE001 - as above
            return SessionEnergy(why_not=f"the energy counters failed ({type(exc).__name__}: {exc})")
        finally:
            self.close()

    def _result(self, sampler: EnergySampler, end_us: int, n_tokens: int) -> SessionEnergy:
        samples = list(sampler.samples)
        probe = sampler.probe
        if len(samples) < 2:
            return SessionEnergy(why_not=f"{probe.sources} gave no reading ({sampler.last_error})")
        first, last = samples[0], samples[-1]
        seconds = (last.t_us - first.t_us) / 1e6
        joules = last.joules - first.joules
        out = SessionEnergy(
            sources=probe.sources,
            seconds=seconds,
            joules=joules,
            watts=joules / seconds if seconds > 0 else None,
            by_domain={d: last.by_domain[d] - first.by_domain.get(d, 0.0) for d in last.by_domain},
            readings=len(samples),
        )
        notes = [f"{sampler.errors} readings failed (last: {sampler.last_error})"] if sampler.errors else []
        start = self._first_token_us
        if start is not None:  # a first token quicker than the thread's first reading: start there
            start = max(start, first.t_us)
        window = energy_between(samples, start, end_us) if start is not None else None
        if window is not None and n_tokens >= 2:
            out.decode_joules = window.joules
            out.decode_watts = window.watts
            out.j_per_token = window.per_token(n_tokens - 1)
        elif n_tokens < 2:
            notes.append("no per-token figure: fewer than two tokens were generated")
        else:
            notes.append("no per-token figure: the readings do not cover the decode window")
        out.note = "; ".join(notes)
        return out

    def close(self) -> None:
        """Stop the sampler and release the counters (idempotent; ``finish`` calls it)."""
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            sampler.stop()
        probe, self._probe = self._probe, None
        if probe is not None:
            probe.close()


# -- reading it back ---------------------------------------------------------------------------


def session_energy(events: Iterable[Event]) -> SessionEnergy | None:
    """The recorded session's energy (its ``End``'s); None: the recording has none (made before
    spectui sampled energy, or it has no end)."""
    end = next((ev for ev in reversed(list(events)) if type(ev) is End), None)
    return end.energy if end is not None else None


def energy_text(e: SessionEnergy | None) -> str:
    """One line for a report: ``0.0521 J/token, 14.2 W decoding (RAPL); session 31.4 J over
    2.21 s``, or why there is no number."""
    if e is None:
        return "not recorded (the recording predates energy sampling)"
    if e.why_not:
        return e.why_not
    if e.j_per_token is not None:
        head = f"{e.j_per_token:.4g} J/token, {num(e.decode_watts, '.1f', ' W')} decoding ({e.sources})"
    else:
        head = f"no J/token ({e.sources})"
    text = f"{head}; session {num(e.joules, '.4g', ' J')} over {num(e.seconds, '.2f', ' s')} ({num(e.watts, '.1f', ' W')})"
    return text + (f"; {e.note}" if e.note else "")
