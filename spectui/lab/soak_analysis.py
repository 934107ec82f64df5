"""A soak's recordings, analysed: did memory stay flat, and how did acceptance and speed hold?

``analyze_soak`` puts every ``MemorySample`` of every session on one soak clock (the session's
``Header.started_at`` plus the sample's ``t_us``), drops a warm-up, fits process RSS against
time by least squares and reports the slope in MiB per minute with a 95% confidence interval,
the swap in use, and acceptance and decode speed per window. "MB" in flag names means MiB
(2**20 bytes), like every memory figure spectui prints.

Why a warm-up is dropped: RSS climbs while each prompt runs for the first time (weights paged
in from the mmap, KV cache and compute buffers touched up to the longest prompt, allocator
arenas reaching their working size). That is a one-off, not a leak. The warm-up is the longer
of ``warmup_fraction`` of the soak (10%) and the first pass through every distinct prompt,
never more than half the soak.

Why the confidence interval is widened: samples 0.25 s apart are strongly autocorrelated (RSS
moves in steps), so the textbook OLS interval would be far too narrow. ``fit_slope``
(``spectui.metrics.stats``) widens it by the effective sample size of the residuals' lag-1
autocorrelation.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TypeVar

import msgspec

from spectui.errors import SpectuiError
from spectui.metrics.envelope import EnvelopeFacts, EnvelopeLine, EnvelopeMonitor, envelope_lines, header_envelope, low_acceptance_streak
from spectui.recording.reader import Recording, read_header, read_recording
from spectui.recording.schema import End, Event, Header, MemorySample, Step
from spectui.recording.writer import SUFFIX

MIB = 2**20


class SoakThresholds(msgspec.Struct, frozen=True, kw_only=True):
    """What the verdict and the windows are measured against (recorded in the report)."""

    window_s: float = 300.0
    #: 1 MiB/min is 1.4 GiB a day: a long-lived server on a 16 GiB machine would lose its
    #: headroom within days, which is the kind of leak a soak exists to catch. Slower drifts
    #: cannot be told from allocator settling in ten minutes anyway.
    max_slope_mib_min: float = 1.0
    #: The trend must also have added this much over the fitted span. RSS moves in steps (pages,
    #: 1 MiB Python arenas, malloc trims), so a 20 s soak with one late 2 MiB step would otherwise
    #: fit 6 MiB/min; with this floor a short soak only fails on a gross leak (5 MiB in 20 s),
    #: while in a 600 s soak any slope above 1 MiB/min already adds ~9 MiB and fails.
    min_growth_mib: float = 5.0
    #: Swap in use is system-wide, so other processes move it too; a rise this large that
    #: never reverses across windows is the machine paging under the soak, not background noise.
    swap_growth_mib: float = 32.0
    warmup_fraction: float = 0.1
    #: the brief's drift rule: acceptance below this in more than ``max_low_windows``
    #: consecutive windows (of ``window_s``) fails the soak
    min_window_acceptance: float = 0.40
    max_low_windows: int = 2

    def validate(self) -> None:
        if not self.window_s > 0:
            raise SpectuiError(f"the window must be > 0 seconds, got {self.window_s}")
        if not self.max_slope_mib_min >= 0:
            raise SpectuiError(f"the slope threshold must be >= 0 MB/min, got {self.max_slope_mib_min}")
        if not self.min_growth_mib >= 0:
            raise SpectuiError(f"the growth floor must be >= 0 MB, got {self.min_growth_mib}")
        if not 0 <= self.warmup_fraction < 0.5:
            raise SpectuiError(f"the warm-up fraction must be in [0, 0.5), got {self.warmup_fraction}")
        if not 0 <= self.min_window_acceptance <= 1:
            raise SpectuiError(f"the window acceptance floor must be between 0 and 1, got {self.min_window_acceptance}")
        if self.max_low_windows < 0:
            raise SpectuiError(f"the low-window count must be >= 0, got {self.max_low_windows}")


class SoakWindow(msgspec.Struct, kw_only=True):
    """One stretch of the soak clock. Tokens and blocks count where they were emitted."""

    start_s: float
    end_s: float
    sessions: int = 0  # sessions that started in this window
    tokens: int = 0
    drafted: int = 0
    accepted: int = 0
    acceptance_rate: float = float("nan")
    #: decode intervals ending here (token to next token of the same session, the first token
    #: of each session excluded), as ``summarize`` defines decode tok/s
    decode_tok_s: float = float("nan")
    rss_mib: float = float("nan")  # the window's last sample
    swap_mib: float = float("nan")


class SoakReport(msgspec.Struct, kw_only=True):
    duration_s: float = 0.0  # first session start to the last event
    sessions: int = 0
    complete_sessions: int = 0  # with an End record
    finish_reasons: dict[str, int] = msgspec.field(default_factory=dict)
    tokens: int = 0
    memory_samples: int = 0
    warmup_s: float = 0.0
    fit_samples: int = 0
    fit_span_s: float = 0.0
    slope_mib_min: float = float("nan")
    slope_ci95_mib_min: tuple[float, float] = (float("nan"), float("nan"))
    growth_mib: float = float("nan")  # slope x fitted span: what the trend added
    total_growth_mib: float = float("nan")  # last sample minus the first, warm-up included
    rss_first_mib: float = float("nan")  # the soak's first sample
    rss_start_mib: float = float("nan")  # first sample after the warm-up
    rss_end_mib: float = float("nan")
    peak_rss_mib: float = float("nan")
    swap_start_mib: float = float("nan")
    swap_end_mib: float = float("nan")
    swap_grew_monotonically: bool = False
    acceptance_rate: float = float("nan")
    decode_tok_s: float = float("nan")
    windows: list[SoakWindow] = msgspec.field(default_factory=list)
    thresholds: SoakThresholds = msgspec.field(default_factory=SoakThresholds)
    #: most consecutive windows with acceptance below ``thresholds.min_window_acceptance``
    low_acceptance_windows: int = 0
    #: the envelope the first session declared, against every session's samples
    envelope: EnvelopeFacts | None = None
    envelope_checks: list[EnvelopeLine] = msgspec.field(default_factory=list)
    passed: bool = False
    reasons: list[str] = msgspec.field(default_factory=list)  # why it failed; empty on a pass



def soak_paths(folder: str | Path) -> list[Path]:
    """A soak folder's recordings in the order they ran (their headers' start times)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SpectuiError(f"soak folder not found: {folder}")
    paths = sorted(folder.glob("*" + SUFFIX))
    if not paths:
        raise SpectuiError(f"no recordings ({SUFFIX}) in {folder}")
    return [p for _, p in _in_run_order([(read_header(p), p) for p in paths])]


def analyze_folder(folder: str | Path, thresholds: SoakThresholds | None = None) -> SoakReport:
    """``analyze_soak`` on a soak folder, one recording in memory at a time (an hours-long
    soak holds millions of events; the analysis keeps only the memory samples)."""
    return analyze_soak((read_recording(p) for p in soak_paths(folder)), thresholds, ordered=True)


def _started_at(header: Header) -> float | None:
    try:
        return dt.datetime.fromisoformat(header.started_at).timestamp()
    except ValueError:
        return None


_Item = TypeVar("_Item")  # what travels with each header: a path, a session's events


def _in_run_order(items: list[tuple[Header, _Item]]) -> list[tuple[Header, _Item]]:
    """By the headers' wall-clock starts; if any header lacks one, in the order given."""
    starts = [t for h, _ in items if (t := _started_at(h)) is not None]
    if len(starts) < len(items):
        return items
    return [item for _, item in sorted(zip(starts, items), key=lambda x: x[0])]


class _Soak:
    """Folds sessions, in run order, into per-window totals and the memory samples.

    Window totals are keyed by window index while the soak's length is still unknown; the
    report merges any index past the last window into it (see ``windows``)."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.origin: float | None = None  # epoch seconds of the first session's start
        self.prev_end = 0.0
        self.span = 0.0
        self.tally: dict[int, list[float]] = {}  # index -> [sessions, tokens, drafted, accepted, intervals, seconds]
        self.samples: list[tuple[float, int, int]] = []  # (soak seconds, rss, swap used)
        self.prompt_ends: list[tuple[str, float]] = []  # (prompt text, end on the soak clock)
        self.sessions = self.complete = 0
        self.finish_reasons: dict[str, int] = {}
        self.envelope: EnvelopeMonitor | None = None  # made from the first session's header

    def _at(self, t_s: float) -> list[float]:
        return self.tally.setdefault(int(t_s // self.window_s), [0, 0, 0, 0, 0, 0.0])

    def add(self, events: Sequence[Event]) -> None:
        if not events or type(events[0]) is not Header:
            raise SpectuiError("a soak session must start with a header record")
        header = events[0]
        started = _started_at(header)
        if started is not None and self.origin is None:
            self.origin = started - self.prev_end
        # a session without a start time follows the one before it
        offset = started - self.origin if started is not None and self.origin is not None else self.prev_end
        self.sessions += 1
        self._at(offset)[0] += 1
        if self.envelope is None:
            self.envelope = EnvelopeMonitor(header_envelope(header))
        monitor = self.envelope
        monitor.new_session(offset)
        last_us = 0
        prev_t: int | None = None  # the previous token's time in this session (µs)
        for ev in events:
            if type(ev) is Step:
                if not ev.t_us:
                    continue
                last_us = max(last_us, ev.t_us[-1])
                w = self._at(offset + ev.t_us[-1] / 1e6)
                w[1] += len(ev.tokens)
                w[2] += ev.drafted
                w[3] += ev.accepted
                for t in ev.t_us:
                    if prev_t is not None:
                        w = self._at(offset + t / 1e6)
                        w[4] += 1
                        w[5] += (t - prev_t) / 1e6
                    prev_t = t
            elif type(ev) is MemorySample:
                last_us = max(last_us, ev.t_us)
                self.samples.append((offset + ev.t_us / 1e6, ev.rss, ev.swap_used))
                monitor.add(ev)
            elif type(ev) is End:
                last_us = max(last_us, ev.t_us)
                self.complete += 1
                monitor.add_end(ev)
                self.finish_reasons[ev.reason] = self.finish_reasons.get(ev.reason, 0) + 1
        self.prev_end = offset + last_us / 1e6
        self.span = max(self.span, self.prev_end)
        self.prompt_ends.append((header.prompt_text, self.prev_end))

    def windows(self) -> list[SoakWindow]:
        # A last window shorter than a tenth of the others (the overshoot of the final step
        # past the duration) joins the one before it instead of reporting a sliver.
        w = self.window_s
        n = max(1, math.ceil(self.span / w - 0.1))
        totals = [[0, 0, 0, 0, 0, 0.0] for _ in range(n)]
        for i, row in self.tally.items():
            into = totals[min(i, n - 1)]
            for k, v in enumerate(row):
                into[k] += v
        windows = []
        for i, (sessions, tokens, drafted, accepted, intervals, seconds) in enumerate(totals):
            windows.append(
                SoakWindow(
                    start_s=i * w,
                    end_s=self.span if i == n - 1 else (i + 1) * w,
                    sessions=int(sessions),
                    tokens=int(tokens),
                    drafted=int(drafted),
                    accepted=int(accepted),
                    acceptance_rate=_rate(accepted, drafted),
                    decode_tok_s=_rate(intervals, seconds),
                )
            )
        return windows

    def warmup_seconds(self, fraction: float) -> float:
        """The longer of ``fraction`` of the soak and the first pass through every distinct
        prompt, at most half the soak (see the module docstring)."""
        every = {text for text, _ in self.prompt_ends}
        seen: set[str] = set()
        first_pass_end = 0.0
        for text, end in self.prompt_ends:
            seen.add(text)
            if seen == every:
                first_pass_end = end
                break
        return min(max(fraction * self.span, first_pass_end), 0.5 * self.span)


def _rate(num: float, den: float) -> float:
    return num / den if den > 0 else math.nan


def analyze_soak(
    inputs: Iterable[Recording | Sequence[Event]], thresholds: SoakThresholds | None = None, *, ordered: bool = False
) -> SoakReport:
    """The soak's memory trend, swap, per-window acceptance and speed, and its verdict.

    ``inputs``: recordings (``read_recording``) or event lists, one per session, header
    first; a session without an End (a killed soak's last) is analysed as far as it got.
    They are put in run order by their headers' start times unless ``ordered`` says they
    already are (then they are consumed one at a time, as ``analyze_folder`` does)."""
    th = thresholds or SoakThresholds()
    th.validate()

    def events_of(item: Recording | Sequence[Event]) -> Sequence[Event]:
        return item.events if isinstance(item, Recording) else item

    if not ordered:
        headed: list[tuple[Header, Sequence[Event]]] = []
        for events in map(events_of, inputs):
            first = events[0] if events else None
            if type(first) is not Header:
                raise SpectuiError("a soak session must start with a header record")
            headed.append((first, events))
        inputs = [events for _, events in _in_run_order(headed)]
    soak = _Soak(th.window_s)
    for item in inputs:
        soak.add(events_of(item))
    if not soak.sessions:
        raise SpectuiError("nothing to analyse: no sessions")
    samples = soak.samples
    samples.sort(key=lambda x: x[0])  # sessions never overlap; this only guards odd clocks
    windows = soak.windows()
    report = SoakReport(
        duration_s=soak.span,
        sessions=soak.sessions,
        complete_sessions=soak.complete,
        finish_reasons=soak.finish_reasons,
        tokens=sum(w.tokens for w in windows),
        memory_samples=len(samples),
        acceptance_rate=_rate(sum(w.accepted for w in windows), sum(w.drafted for w in windows)),
        windows=windows,
        thresholds=th,
    )
    intervals = sum(row[4] for row in soak.tally.values())
    report.decode_tok_s = _rate(intervals, math.fsum(row[5] for row in soak.tally.values()))
    n = len(windows)
    swap_levels: dict[int, int] = {}  # window index -> swap in use at its last sample
    for t_s, rss, swap in samples:  # in time order: the last one per window wins
        j = min(int(t_s // th.window_s), n - 1)
        windows[j].rss_mib, windows[j].swap_mib = rss / MIB, swap / MIB
        swap_levels[j] = swap
    if samples:
        report.peak_rss_mib = max(x[1] for x in samples) / MIB
        report.rss_first_mib = samples[0][1] / MIB
        report.total_growth_mib = (samples[-1][1] - samples[0][1]) / MIB
        report.swap_start_mib, report.swap_end_mib = samples[0][2] / MIB, samples[-1][2] / MIB
        report.warmup_s = soak.warmup_seconds(th.warmup_fraction)
        fit_memory(report, [x for x in samples if x[0] >= report.warmup_s])
    if soak.envelope is not None:
        report.envelope = soak.envelope.facts()
        report.envelope_checks = envelope_lines(report.envelope)
    judge(report, [samples[0][2], *(swap_levels[j] for j in sorted(swap_levels))] if samples else [])
    return report


def fit_memory(report: SoakReport, fit: list[tuple[float, int, int]]) -> None:
    """The RSS trend over the samples after the warm-up, in MiB per minute."""
    from spectui.metrics.stats import fit_slope  # numpy: not for ``spectui soak --help``

    report.fit_samples = len(fit)
    if not fit:
        return
    t = [x[0] / 60 for x in fit]  # minutes
    y = [x[1] / MIB for x in fit]
    report.fit_span_s = fit[-1][0] - fit[0][0]
    report.rss_start_mib, report.rss_end_mib = y[0], y[-1]
    slope, lo, hi = fit_slope(t, y)
    report.slope_mib_min, report.slope_ci95_mib_min = slope, (lo, hi)
    report.growth_mib = slope * report.fit_span_s / 60


def judge(report: SoakReport, swap_levels: list[int]) -> None:
    """The verdict: a lasting RSS trend (slope and growth both over their limits), or swap in
    use that never went down across the windows and rose by a meaningful amount."""
    th = report.thresholds
    reasons = report.reasons
    if report.fit_samples < 3 or report.slope_mib_min != report.slope_mib_min:
        reasons.append(f"too few memory samples after the warm-up to fit a slope ({report.fit_samples})")
    elif report.slope_mib_min > th.max_slope_mib_min and report.growth_mib > th.min_growth_mib:
        reasons.append(
            f"RSS grows {report.slope_mib_min:.2f} MiB/min (> {th.max_slope_mib_min:g}), "
            f"+{report.growth_mib:.1f} MiB over {report.fit_span_s:.0f} s (> {th.min_growth_mib:g})"
        )
    levels = swap_levels  # swap in use at the start, then at the end of each window
    rising = all(b >= a for a, b in zip(levels, levels[1:]))
    grown = (levels[-1] - levels[0]) / MIB if levels else 0.0
    report.swap_grew_monotonically = bool(levels) and rising and grown > th.swap_growth_mib
    if report.swap_grew_monotonically:
        reasons.append(f"swap in use never fell across the windows and rose {grown:.1f} MiB (> {th.swap_growth_mib:g})")
    streak, at = low_acceptance_streak([w.acceptance_rate for w in report.windows], th.min_window_acceptance)
    report.low_acceptance_windows = streak
    if streak > th.max_low_windows:
        w = report.windows
        reasons.append(
            f"acceptance below {th.min_window_acceptance:g} in {streak} consecutive windows"
            f" ({w[at].start_s:.0f}-{w[at + streak - 1].end_s:.0f} s; more than {th.max_low_windows} fails)"
        )
    for line in report.envelope_checks:
        if line.passed is False:
            reasons.append(f"envelope: {line.name} {line.value} (limit {line.limit}){', ' + line.detail if line.detail else ''}")
    report.passed = not reasons
