"""The declared envelope (``spectui.config.EnvelopeConfig``) against what the samples say.

One fold, ``EnvelopeMonitor``, serves every caller: the dashboard feeds it samples as they
arrive and marks each breach where it happens (time and limit); ``spectui gate``, ``spectui
report`` and ``spectui soak`` feed it a whole recording, or a soak's sessions one after the
other, and judge its ``facts()``. So a breach the dashboard showed is the breach the verdict
names.

Counters in ``MemorySample`` (swap-ins, red-pressure time, throttle events) start at zero
with each session; across a soak's sessions the monitor adds them up (``new_session``).
A limit whose signal was never available stays ``None`` in the facts: not judged, and said
so, never read as "zero, so fine".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TypeVar

import msgspec

from spectui.config import EnvelopeConfig
from spectui.recording.schema import End, Event, Header, MemorySample, OtherProcess, Step

MIB = 2**20
#: The brief's illustrative floor: 10 GB free on a 24 GB host, scaled to the host's memory.
HEADROOM_SHARE = 10 / 24


def resolve_envelope(envelope: EnvelopeConfig, total_memory_bytes: int) -> EnvelopeConfig:
    """``envelope`` with an undeclared headroom floor (0) set to ``HEADROOM_SHARE`` of the
    host's memory; unchanged when the floor was declared or the memory is unknown."""
    if envelope.min_headroom_mib > 0 or total_memory_bytes <= 0:
        return envelope
    floor = round(total_memory_bytes * HEADROOM_SHARE / MIB)
    return msgspec.structs.replace(envelope, min_headroom_mib=float(floor))


def header_envelope(header: Header) -> EnvelopeConfig:
    """The envelope a recording declared, with the floor resolved for its host."""
    return resolve_envelope(header.config.envelope, header.artifacts.host.total_memory_bytes)


class Breach(msgspec.Struct, kw_only=True):
    """One limit crossed: where (seconds on the run's clock), what, and by how much."""

    t_s: float
    limit: str  # "headroom", "red pressure", "swap-ins", "throttling", "power", "low power", "other load"
    value: float
    threshold: float
    text: str  # e.g. "headroom 9.1 GiB < floor 10.0 GiB"


class EnvelopeFacts(msgspec.Struct, kw_only=True):
    """What a run's samples say about each limit; ``None`` = the signal was not available."""

    envelope: EnvelopeConfig = msgspec.field(default_factory=EnvelopeConfig)
    samples: int = 0
    min_headroom_bytes: int | None = None
    longest_red_s: float | None = None
    red_total_s: float | None = None
    swap_in_bytes: int | None = None
    throttle_events: int | None = None
    on_ac_power: bool | None = None  # False when any sample was on battery
    low_power_mode: bool | None = None  # True when any sample was in low-power mode
    other_cpu_mean: float | None = None  # share of all cores, mean over the samples
    other_cpu_max: float | None = None
    max_temperature_c: float | None = None
    min_cpu_freq_pct: int | None = None
    max_thermal_level: int | None = None
    max_fan_rpm: int | None = None
    #: the busiest other processes named by the End records (merged across sessions)
    other_processes: list[OtherProcess] = msgspec.field(default_factory=list)
    breaches: list[Breach] = msgspec.field(default_factory=list)

    @property
    def other_load_flagged(self) -> bool:
        return self.other_cpu_mean is not None and self.other_cpu_mean > self.envelope.max_other_cpu


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


_Num = TypeVar("_Num", int, float)


def _max(a: _Num | None, b: _Num) -> _Num:
    """The larger of a running maximum (None: no reading yet) and a new reading."""
    return b if a is None else max(a, b)


def _min(a: _Num | None, b: _Num) -> _Num:
    return b if a is None else min(a, b)


class EnvelopeMonitor:
    """Folds ``MemorySample`` records (and End records) into ``EnvelopeFacts``; ``add``
    returns the breaches that sample caused, each limit reported once, when first crossed."""

    def __init__(self, envelope: EnvelopeConfig) -> None:
        self.env = envelope
        self.f = EnvelopeFacts(envelope=envelope)
        self._breached: set[str] = set()
        # per-session counters and what earlier sessions added up to (bytes, ms, events)
        self._base = {"swap": 0, "red_ms": 0, "throttle": 0}
        self._last = {"swap": 0, "red_ms": 0, "throttle": 0}
        self._red_prev_ms: int | None = None
        self._red_run_s = 0.0
        self._other_sum = 0.0
        self._other_n = 0
        self._offset_s = 0.0
        self._others: dict[tuple[str, int], float] = {}

    def new_session(self, offset_s: float = 0.0) -> None:
        """The next samples come from a new session (counters restart at zero); their times
        are shifted by ``offset_s`` (the session's start on a soak clock)."""
        for key in self._base:
            self._base[key] += self._last[key]
            self._last[key] = 0
        self._red_prev_ms = None
        self._offset_s = offset_s

    def _breach(self, t_s: float, limit: str, value: float, threshold: float, text: str) -> list[Breach]:
        if limit in self._breached:
            return []
        self._breached.add(limit)
        b = Breach(t_s=round(t_s, 3), limit=limit, value=value, threshold=threshold, text=text)
        self.f.breaches.append(b)
        return [b]

    def add(self, s: MemorySample) -> list[Breach]:
        env, f = self.env, self.f
        t = self._offset_s + s.t_us / 1e6
        out: list[Breach] = []
        f.samples += 1
        f.min_headroom_bytes = s.headroom if f.min_headroom_bytes is None else min(f.min_headroom_bytes, s.headroom)
        floor = env.min_headroom_mib * MIB
        if floor > 0 and s.headroom < floor:
            out += self._breach(t, "headroom", s.headroom / MIB, env.min_headroom_mib, f"headroom {_gib(s.headroom)} < floor {_gib(floor)}")
        if s.swap_in_total is not None:
            self._last["swap"] = s.swap_in_total
            f.swap_in_bytes = self._base["swap"] + s.swap_in_total
            if f.swap_in_bytes > env.max_swap_in_mib * MIB:
                mib = f.swap_in_bytes / MIB
                out += self._breach(t, "swap-ins", mib, env.max_swap_in_mib, f"swap-ins {mib:.0f} MiB > {env.max_swap_in_mib:g} MiB")
        if s.red_pressure_ms is not None:
            # a sample is red when the session's red time grew since the one before
            grew = self._red_prev_ms is not None and s.red_pressure_ms > self._red_prev_ms
            self._red_run_s = self._red_run_s + (s.red_pressure_ms - (self._red_prev_ms or 0)) / 1000 if grew else 0.0
            self._red_prev_ms = s.red_pressure_ms
            self._last["red_ms"] = s.red_pressure_ms
            f.red_total_s = (self._base["red_ms"] + s.red_pressure_ms) / 1000
            f.longest_red_s = max(f.longest_red_s or 0.0, self._red_run_s)
            if self._red_run_s > env.max_red_pressure_s:
                out += self._breach(
                    t, "red pressure", self._red_run_s, env.max_red_pressure_s,
                    f"red memory pressure for {self._red_run_s:.0f} s > {env.max_red_pressure_s:g} s",
                )
        if s.throttle_events is not None:
            self._last["throttle"] = s.throttle_events
            f.throttle_events = self._base["throttle"] + s.throttle_events
            if f.throttle_events > env.max_throttle_events:
                out += self._breach(
                    t, "throttling", f.throttle_events, env.max_throttle_events,
                    f"{f.throttle_events} thermal throttle events > {env.max_throttle_events}",
                )
        if s.on_ac_power is not None:
            f.on_ac_power = s.on_ac_power and f.on_ac_power is not False
            if not s.on_ac_power and env.require_ac_power:
                out += self._breach(t, "power", 0, 1, "on battery power")
        if s.low_power_mode is not None:
            f.low_power_mode = s.low_power_mode or bool(f.low_power_mode)
            if s.low_power_mode and env.require_ac_power:
                out += self._breach(t, "low power", 1, 0, "low-power mode on")
        if s.other_cpu_pct is not None:
            share = s.other_cpu_pct / 100
            self._other_sum += share
            self._other_n += 1
            f.other_cpu_mean = round(self._other_sum / self._other_n, 4)
            f.other_cpu_max = _max(f.other_cpu_max, share)
            # live: a warning once the running mean over at least 2 s of samples is over the limit
            if self._other_n >= 8 and f.other_cpu_mean > env.max_other_cpu:
                out += self._breach(
                    t, "other load", f.other_cpu_mean, env.max_other_cpu,
                    f"other processes use {f.other_cpu_mean:.0%} of the CPU > {env.max_other_cpu:.0%}",
                )
        if s.temperature_mc is not None:
            f.max_temperature_c = _max(f.max_temperature_c, s.temperature_mc / 1000)
        if s.cpu_freq_pct is not None:
            f.min_cpu_freq_pct = _min(f.min_cpu_freq_pct, s.cpu_freq_pct)
        if s.thermal_level is not None:
            f.max_thermal_level = _max(f.max_thermal_level, s.thermal_level)
        if s.fan_rpm is not None:
            f.max_fan_rpm = _max(f.max_fan_rpm, s.fan_rpm)
        return out

    def add_end(self, end: End) -> None:
        for p in end.other_processes:
            key = (p.name, p.pid)
            self._others[key] = max(self._others.get(key, 0.0), p.cpu_share)

    def facts(self) -> EnvelopeFacts:
        top = sorted(self._others.items(), key=lambda kv: -kv[1])[:5]
        self.f.other_processes = [OtherProcess(name=n, pid=pid, cpu_share=share) for (n, pid), share in top]
        return self.f


def judge_sessions(sessions: Iterable[Sequence[Event]], envelope: EnvelopeConfig | None = None) -> EnvelopeFacts:
    """The facts of one or more sessions run back to back (event lists, header first). The
    envelope is ``envelope``, or the first header's own (resolved for its host)."""
    monitor: EnvelopeMonitor | None = None
    offset = 0.0
    for events in sessions:
        header = events[0]
        assert type(header) is Header
        if monitor is None:
            monitor = EnvelopeMonitor(envelope or header_envelope(header))
        monitor.new_session(offset)
        last_us = 0
        for ev in events:
            if type(ev) is MemorySample:
                monitor.add(ev)
                last_us = max(last_us, ev.t_us)
            elif type(ev) is End:
                monitor.add_end(ev)
                last_us = max(last_us, ev.t_us)
        offset += last_us / 1e6
    return monitor.facts() if monitor is not None else EnvelopeFacts(envelope=envelope or EnvelopeConfig())


# -- acceptance per window --------------------------------------------------------------------


def window_acceptance(sessions: Iterable[Sequence[Event]], window_s: float) -> list[float]:
    """Acceptance (accepted / drafted) per ``window_s`` window of sessions laid end to end on
    one clock; NaN for a window with nothing drafted."""
    tally: dict[int, list[int]] = {}
    offset = 0.0
    for events in sessions:
        last_us = 0
        for ev in events:
            if type(ev) is Step and ev.t_us:
                last_us = max(last_us, ev.t_us[-1])
                row = tally.setdefault(int((offset + ev.t_us[-1] / 1e6) // window_s), [0, 0])
                row[0] += ev.accepted
                row[1] += ev.drafted
            elif type(ev) is End:
                last_us = max(last_us, ev.t_us)
        offset += last_us / 1e6
    n = max(tally, default=-1) + 1
    return [tally[i][0] / tally[i][1] if i in tally and tally[i][1] else math.nan for i in range(n)]


def low_acceptance_streak(rates: Sequence[float], floor: float) -> tuple[int, int]:
    """(longest run of consecutive windows with acceptance below ``floor``, index of its first
    window; -1 when there is none). A window with nothing drafted ends a run."""
    best, best_at, run = 0, -1, 0
    for i, r in enumerate(rates):
        run = run + 1 if r == r and r < floor else 0
        if run > best:
            best, best_at = run, i - run + 1
    return best, best_at


# -- one line per limit, for reports and the soak verdict ---------------------------------------


class EnvelopeLine(msgspec.Struct, kw_only=True):
    """One limit of the envelope against a run's facts. ``passed`` None: not available here."""

    name: str
    passed: bool | None
    value: str
    limit: str
    detail: str = ""
    flagged: bool = False  # other processes' load: the run passes, its numbers are suspect


def _breach_text(f: EnvelopeFacts, limit: str) -> str:
    b = next((b for b in f.breaches if b.limit == limit), None)
    return f"first crossed at {b.t_s:.1f} s" if b is not None else ""


def envelope_lines(f: EnvelopeFacts) -> list[EnvelopeLine]:
    """Headroom, red pressure, swap-ins, throttling, power and other load, each with its number."""
    env, na = f.envelope, "not available"
    lines = []
    floor = env.min_headroom_mib
    if f.min_headroom_bytes is None or floor <= 0:
        lines.append(EnvelopeLine(name="headroom", passed=None, value=na, limit=f">= {floor:.0f} MiB" if floor else "no floor"))
    else:
        low = f.min_headroom_bytes / MIB
        lines.append(EnvelopeLine(name="headroom", passed=low >= floor, value=f"{low:,.0f} MiB", limit=f">= {floor:,.0f} MiB",
                                  detail=_breach_text(f, "headroom")))
    if f.longest_red_s is None:
        lines.append(EnvelopeLine(name="red pressure", passed=None, value=na, limit=f"<= {env.max_red_pressure_s:g} s"))
    else:
        lines.append(EnvelopeLine(name="red pressure", passed=f.longest_red_s <= env.max_red_pressure_s,
                                  value=f"{f.longest_red_s:.1f} s longest", limit=f"<= {env.max_red_pressure_s:g} s",
                                  detail=f"{f.red_total_s or 0:.1f} s red in all " + _breach_text(f, "red pressure")))
    if f.swap_in_bytes is None:
        lines.append(EnvelopeLine(name="swap-ins", passed=None, value=na, limit=f"<= {env.max_swap_in_mib:g} MiB"))
    else:
        mib = f.swap_in_bytes / MIB
        lines.append(EnvelopeLine(name="swap-ins", passed=mib <= env.max_swap_in_mib, value=f"{mib:.1f} MiB",
                                  limit=f"<= {env.max_swap_in_mib:g} MiB", detail=_breach_text(f, "swap-ins")))
    if f.throttle_events is None:
        lines.append(EnvelopeLine(name="throttling", passed=None, value=na, limit=f"<= {env.max_throttle_events}"))
    else:
        lines.append(EnvelopeLine(name="throttling", passed=f.throttle_events <= env.max_throttle_events,
                                  value=f"{f.throttle_events} events", limit=f"<= {env.max_throttle_events}",
                                  detail=_breach_text(f, "throttling")))
    if f.on_ac_power is None and f.low_power_mode is None:
        lines.append(EnvelopeLine(name="power", passed=None, value=na, limit="AC" if env.require_ac_power else "any"))
    else:
        bad = f.on_ac_power is False or bool(f.low_power_mode)
        value = ("battery" if f.on_ac_power is False else "AC" if f.on_ac_power else "source unknown") + (
            ", low-power mode" if f.low_power_mode else "")
        lines.append(EnvelopeLine(name="power", passed=not (bad and env.require_ac_power), value=value,
                                  limit="AC, low power off" if env.require_ac_power else "any"))
    if f.other_cpu_mean is None:
        lines.append(EnvelopeLine(name="other load", passed=None, value=na, limit=f"<= {env.max_other_cpu:.0%}"))
    else:
        busiest = ", ".join(f"{p.name} {p.cpu_share:.0%}" for p in f.other_processes) or "none above 1%"
        lines.append(EnvelopeLine(name="other load", passed=True, flagged=f.other_load_flagged,
                                  value=f"{f.other_cpu_mean:.0%} mean, {f.other_cpu_max or 0:.0%} peak",
                                  limit=f"<= {env.max_other_cpu:.0%}", detail=f"busiest others: {busiest}"))
    return lines
