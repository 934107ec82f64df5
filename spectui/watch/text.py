"""A watch in words: the opening lines (what the server is, what it does not report), one line
or one JSON object per sample, and the closing summary. The dashboard shows the same notes.

A number the server does not report is an em dash (``None`` in JSON), never a zero; a figure
with nothing to divide (no draft in the interval) is a dash too, and the line says why when the
reason is the server's way of counting (llama-server adds a request only when it finishes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spectui.format import DASH, num, pct, size
from spectui.metrics.prometheus import MetricFamilies
from spectui.metrics.watch_rates import WatchInterval, WatchTotals
from spectui.recording.watch_records import ProcessSample
from spectui.watch.sampler import WatchSample
from spectui.watch.source import LiveSlots, WatchTarget


def opening_lines(target: WatchTarget, interval_s: float, *, process: str = "", process_note: str = "") -> list[str]:
    """What is being watched, how often, what this server cannot say, and its process (a
    loopback server's, ``spectui.watch.process``) or why there are no process stats."""
    fam = target.families
    about = ", ".join(f"{k} {v}" for k, v in target.identity.items() if k != "server")
    lines = [f"watching {fam.server} at {target.url}" + (f" ({about})" if about else "") + f", every {interval_s:g} s; sending it only GETs"]
    for figure, why in fam.not_reported.items():
        lines.append(f"not reported: {figure} ({why})")
    if fam.counts_at_request_end:
        lines.append(f"note: {fam.server} adds a request to its counters when the request finishes: figures move in steps")
    if process:
        lines.append(f"server process: {process} (RSS, CPU and threads at each reading)")
    if process_note:
        lines.append(f"note: {process_note}")
    return lines


def speculation_missing(fam: MetricFamilies, sample: WatchSample) -> str | None:
    """One line when the server shows no sign of drafting: no speculative series at all (vLLM,
    SGLang without a draft method), or llama-server's slots all saying ``speculative: false``."""
    reading, live = sample.reading, sample.live
    if reading is None:
        return None
    if not reading.speculative_series:
        return f"no speculative counters: this {fam.server} has not drafted since it started; to draft, {fam.enable_speculation}"
    if live is not None and live.slots > 0 and live.speculative == 0:
        return f"no slot of this {fam.server} can draft (its /slots say speculative: false); {fam.enable_speculation}"
    return None


def _positions(values: tuple[float, ...]) -> str:
    return " ".join(f"{p:.2f}" for p in values) if values else DASH


def _running(step: WatchInterval, live: LiveSlots | None) -> str:
    text = f"running {num(step.requests_running, '.0f')}  waiting {num(step.requests_waiting, '.0f')}"
    if live is not None and live.processing:
        text += f"  in flight {live.decoded_in_flight} tok"
    return text


def sample_line(fam: MetricFamilies, sample: WatchSample) -> str:
    """One sample as a line of the headless watch."""
    t = f"{sample.t_s:7.1f} s"
    if sample.error:
        return f"{t}  no reading: {sample.error}"
    step = sample.interval
    if step is None:
        return f"{t}  first reading (figures start with the next)"
    parts = [t]
    if step.restarted:
        parts.append("server restarted (a counter went down): counted from zero")
    parts.append(f"gen {num(step.generated_tok_s, '.1f')} tok/s")
    parts.append(_running(step, sample.live))
    if step.requests_finished is not None:
        parts.append(f"finished {step.requests_finished:.0f}")
    if step.drafts or step.draft_tokens:
        parts.append(
            f"accept {pct(step.acceptance_rate)} ({num(step.accepted_tokens, '.0f')}/{num(step.draft_tokens, '.0f')})"
            f"  mean len {num(step.mean_accepted_length, '.2f')}  by position {_positions(step.per_position)}"
        )
    elif step.accept_rate_gauge is not None or step.accept_length_gauge is not None:
        parts.append(f"accept {pct(step.accept_rate_gauge)}  mean len {num(step.accept_length_gauge, '.2f')} (server's gauges)")
    if step.tokens_per_verify is not None:
        parts.append(f"tokens per verify {step.tokens_per_verify:.2f}")
    if sample.process is not None:
        parts.append(process_text(sample.process))
    if sample.watts is not None:
        parts.append(f"machine {sample.watts:.1f} W")
    waiting_for_end = fam.counts_at_request_end and not step.generated_tokens and (step.requests_running or 0) > 0
    if waiting_for_end:
        parts.append(f"(counted when a request finishes: {fam.server} has not finished one in this interval)")
    if sample.reading is not None and sample.reading.note:
        parts.append(f"({sample.reading.note})")
    return "  ".join(parts)


def watch_joules(samples: Sequence[WatchSample]) -> float | None:
    """This machine's joules from the first reading with a counter to the last (None: none)."""
    read = [s.joules for s in samples if s.joules is not None]
    return read[-1] - read[0] if len(read) >= 2 else None


def energy_figures(joules: float | None, totals: WatchTotals, note: str) -> dict[str, Any]:
    """Joules over the watch and per generated token: the machine's energy, so on a machine
    that runs more than the server, the server's share is less than this."""
    tokens = totals.generated_tokens
    per = joules / tokens if joules is not None and tokens else None
    return {"joules": joules, "joules_per_token": per, "energy": note}


def energy_line(figures: dict[str, Any]) -> str | None:
    if figures["joules"] is None:
        return f"energy: {figures['energy']}" if figures["energy"] else None
    per = f", {figures['joules_per_token']:.3f} J per generated token" if figures["joules_per_token"] is not None else ""
    return f"energy: {figures['joules']:.1f} J over the watch{per} (this machine's {figures['energy']}, everything it ran)"


def process_text(p: ProcessSample) -> str:
    return f"server RSS {size(p.rss_bytes)} CPU {p.cpu_pct:.0f}% {p.threads} threads"


def _interval_json(step: WatchInterval) -> dict[str, Any]:
    return {
        "dt_s": step.dt_s,
        "restarted": step.restarted,
        "generated_tokens": step.generated_tokens,
        "generated_tok_s": step.generated_tok_s,
        "prompt_tok_s": step.prompt_tok_s,
        "requests_running": step.requests_running,
        "requests_waiting": step.requests_waiting,
        "requests_finished": step.requests_finished,
        "drafts": step.drafts,
        "draft_tokens": step.draft_tokens,
        "accepted_tokens": step.accepted_tokens,
        "acceptance_rate": step.acceptance_rate,
        "mean_accepted_length": step.mean_accepted_length,
        "per_position": list(step.per_position),
        "accept_rate_gauge": step.accept_rate_gauge,
        "accept_length_gauge": step.accept_length_gauge,
        "tokens_per_verify": step.tokens_per_verify,
        "decode_calls_per_s": step.decode_calls_per_s,
    }


def sample_json(sample: WatchSample) -> dict[str, Any]:
    """One sample as a JSON object: the raw counters as read and the interval's figures."""
    out: dict[str, Any] = {"event": "sample", "index": sample.index, "t_s": round(sample.t_s, 4)}
    if sample.error:
        out["error"] = sample.error
    if sample.reading is not None:
        r = sample.reading
        out["counters"] = {
            name: getattr(r, name)
            for name in (
                "generated_tokens", "prompt_tokens", "requests_running", "requests_waiting", "requests_finished", "drafts",
                "draft_tokens", "accepted_tokens", "verify_calls", "decode_calls", "accept_rate_gauge", "accept_length_gauge",
                "started_at",
            )
        }  # fmt: skip
        out["counters"]["accepted_per_position"] = list(r.accepted_per_position)
        if r.note:
            out["note"] = r.note
    if sample.interval is not None:
        out["interval"] = _interval_json(sample.interval)
    if sample.live is not None:
        out["slots"] = {
            "slots": sample.live.slots,
            "processing": sample.live.processing,
            "speculative": sample.live.speculative,
            "decoded_in_flight": sample.live.decoded_in_flight,
        }
    if sample.process is not None:
        p = sample.process
        out["process"] = {"rss_bytes": p.rss_bytes, "cpu_pct": p.cpu_pct, "threads": p.threads}
    if sample.joules is not None:
        out["joules"], out["watts"] = sample.joules, sample.watts
    return out


def opening_json(target: WatchTarget, interval_s: float, *, process: str = "", process_note: str = "", recording: str = "") -> dict[str, Any]:
    fam = target.families
    return {
        "event": "start",
        "url": target.url,
        "server": fam.server,
        "identity": target.identity,
        "interval_s": interval_s,
        "metric_source": fam.source,
        "counts_at_request_end": fam.counts_at_request_end,
        "not_reported": fam.not_reported,
        "process": process,
        "process_note": process_note,
        "recording": recording,
    }


def summary_json(totals: WatchTotals, samples: int, failed: int, energy: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        **(energy or {}),
        "event": "end",
        "samples": samples,
        "failed_reads": failed,
        "seconds": totals.seconds,
        "restarts": totals.restarts,
        "generated_tokens": totals.generated_tokens,
        "generated_tok_s": totals.generated_tok_s,
        "requests_finished": totals.requests_finished,
        "drafts": totals.drafts,
        "draft_tokens": totals.draft_tokens,
        "accepted_tokens": totals.accepted_tokens,
        "acceptance_rate": totals.acceptance_rate,
        "mean_accepted_length": totals.mean_accepted_length,
        "per_position": list(totals.per_position),
        "tokens_per_verify": totals.tokens_per_verify,
    }


def summary_lines(totals: WatchTotals, samples: int, failed: int, energy: dict[str, Any] | None = None) -> list[str]:
    head = f"watched {totals.seconds:.1f} s, {samples} readings" + (f" ({failed} failed)" if failed else "")
    if totals.restarts:
        head += f", {totals.restarts} server restart(s) counted from zero"
    lines = [head, f"generated {num(totals.generated_tokens, '.0f')} tokens, {num(totals.generated_tok_s, '.1f')} tok/s"]
    if totals.draft_tokens:
        lines.append(
            f"drafted {totals.draft_tokens:.0f}, accepted {num(totals.accepted_tokens, '.0f')} ({pct(totals.acceptance_rate)}),"
            f" mean accepted length {num(totals.mean_accepted_length, '.2f')}, by position {_positions(totals.per_position)}"
        )
    elif totals.tokens_per_verify is not None:
        lines.append(f"tokens per verify call {totals.tokens_per_verify:.2f}")
    said = energy_line(energy) if energy is not None else None
    if said:
        lines.append(said)
    return lines
