"""The acceptance brief's machine checks for ``spectui gate``: the memory envelope, pressure,
swap-ins, thermal throttling, power, other processes' load, and acceptance drift.

Every recording, baselines included, is judged against the envelope it declared (or the
gate's overrides): a baseline measured on battery or beside a busy process skews the speedup
as much as a candidate would. Each check's value is the worst run's, and its detail names that
run and when the limit was first crossed.

A signal no recording carries (the host does not expose it, or the files predate schema 1.3)
makes its check "n/a" with the reason; it never passes as zero.
"""

from __future__ import annotations

from functools import partial

from spectui.compare.check import Check
from spectui.compare.thresholds import GateThresholds
from spectui.metrics.conditions import thermal_text
from spectui.metrics.envelope import EnvelopeFacts, header_envelope, judge_sessions, low_acceptance_streak, window_acceptance
from spectui.recording.reader import Recording

MIB = 2**20

#: the brief's checklist line behind each check (docs/guide/brief.md walks through them)
BRIEF = {
    "headroom": "Headroom: sustained free memory >= agreed floor (10 GB free on a 24 GB host)",
    "red pressure": "Pressure: no continuous memory pressure red state > 60 s while decoding",
    "swap-ins": "Swap: swap-ins stay <= 200 MB cumulative over the soak window",
    "thermal": "Thermal: throttle events logged as zero for the target SKU",
    "power": "Benchmark on stable AC power; low power disabled",
    "other load": "Background load distorts acceptance curves",
    "acceptance drift": "Acceptance below 0.40 for more than two consecutive five-minute windows fails",
    "quality": "Quality: task success within +-0.5% of AR baseline",
}

NOT_AVAILABLE = "not available: no recording carries it (the host does not expose it, or recorded before schema 1.3)"


def _facts(recs: list[Recording], t: GateThresholds) -> list[tuple[Recording, EnvelopeFacts]]:
    return [(r, judge_sessions([r.events], t.envelope_overrides(header_envelope(r.header)))) for r in recs]


def _first_breach(f: EnvelopeFacts, limit: str) -> str:
    b = next((b for b in f.breaches if b.limit == limit), None)
    return f" ({b.text}, first at {b.t_s:.1f} s)" if b is not None else ""


def _not_measured(name: str, limit: float, unit: str, what: str) -> Check:
    """A check no recording could judge: not available, never a pass or a zero."""
    return Check(name=name, passed=None, value=None, threshold=limit, comparison="<=", unit=unit,
                 brief=BRIEF[name], detail=f"n/a: {what} {NOT_AVAILABLE}")


def _headroom(judged: list[tuple[Recording, EnvelopeFacts]], overridden: bool) -> Check:
    # (recording, facts, its least headroom in MiB)
    known = [(r, f, f.min_headroom_bytes / MIB) for r, f in judged if f.min_headroom_bytes is not None and f.envelope.min_headroom_mib > 0]
    if not known:
        return Check(name="headroom", passed=None, value=None, threshold=None, comparison=">=", unit="MiB", brief=BRIEF["headroom"],
                     detail="n/a: no memory samples, or no floor (undeclared, and the host's memory unknown)")
    # the worst run: the least headroom above (or most below) its own floor
    r, f, low = min(known, key=lambda rfl: rfl[2] - rfl[1].envelope.min_headroom_mib)
    floor = f.envelope.min_headroom_mib
    declared = ("given to the gate" if overridden else "declared" if r.header.config.envelope.min_headroom_mib > 0
                else "the brief's 10/24 of host memory")
    return Check(
        name="headroom", passed=bool(low >= floor), value=round(low, 1), threshold=floor, comparison=">=", unit="MiB", brief=BRIEF["headroom"],
        detail=f"least headroom over {len(known)} runs in {r.path}; floor {floor:.0f} MiB ({declared}){_first_breach(f, 'headroom')}",
    )


def _red(judged: list[tuple[Recording, EnvelopeFacts]]) -> Check:
    known = [(r, f, f.longest_red_s) for r, f in judged if f.longest_red_s is not None]
    limit = max((f.envelope.max_red_pressure_s for _, f in judged), default=60.0)
    if not known:
        return _not_measured("red pressure", limit, "s", "memory pressure")
    r, f, value = max(known, key=lambda rfv: rfv[2] - rfv[1].envelope.max_red_pressure_s)
    return Check(
        name="red pressure", passed=bool(value <= f.envelope.max_red_pressure_s), value=round(value, 1),
        threshold=f.envelope.max_red_pressure_s, comparison="<=", unit="s", brief=BRIEF["red pressure"],
        detail=f"longest continuous red (critical) memory pressure, {r.path}; {f.red_total_s or 0:.1f} s red in all"
        + _first_breach(f, "red pressure"),
    )


def _swap(judged: list[tuple[Recording, EnvelopeFacts]]) -> Check:
    known = [(r, f, f.swap_in_bytes / MIB) for r, f in judged if f.swap_in_bytes is not None]
    limit = max((f.envelope.max_swap_in_mib for _, f in judged), default=200.0)
    if not known:
        return _not_measured("swap-ins", limit, "MiB", "swap-ins")
    r, f, value = max(known, key=lambda rfv: rfv[2] - rfv[1].envelope.max_swap_in_mib)
    return Check(
        name="swap-ins", passed=bool(value <= f.envelope.max_swap_in_mib), value=round(value, 1), threshold=f.envelope.max_swap_in_mib,
        comparison="<=", unit="MiB", brief=BRIEF["swap-ins"],
        detail=f"bytes paged in from swap during the run, most in {r.path}" + _first_breach(f, "swap-ins"),
    )


def _thermal(judged: list[tuple[Recording, EnvelopeFacts]]) -> Check:
    known = [(r, f) for r, f in judged if f.throttle_events is not None]
    limit = min((f.envelope.max_throttle_events for _, f in judged), default=0)
    state = "; ".join(sorted({thermal_text(f) for _, f in judged}))
    if not known:
        return Check(name="thermal", passed=None, value=None, threshold=limit, comparison="<=", brief=BRIEF["thermal"],
                     detail=f"n/a: throttle counters {NOT_AVAILABLE}; {state}")
    events = sum(f.throttle_events or 0 for _, f in known)
    bad = [(r, f) for r, f in known if (f.throttle_events or 0) > f.envelope.max_throttle_events]
    where = f"; in {bad[0][0].path}{_first_breach(bad[0][1], 'throttling')}" if bad else ""
    return Check(name="thermal", passed=not bad, value=events, threshold=limit, comparison="<=", brief=BRIEF["thermal"],
                 detail=f"thermal throttle events over {len(known)} runs; {state}{where}")


def _power(judged: list[tuple[Recording, EnvelopeFacts]]) -> Check:
    required = any(f.envelope.require_ac_power for _, f in judged)
    battery = [r for r, f in judged if f.on_ac_power is False]
    low = [r for r, f in judged if f.low_power_mode]
    reported = [f for _, f in judged if f.on_ac_power is not None or f.low_power_mode is not None]
    if not reported:
        return Check(name="power", passed=None, value=None, threshold="AC", brief=BRIEF["power"],
                     detail="n/a: power source and low-power mode not available (no battery or power supply reported: a desktop, server or VM)")
    if battery or low:
        what = [f"on battery: {r.path}" for r in battery] + [f"low-power mode: {r.path}" for r in low]
        return Check(name="power", passed=False if required else None, value="battery" if battery else "low power",
                     threshold="AC", brief=BRIEF["power"], detail="; ".join(what))
    return Check(name="power", passed=True, value="AC", threshold="AC", brief=BRIEF["power"],
                 detail=f"{len(reported)} runs on AC power, low-power mode off where reported")


def other_processes_text(f: EnvelopeFacts) -> str:
    return ", ".join(f"{p.name} {p.cpu_share:.0%}" for p in f.other_processes) or "none above 1%"


def _other(judged: list[tuple[Recording, EnvelopeFacts]]) -> Check:
    known = [(r, f, f.other_cpu_mean) for r, f in judged if f.other_cpu_mean is not None]
    limit = min((f.envelope.max_other_cpu for _, f in judged), default=0.25)
    if not known:
        return _not_measured("other load", limit, "share", "other processes' CPU")
    r, f, mean = max(known, key=lambda rfm: rfm[2] - rfm[1].envelope.max_other_cpu)
    flagged = f.other_load_flagged
    return Check(
        name="other load", passed=True, flagged=flagged, value=mean, threshold=f.envelope.max_other_cpu,
        comparison="<=", unit="share", brief=BRIEF["other load"],
        detail=("FLAGGED: the machine was shared, the numbers are suspect; " if flagged else "")
        + f"mean CPU share of other processes, most in {r.path} (peak {f.other_cpu_max or 0:.0%}); busiest: {other_processes_text(f)}",
    )


def _drift(candidates: list[Recording], t: GateThresholds) -> Check:
    spec = [r for r in candidates if r.header.config.mode == "spec"]
    drift = partial(Check, name="acceptance drift", threshold=t.max_low_windows, comparison="<=", brief=BRIEF["acceptance drift"])
    if not spec:
        return drift(passed=None, value=None, detail="n/a: no speculative candidate")
    worst, where, n_windows = -1, "", 0
    for r in spec:
        rates = window_acceptance([r.events], t.window_s)
        n_windows = max(n_windows, len(rates))
        streak, at = low_acceptance_streak(rates, t.min_window_acceptance)
        if streak > worst:
            worst, where = streak, (f"; {r.path}: windows {at + 1}-{at + streak} below" if streak else "")
    return drift(
        passed=worst <= t.max_low_windows, value=worst,
        detail=f"most consecutive {t.window_s:g} s windows with acceptance < {t.min_window_acceptance:g}"
        f" (up to {n_windows} window{'s' if n_windows != 1 else ''} a run){where}",
    )


def brief_checks(baselines: list[Recording], candidates: list[Recording], t: GateThresholds) -> list[Check]:
    judged = _facts(baselines + candidates, t)
    return [_headroom(judged, t.min_headroom_mib is not None), _red(judged), _swap(judged), _thermal(judged), _power(judged), _other(judged),
            _drift(candidates, t)]
