"""What two successive ``/metrics`` readings say: generated tokens/s, requests running and
waiting, and the speculative figures (acceptance rate = accepted / drafted, mean accepted length
= 1 + accepted / drafts, acceptance per draft position = accepted at that position / drafts),
over the interval between them and over the whole watch. Pure: readings in, numbers out.

A counter that went down means the server restarted between the two readings (counters start
again at zero); so does a changed process start time. The increase is then the new value, the
rule Prometheus's own ``rate()`` applies, never a negative rate. A figure the server does not
report stays ``None`` and is said to be missing; it is never drawn as zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spectui.metrics.prometheus import CounterReading

#: the counters of a reading, by field name: what an interval takes differences of
COUNTERS = (
    "generated_tokens", "prompt_tokens", "requests_finished", "drafts", "draft_tokens", "accepted_tokens",
    "verify_calls", "decode_calls",
)  # fmt: skip


def restarted(before: CounterReading, after: CounterReading) -> bool:
    """Whether the server restarted between the readings: its start time changed, or a counter
    went down (a counter only ever grows while its process lives)."""
    if before.started_at is not None and after.started_at is not None and abs(after.started_at - before.started_at) > 1e-6:
        return True
    for name in COUNTERS:
        a, b = getattr(before, name), getattr(after, name)
        if a is not None and b is not None and b < a:
            return True
    p0, p1 = before.accepted_per_position, after.accepted_per_position
    return any(y < x for x, y in zip(p0, p1))


def increase(before: float | None, after: float | None, reset: bool) -> float | None:
    """How much a counter grew. After a restart it counted from zero: its increase is its value.
    A counter that appeared (vLLM creates its spec series at the first draft) grew from zero.
    ``None`` when the later reading lacks it."""
    if after is None:
        return None
    if reset or before is None:
        return after
    return after - before


@dataclass(frozen=True)
class WatchInterval:
    """The figures of one interval between two readings. ``None``: not reported, or nothing to
    divide (no draft in the interval has no acceptance rate, which is not 0%)."""

    dt_s: float
    restarted: bool
    generated_tokens: float | None
    generated_tok_s: float | None
    prompt_tok_s: float | None
    requests_running: float | None  # the later reading's gauges
    requests_waiting: float | None
    requests_finished: float | None
    drafts: float | None
    draft_tokens: float | None
    accepted_tokens: float | None
    acceptance_rate: float | None
    mean_accepted_length: float | None
    per_position: tuple[float, ...]  # accepted at position i / drafts
    #: SGLang: generated tokens per verification call (counters), beside its own gauges
    tokens_per_verify: float | None = None
    accept_rate_gauge: float | None = None
    accept_length_gauge: float | None = None
    decode_calls_per_s: float | None = None


def ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den is not None and den > 0 else None


def spec_figures(
    drafts: float | None, draft_tokens: float | None, accepted: float | None, per_pos: tuple[float, ...]
) -> tuple[float | None, float | None, tuple[float, ...]]:
    """(acceptance rate, mean accepted length, per-position acceptance) from counter increases,
    in vLLM's and llama.cpp's own definitions (``SpecDecodingLogging.log``; llama.cpp's slot log
    "draft acceptance ... mean len")."""
    rate = ratio(accepted, draft_tokens)
    length = 1.0 + accepted / drafts if accepted is not None and drafts is not None and drafts > 0 else None
    positions = tuple(p / drafts for p in per_pos) if drafts is not None and drafts > 0 else ()
    return rate, length, positions


def interval(before: CounterReading, after: CounterReading) -> WatchInterval:
    """The figures between two readings of the same server (``after`` the later)."""
    dt = after.t_s - before.t_s
    reset = restarted(before, after)
    d = {name: increase(getattr(before, name), getattr(after, name), reset) for name in COUNTERS}
    p0, p1 = before.accepted_per_position, after.accepted_per_position
    per_pos = tuple(y if reset or i >= len(p0) else y - p0[i] for i, y in enumerate(p1))
    rate, length, positions = spec_figures(d["drafts"], d["draft_tokens"], d["accepted_tokens"], per_pos)
    return WatchInterval(
        dt_s=dt,
        restarted=reset,
        generated_tokens=d["generated_tokens"],
        generated_tok_s=d["generated_tokens"] / dt if d["generated_tokens"] is not None and dt > 0 else None,
        prompt_tok_s=d["prompt_tokens"] / dt if d["prompt_tokens"] is not None and dt > 0 else None,
        requests_running=after.requests_running,
        requests_waiting=after.requests_waiting,
        requests_finished=d["requests_finished"],
        drafts=d["drafts"],
        draft_tokens=d["draft_tokens"],
        accepted_tokens=d["accepted_tokens"],
        acceptance_rate=rate,
        mean_accepted_length=length,
        per_position=positions,
        tokens_per_verify=ratio(d["generated_tokens"], d["verify_calls"]),
        accept_rate_gauge=after.accept_rate_gauge,
        accept_length_gauge=after.accept_length_gauge,
        decode_calls_per_s=d["decode_calls"] / dt if d["decode_calls"] is not None and dt > 0 else None,
    )


@dataclass
class WatchTotals:
    """The whole watch so far: increases added up interval by interval (so a restart mid-watch
    loses nothing and subtracts nothing), and the figures they give."""

    seconds: float = 0.0
    intervals: int = 0
    restarts: int = 0
    generated_tokens: float | None = None
    requests_finished: float | None = None
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    accepted_per_position: list[float] = field(default_factory=list)
    verify_calls: float | None = None

    def add(self, step: WatchInterval, verify_calls: float | None = None) -> None:
        self.seconds += max(0.0, step.dt_s)
        self.intervals += 1
        self.restarts += step.restarted
        for name in ("generated_tokens", "requests_finished", "drafts", "draft_tokens", "accepted_tokens"):
            value = getattr(step, name)
            if value is not None:
                setattr(self, name, (getattr(self, name) or 0.0) + value)
        if verify_calls is not None:
            self.verify_calls = (self.verify_calls or 0.0) + verify_calls
        if step.drafts:  # back from rates to counts, to add positions across intervals
            counts = [p * step.drafts for p in step.per_position]
            if len(counts) > len(self.accepted_per_position):
                self.accepted_per_position += [0.0] * (len(counts) - len(self.accepted_per_position))
            for i, c in enumerate(counts):
                self.accepted_per_position[i] += c

    @property
    def generated_tok_s(self) -> float | None:
        return ratio(self.generated_tokens, self.seconds)

    @property
    def acceptance_rate(self) -> float | None:
        return spec_figures(self.drafts, self.draft_tokens, self.accepted_tokens, ())[0]

    @property
    def mean_accepted_length(self) -> float | None:
        return spec_figures(self.drafts, self.draft_tokens, self.accepted_tokens, ())[1]

    @property
    def per_position(self) -> tuple[float, ...]:
        return spec_figures(self.drafts, self.draft_tokens, self.accepted_tokens, tuple(self.accepted_per_position))[2]

    @property
    def tokens_per_verify(self) -> float | None:
        return ratio(self.generated_tokens, self.verify_calls)


class WatchFold:
    """Folds readings one at a time: ``add`` returns the interval since the previous reading
    (``None`` for the first) and keeps ``totals``. The dashboard, the headless lines and a
    recording's replay all go through this one fold."""

    def __init__(self) -> None:
        self.previous: CounterReading | None = None
        self.first: CounterReading | None = None
        self.totals = WatchTotals()

    def add(self, reading: CounterReading) -> WatchInterval | None:
        prev, self.previous = self.previous, reading
        if prev is None:
            self.first = reading
            return None
        step = interval(prev, reading)
        verify = increase(prev.verify_calls, reading.verify_calls, step.restarted)
        self.totals.add(step, verify)
        return step
