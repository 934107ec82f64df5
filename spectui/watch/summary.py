"""A recorded watch summed up: what ``spectui report`` prints for a watch's recording (a table,
or one JSON object), and the numbers ``spectui history`` keeps of it.

The figures are the live watch's: the recording's readings folded through the same
``WatchCore`` (``spectui.watch.record.read_watch``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from spectui.format import NA, num_or_na, section_title, size, text_table
from spectui.recording.reader import Recording
from spectui.watch.record import WatchRecording, read_watch
from spectui.watch.text import energy_figures, energy_line, summary_json, watch_joules


@dataclass(frozen=True)
class ProcessFigures:
    readings: int
    peak_rss_bytes: int
    mean_cpu_pct: float
    peak_cpu_pct: float
    threads: int  # at the last reading


def process_figures(watch: WatchRecording) -> ProcessFigures | None:
    taken = [s.process for s in watch.samples if s.process is not None]
    if not taken:
        return None
    cpu = [p.cpu_pct for p in taken[1:]] or [taken[0].cpu_pct]  # the first reading's CPU covers no interval
    return ProcessFigures(len(taken), max(p.rss_bytes for p in taken), sum(cpu) / len(cpu), max(cpu), taken[-1].threads)


def _queue(watch: WatchRecording) -> tuple[float | None, float | None, float | None]:
    """(mean running, peak running, peak waiting) over the readings."""
    running = [s.reading.requests_running for s in watch.samples if s.reading is not None and s.reading.requests_running is not None]
    waiting = [s.reading.requests_waiting for s in watch.samples if s.reading is not None and s.reading.requests_waiting is not None]
    mean = sum(running) / len(running) if running else None
    return mean, max(running) if running else None, max(waiting) if waiting else None


def watch_rows(rec: Recording) -> list[tuple[str, list[tuple[str, str]]]]:
    watch = read_watch(rec)
    info, h, t = watch.info, watch.header, watch.totals
    status = "complete" if watch.end is not None else "incomplete (no end record: the watch was killed; every complete reading is here)"
    if watch.truncated:
        status += f", truncated at byte {rec.truncated_at}"
    about = ", ".join(f"{k} {v}" for k, v in info.identity.items() if k != "server")
    host = h.artifacts.host
    watcher = f"{host.cpu or host.machine or 'unknown host'} x{host.cpu_count}" + (f" (node {h.node})" if h.node else "")
    failed = f" ({watch.failed} failed)" if watch.failed else ""
    ended = {"length": "ran to its --samples / --duration", "interrupted": "stopped (q, Ctrl-C or a signal)"}
    run = [
        ("file", str(rec.path)),
        ("status", status),
        ("server", f"{info.server} at {info.url}" + (f" ({about})" if about else "")),
        ("metric names", info.metric_source),
        ("watched from", watcher),
        ("started", h.started_at),
        ("duration", f"{t.seconds:.1f} s, {len(watch.samples)} readings every {info.interval_s:g} s{failed}"),
        *([("ended", ended.get(watch.end.reason, watch.end.reason))] if watch.end is not None else []),
        *([("restarts", f"{t.restarts} (each counted from zero)")] if t.restarts else []),
    ]
    mean_running, peak_running, peak_waiting = _queue(watch)
    traffic = [
        ("generated", f"{num_or_na(t.generated_tokens, '.0f')} tokens, {num_or_na(t.generated_tok_s)} tok/s"),
        ("requests running", f"mean {num_or_na(mean_running, '.2f')}, peak {num_or_na(peak_running, '.0f')}"),
        ("requests waiting", f"peak {num_or_na(peak_waiting, '.0f')}"),
        ("requests finished", num_or_na(t.requests_finished, ".0f") if t.requests_finished is not None
         else info.not_reported.get("requests finished", NA)),
    ]  # fmt: skip
    spec = []
    if t.draft_tokens:
        per_pos = " ".join(f"{p:.2f}" for p in t.per_position) or info.not_reported.get("acceptance per draft position", NA)
        spec = [
            ("drafts / drafted / accepted", f"{num_or_na(t.drafts, '.0f')} / {t.draft_tokens:.0f} / {num_or_na(t.accepted_tokens, '.0f')}"),
            ("acceptance rate", num_or_na(t.acceptance_rate, ".3f")),
            ("mean accepted length", num_or_na(t.mean_accepted_length, ".2f")),
            ("per-position acceptance", per_pos),
        ]
    elif t.tokens_per_verify is not None:
        spec = [("tokens per verify call", f"{t.tokens_per_verify:.2f}")]
    else:
        spec = [("speculation", "no draft counted during the watch")]
    spec += [(figure, f"not reported: {why}") for figure, why in info.not_reported.items() if figure != "requests finished"]
    sections = [("watch", run), ("traffic", traffic), ("speculation", spec)]
    proc = process_figures(watch)
    if proc is not None:
        sections.append(("server process", [
            ("process", info.process or "the process on the server's port"),
            ("peak RSS", size(proc.peak_rss_bytes)),
            ("CPU", f"mean {proc.mean_cpu_pct:.0f}%, peak {proc.peak_cpu_pct:.0f}% of one core"),
            ("threads", str(proc.threads)),
        ]))  # fmt: skip
    elif info.process_note:
        sections.append(("server process", [("process", info.process_note)]))
    said = energy_line(energy_figures(watch_joules(watch.samples), t, info.energy))
    if said:
        sections.append(("energy", [("this machine", said.removeprefix("energy: "))]))
    return sections


def format_watch_report(rec: Recording) -> str:
    sections = watch_rows(rec)
    width = max(len(k) for _, rows in sections for k, _ in rows)
    lines = []
    for title, rows in sections:
        lines.append(section_title(title, width + 24))
        lines.append(text_table(None, [[k, v] for k, v in rows], min_widths=[width]))
    return "\n".join(lines)


def watch_report_json(rec: Recording) -> dict[str, Any]:
    watch = read_watch(rec)
    proc = process_figures(watch)
    return {
        "file": str(rec.path),
        "kind": "watch",
        "complete": watch.end is not None,
        "truncated": rec.truncated,
        "truncated_at": rec.truncated_at,
        "header": msgspec.to_builtins(watch.header),
        "summary": summary_json(watch.totals, len(watch.samples), watch.failed,
                                energy_figures(watch_joules(watch.samples), watch.totals, watch.info.energy)),
        "process": None if proc is None else proc.__dict__,
    }
