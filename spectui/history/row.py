"""What the history index keeps of one recording: its row (``IndexedRun``), read from the
recording's header and events (a session's) or from its watch (a server watched), with an
unreadable file's reason in place of its figures. The index (``spectui.history.index``) stores
and refreshes the rows; this module knows nothing of SQLite."""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass

from spectui.errors import SpectuiError
from spectui.format import model_name
from spectui.history.labels import run_label
from spectui.recording.reader import Recording
from spectui.recording.schema import Header

#: the file ``spectui sweep`` writes into its folder (``spectui.lab.sweep.MANIFEST``; lab sits
#: beside this package, so the name is repeated rather than imported)
SWEEP_MANIFEST = "sweep.json"


@dataclass(slots=True)
class IndexedRun:
    """One recording as the index holds it. Numbers a run does not have are NaN."""

    path: str
    size: int = 0
    mtime_ns: int = 0
    note: str = ""  # non-empty: the file could not be read, and why (one line)
    started_at: str = ""  # ISO 8601 UTC, from the header
    host: str = ""  # the machine: CPU, cores, memory (a series never spans two)
    os: str = ""  # the OS release (what may change on one machine, with host_detail)
    host_detail: str = ""  # Python, GPU
    target_sha256: str = ""
    target_name: str = ""
    target_quant: str = ""
    backend: str = ""
    mode: str = ""
    drafter: str = ""  # "AR", "n-gram" or the draft model's file name
    draft_source: str = ""  # as the configuration names it: "ngram" or a path (sweep floors use it)
    draft_sha256: str = ""
    k: str = ""  # "K=4", "K=1..16 adaptive", "" for AR
    #: the run's one label, as the dashboard's header and compare columns give it
    #: (``history.labels.run_label``): "spec n-gram K=1..16 adaptive", "AR", ...
    label: str = ""
    k_value: int = 0
    sampling: str = ""
    prompt: str = ""  # the prompt's name, else a digest and its first words
    prompt_tier: str = ""
    runtime: str = ""  # JSON object, sorted keys: {"llama-cpp-python": "0.3.16", ...}
    chat_template: str = ""  # the target's chat template sha256
    spectui_version: str = ""
    sweep: str = ""  # the sweep folder holding this recording, "" if none
    n_tokens: int = 0
    complete: bool = False
    decode_tok_s: float = float("nan")
    acceptance: float = float("nan")
    itl_p95_ms: float = float("nan")
    ttft_ms: float = float("nan")
    peak_rss_bytes: float = float("nan")
    #: a watch's recording: the server watched ("llama-server at http://127.0.0.1:8080"); "" for a
    #: session. A watch's row: ``backend`` the server's kind, ``mode`` "watch", ``prompt`` its
    #: URL, ``target_name`` its model, ``runtime`` its build; ``decode_tok_s`` the tokens/s it
    #: generated over the watch (all its requests), ``acceptance`` its acceptance rate,
    #: ``peak_rss_bytes`` its process's peak RSS where read, ``n_tokens`` the tokens it generated
    watch: str = ""
    watch_seconds: float = float("nan")

    @property
    def readable(self) -> bool:
        return not self.note

    @property
    def is_watch(self) -> bool:
        return bool(self.watch)


def index_file(path: str, size: int, mtime_ns: int) -> IndexedRun:
    """The row of one recording; an unreadable file becomes a row with its reason."""
    from spectui.metrics.stats import summarize
    from spectui.recording.reader import read_recording

    run = IndexedRun(path=path, size=size, mtime_ns=mtime_ns)
    try:
        rec = read_recording(path)
    except SpectuiError as exc:
        run.note = str(exc).replace(path, "").strip(" :") or "unreadable"
        return run
    except OSError as exc:
        run.note = f"cannot read: {exc.strerror or exc}"
        return run
    if rec.header.watch is not None:
        fill_from_watch(run, rec)
        return run
    fill_from_header(run, rec.header)
    s = summarize(rec.events)
    run.n_tokens, run.complete = s.n_tokens, rec.complete
    run.decode_tok_s, run.acceptance, run.itl_p95_ms, run.ttft_ms = s.decode_tok_s, s.acceptance_rate, s.itl_p95_ms, s.ttft_ms
    run.peak_rss_bytes = float(s.peak_rss_bytes) if s.peak_rss_bytes else float("nan")
    folder = os.path.dirname(path)
    run.sweep = folder if os.path.isfile(os.path.join(folder, SWEEP_MANIFEST)) else ""
    return run


def parse_time(text: str) -> dt.datetime | None:
    """An ISO 8601 start time; naive ones are UTC (as the writer's are); None if unreadable."""
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.timezone.utc)


def fill_from_header(run: IndexedRun, h: Header) -> None:
    """The header's frozen facts as the index's columns (labels chosen once, here)."""
    import hashlib

    c, a = h.config, h.artifacts
    host = a.host
    memory = f", {host.total_memory_bytes / 2**30:.0f} GiB" if host.total_memory_bytes else ""
    run.host = f"{host.cpu or host.machine or 'unknown host'} x{host.cpu_count}{memory}"
    if h.node:  # a node's run (--host): the node's name leads, so two nodes alike never share a series
        run.host = f"{h.node}: {run.host}"
    run.os = host.os
    run.host_detail = ", ".join(x for x in (f"Python {host.python}" if host.python else "", host.gpu) if x)
    t = parse_time(h.started_at)  # one spelling (UTC, "+00:00"), so the text sorts by time
    run.started_at = t.astimezone(dt.timezone.utc).isoformat() if t is not None else h.started_at
    # the one display name every screen uses (format.model_name: the file's, not general.name)
    run.target_sha256, run.target_quant = a.target.sha256, a.target.quant
    run.target_name = model_name(a.target.path or c.target) if a.target.path or not a.target.name else a.target.name
    run.chat_template = a.target.chat_template_sha256
    run.backend, run.mode = c.backend.name, c.mode
    draft_path = a.draft.path if a.draft is not None else ""
    run.label = run_label(c, draft_path)
    if c.mode == "ar":
        run.drafter, run.k = "AR", ""
    elif c.backend.name == "server":  # the server drafts as it is configured: one series whatever ours said
        run.drafter, run.k = "server", ""
    else:
        d = c.draft
        name = os.path.basename(d.flag) if d.has_model else ""
        run.drafter = d.drafter_label if not d.has_model else model_name(draft_path or name)
        # k_value: a fixed K, what a sweep's floor is kept for (0: cost-aware, or the runtime's)
        run.draft_source, run.k, run.k_value = d.flag, d.k_label(), d.fixed_k or 0
        run.draft_sha256 = a.draft.sha256 if a.draft is not None else ""
    s = c.sampling
    run.sampling = "greedy" if s.greedy else f"T={s.temperature:g} top-k={s.top_k} top-p={s.top_p:g} seed={s.seed}"
    if c.prompt_name:
        run.prompt = c.prompt_name
    else:
        words = " ".join(c.prompt.split())
        digest = hashlib.sha256(c.prompt.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        run.prompt = f"{digest} {words[:24]}{'…' if len(words) > 24 else ''}"
    run.prompt_tier = c.prompt_tier
    run.runtime = json.dumps(dict(sorted(a.runtime.items())))
    run.spectui_version = h.spectui_version


def fill_from_watch(run: IndexedRun, rec: Recording) -> None:
    """A watch's row (``IndexedRun.watch``): grouped by the server, its figures the watch's."""
    from spectui.watch.record import read_watch
    from spectui.watch.summary import process_figures

    h = rec.header
    watch = read_watch(rec)
    info = watch.info
    host = h.artifacts.host
    run.host = f"{host.cpu or host.machine or 'unknown host'} x{host.cpu_count}"
    if h.node:
        run.host = f"{h.node}: {run.host}"
    run.os = host.os
    t = parse_time(h.started_at)
    run.started_at = t.astimezone(dt.timezone.utc).isoformat() if t is not None else h.started_at
    run.watch = f"{info.server} at {info.url}"
    run.backend, run.mode, run.label, run.prompt = info.server, "watch", f"watch of {info.server}", info.url
    run.target_name = info.identity.get("model", "")
    run.runtime = json.dumps({f"{info.server} build": info.identity["build"]} if info.identity.get("build") else {})
    run.spectui_version = h.spectui_version
    totals = watch.totals
    run.n_tokens, run.complete = int(totals.generated_tokens or 0), watch.end is not None
    run.watch_seconds = totals.seconds
    run.decode_tok_s = totals.generated_tok_s if totals.generated_tok_s is not None else float("nan")
    run.acceptance = totals.acceptance_rate if totals.acceptance_rate is not None else float("nan")
    proc = process_figures(watch)
    run.peak_rss_bytes = float(proc.peak_rss_bytes) if proc is not None else float("nan")
