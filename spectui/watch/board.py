"""What the watch dashboard shows, without Textual: samples in, series and words out.

``WatchBoard.add`` takes each ``WatchSample`` (a live watch's, or a recording's read back: the
screen cannot tell them apart) and keeps the series the sparklines draw, the figures of the
last interval and of the whole watch, and the notes. The dashboard's screen draws from it; its
tests need no terminal.

Drawn honestly: llama-server (and SGLang) add a request's tokens and drafts to their counters
when the request finishes, so an interval in which no request finished has no acceptance. It
gets no bar (a flat line at zero would say nothing was accepted) and the screen says why. Where
llama-server's ``/slots`` answers, generated tokens/s is taken live from it (the counter plus
the tokens the running requests generated so far), so the speed does not wait for a request's
end either.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spectui.format import DASH, num, pct, size
from spectui.metrics.prometheus import FAMILIES
from spectui.metrics.watch_rates import WatchFold, WatchInterval, WatchTotals
from spectui.recording.watch_records import WatchInfo
from spectui.watch.sampler import WatchSample
from spectui.watch.text import speculation_missing

#: points kept per series: more than any terminal is wide
KEEP = 1024


def _push(series: list[float], value: float | None) -> None:
    if value is not None:
        series.append(value)
        del series[:-KEEP]


@dataclass
class WatchSeries:
    """One point per interval (tok/s, queue, process) or per interval that had drafts
    (acceptance, mean accepted length): what the sparklines draw."""

    tok_s: list[float] = field(default_factory=list)
    running: list[float] = field(default_factory=list)
    waiting: list[float] = field(default_factory=list)
    acceptance: list[float] = field(default_factory=list)
    accepted_length: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


class WatchBoard:
    def __init__(self, info: WatchInfo, *, replay: bool = False) -> None:
        self.info = info
        self.families = next((f for f in FAMILIES if f.server == info.server), None)
        self.replay = replay
        self.fold = WatchFold()
        self.series = WatchSeries()
        self.samples = 0
        self.failed = 0
        self.t_s = 0.0
        self.last: WatchSample | None = None
        self.step: WatchInterval | None = None  # the last interval
        self.spec_step: WatchInterval | None = None  # the last interval in which drafts were counted
        self.spec_at_s: float | None = None
        self.live_tok_s: float | None = None  # from /slots, where llama-server answers it
        self.missing: str | None = None  # the server shows no sign of drafting: how to turn it on
        self.ended = ""  # why the watch ended ("" while it runs)
        self.version = 0  # bumped by every change: the screen redraws when it moved
        self._live_mark: tuple[float, float] | None = None  # (t, generated + in flight)

    @property
    def totals(self) -> WatchTotals:
        return self.fold.totals

    def add(self, sample: WatchSample) -> None:
        self.version += 1
        self.samples += 1
        self.t_s = sample.t_s
        self.last = sample
        if sample.error:
            self.failed += 1
            return
        reading = sample.reading
        if reading is None:
            return
        step = self.fold.add(reading)  # the same fold as the sampler's: the same figures
        if self.missing is None and self.families is not None:
            self.missing = speculation_missing(self.families, sample)
        self._live(sample, step)
        _push(self.series.running, reading.requests_running)
        _push(self.series.waiting, reading.requests_waiting)
        if sample.process is not None:
            _push(self.series.rss, float(sample.process.rss_bytes))
            _push(self.series.cpu, sample.process.cpu_pct)
        if step is None:
            return
        self.step = step
        _push(self.series.tok_s, self.live_tok_s if self.live_tok_s is not None else step.generated_tok_s)
        rate, length = step.acceptance_rate, step.mean_accepted_length
        if rate is None and step.accept_rate_gauge is not None:  # SGLang: its own interval gauges
            rate, length = step.accept_rate_gauge, step.accept_length_gauge
        if rate is not None:
            self.spec_step, self.spec_at_s = step, sample.t_s
            _push(self.series.acceptance, rate)
            _push(self.series.accepted_length, length)

    def _live(self, sample: WatchSample, step: WatchInterval | None) -> None:
        """Generated tokens/s from the counter plus the running requests' tokens (llama-server's
        ``/slots``): a request's tokens move from one to the other when it finishes."""
        reading, live = sample.reading, sample.live
        if reading is None or live is None or reading.generated_tokens is None:
            self.live_tok_s, self._live_mark = None, None
            return
        mark = (sample.t_s, reading.generated_tokens + live.decoded_in_flight)
        before, self._live_mark = self._live_mark, mark
        if before is None or step is None or step.restarted or mark[0] <= before[0]:
            self.live_tok_s = None
            return
        self.live_tok_s = max(0.0, (mark[1] - before[1]) / (mark[0] - before[0]))

    # -- words -------------------------------------------------------------------------------

    def title(self) -> str:
        about = " · ".join(f"{k} {v}" for k, v in self.info.identity.items() if k != "server")
        kind = "replay of a watch of" if self.replay else "watching"
        parts = [f"{kind} {self.info.server} at {self.info.url}", f"{self.samples} readings · {self.t_s:.0f} s",
                 f"every {self.info.interval_s:g} s", *([about] if about else [])]  # fmt: skip
        return " · ".join(parts)

    def tok_s_text(self) -> str:
        step = self.step
        counted = num(step.generated_tok_s if step else None, ".1f")
        if self.live_tok_s is not None:
            return f"{self.live_tok_s:.1f} live · {counted} counted"
        return counted

    def stat_rows(self) -> list[tuple[str, str]]:
        """The numbers now (the last interval) and over the whole watch."""
        step, totals, last = self.step, self.totals, self.last
        reading = last.reading if last is not None else None
        run_now, wait_now = (reading.requests_running, reading.requests_waiting) if reading is not None else (None, None)
        rows = [("gen tok/s", self.tok_s_text()), ("requests", f"{num(run_now, '.0f')} running · {num(wait_now, '.0f')} waiting")]
        if last is not None and last.live is not None and last.live.processing:
            rows.append(("in flight", f"{last.live.decoded_in_flight} tokens so far (/slots)"))
        spec = self.spec_step
        if spec is not None:
            rate = spec.acceptance_rate if spec.acceptance_rate is not None else spec.accept_rate_gauge
            length = spec.mean_accepted_length if spec.mean_accepted_length is not None else spec.accept_length_gauge
            ago = f" ({self.t_s - self.spec_at_s:.0f} s ago)" if self.spec_at_s is not None and self.t_s - self.spec_at_s >= 1 else ""
            drafted = f" · {spec.accepted_tokens:.0f}/{spec.draft_tokens:.0f}" if spec.draft_tokens else ""
            rows.append(("acceptance", f"{pct(rate)}{drafted} · len {num(length, '.2f')}{ago}"))
        else:
            rows.append(("acceptance", DASH + (" (no draft counted yet)" if self.missing is None else "")))
        whole = f"{num(totals.generated_tokens, '.0f')} tok · {num(totals.generated_tok_s, '.1f')} tok/s"
        rows.append(("whole watch", whole))
        if totals.draft_tokens:
            rows.append(("  accepted", f"{pct(totals.acceptance_rate)} of {totals.draft_tokens:.0f} · len {num(totals.mean_accepted_length, '.2f')}"))
        elif totals.tokens_per_verify is not None:
            rows.append(("  per verify", f"{totals.tokens_per_verify:.2f} tokens"))
        if step is not None and step.requests_finished is not None:
            rows.append(("finished", f"{num(totals.requests_finished, '.0f')} requests"))
        process = last.process if last is not None else None
        if process is not None:
            rows.append(("server proc", f"{size(process.rss_bytes)} · CPU {process.cpu_pct:.0f}% · {process.threads} thr"))
        if self.failed:
            rows.append(("failed reads", str(self.failed)))
        return rows

    def position_rows(self) -> list[tuple[int, float, float | None]]:
        """(draft position from 1, acceptance over the watch, in the last interval with drafts)."""
        whole = self.totals.per_position
        last = self.spec_step.per_position if self.spec_step is not None else ()
        return [(i + 1, p, last[i] if i < len(last) else None) for i, p in enumerate(whole)]

    def notes(self) -> list[str]:
        """What the screen says besides the numbers: what the server does not report, how it
        counts, what is missing, the process, how the watch ended."""
        out: list[str] = []
        info = self.info
        if self.missing:
            out.append(self.missing)
        elif info.counts_at_request_end:
            live = " (tokens/s is live from /slots)" if self.live_tok_s is not None else ""
            out.append(f"{info.server} counts a request's tokens and drafts when it finishes: acceptance has a bar where"
                       f" requests finished, none while they run{live}")
        if info.not_reported and self.missing is None:
            out.append("not reported: " + "; ".join(info.not_reported))
        if info.process:
            out.append(f"server process: {info.process}")
        if info.process_note:
            out.append(info.process_note)
        if self.totals.restarts:
            out.append(f"the server restarted {self.totals.restarts} time(s): counted from zero each time")
        last = self.last
        if last is not None and last.error:
            out.append(f"last read failed: {last.error}")
        if self.ended:
            out.append(self.ended)
        return out
