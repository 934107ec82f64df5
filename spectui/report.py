"""``spectui report``: everything a recording says about its run, as a table or as JSON.

Above what it reports on (recordings, metrics, the server's counters); beside ``lab``,
``compare`` and ``telemetry``, which it does not import.
"""

from __future__ import annotations

from typing import Any

import msgspec

from spectui.format import mib, model_name, num_or_na, section_title, text_table
from spectui.metrics.conditions import busiest_text, other_load_text, power_text, thermal_text, throttling_text
from spectui.metrics.energy_session import energy_text, session_energy
from spectui.metrics.envelope import EnvelopeFacts, envelope_lines, judge_sessions
from spectui.metrics.live import LiveRun
from spectui.metrics.stats import Summary, summarize
from spectui.recording.reader import Recording
from spectui.recording.schema import End, PolicyChange, Step


def report_rows(rec: Recording, s: Summary) -> list[tuple[str, list[tuple[str, str]]]]:
    h = rec.header
    c, a = h.config, h.artifacts
    mode = c.describe(draft_path=False)  # the draft's file is under artifacts
    sampling = "greedy" if c.sampling.greedy else (
        f"temperature {c.sampling.temperature}, top-k {c.sampling.top_k}, top-p {c.sampling.top_p}, seed {c.sampling.seed}"
    )
    status = "complete" if rec.complete else "incomplete (no end record)"
    if rec.truncated:
        status += f", truncated at byte {rec.truncated_at}"
    run = [
        ("file", str(rec.path)),
        ("status", status),
        ("started", h.started_at),
        ("mode", mode),
        ("sampling", sampling),
        *([("conversation", f"{c.conversation}, turn {c.turn}")] if c.conversation else []),
        ("prompt", f"{c.prompt_tier + ': ' if c.prompt_tier else ''}{c.prompt[:60]!r}{'...' if len(c.prompt) > 60 else ''}"),
        ("finish", s.finish_reason or "none (the run never wrote its end record)"),
    ]
    if h.redaction is not None:  # spectui.recording.redact
        run.append(("redacted", f"{h.redaction.redacted_at}, batch {h.redaction.batch}: no prompt, output or token ids"
                                " (its outputs compare only with copies redacted together)"))
    if h.clock != "wall":
        run.append(("clock", h.clock))
    if s.error:
        run.append(("error", s.error))
    speed = [
        ("prompt tokens", str(s.n_prompt_tokens) + (
            f" ({s.n_cached_tokens} kept in the cache from earlier turns, {s.n_prompt_tokens - s.n_cached_tokens} evaluated)"
            if s.n_cached_tokens else "")),
        ("generated tokens", str(s.n_tokens)),
        ("TTFT", f"{num_or_na(s.ttft_ms)} ms"),
        ("prefill", f"{num_or_na(s.prefill_ms)} ms ({num_or_na(s.prefill_tok_s)} tok/s)"),
        ("decode", f"{num_or_na(s.decode_tok_s)} tok/s"),
        ("steady decode", f"{num_or_na(s.steady_tok_s)} tok/s" + ("" if s.warmup_dropped else " (run too short to drop warm-up)")),
        ("ITL p50 / p95 / p99", f"{num_or_na(s.itl_p50_ms, '.2f')} / {num_or_na(s.itl_p95_ms, '.2f')} / {num_or_na(s.itl_p99_ms, '.2f')} ms"),
        ("energy", energy_text(session_energy(rec.events))),  # joules per token beside the speed it was spent at
    ]
    accept = []
    if c.mode == "spec" and a.server is None:  # a server's acceptance: the "server" section
        per_pos = " ".join(num_or_na(x, ".2f") for x in s.per_position_acceptance) or "n/a"
        accept = [
            ("acceptance rate", f"{num_or_na(s.acceptance_rate, '.3f')} ({s.accepted} of {s.drafted} drafted)"),
            ("mean accepted length", num_or_na(s.mean_accepted_length, ".2f")),
            ("per-position acceptance", per_pos),
            ("blocks / rollbacks", f"{s.draft_blocks} / {s.rollbacks}"),
            ("draft forwards", str(s.draft_forwards)),
            ("draft / verify time", f"{num_or_na(s.draft_ms)} / {num_or_na(s.verify_ms)} ms"),
            *block_rows(rec),
            *decision_rows(rec),
        ]
        if c.policy.enabled:
            changes = policy_changes(rec)
            accept.append(("fallback policy", f"on, {len(changes)} transition{'s' if len(changes) != 1 else ''}"))
            accept += [(f"  at {e.t_us / 1e6:.2f} s", f"{e.before} -> {e.after}: {e.reason}") for e in changes]
    memory = [
        ("peak RSS", mib(s.peak_rss_bytes) if s.peak_rss_bytes else "n/a"),
        ("minimum headroom", mib(s.min_headroom_bytes)),
        ("swap delta", mib(s.swap_delta_bytes)),
    ]
    t, d = a.target, a.draft
    artifacts = [
        # the one display name (format.model_name), the GGUF's own general.name as detail
        ("target", f"{model_name(t.path or c.target, t.quant)} ({t.name}; {t.architecture}, {t.quant}, {t.n_params / 1e6:.0f}M params)"),
        *([("target made by spectui", t.origin)] if t.origin else []),
        ("target sha256", t.sha256),
        ("vocab / template sha256", f"{t.vocab_sha256[:16]} / {t.chat_template_sha256[:16] or 'none'}"),
    ]
    if d is not None:
        artifacts += [("draft", f"{model_name(d.path or c.draft.flag, d.quant)} ({d.name}; {d.quant})"), ("draft sha256", d.sha256)]
    artifacts += [(k, v) for k, v in a.runtime.items() if k != "system_info"]
    artifacts += [(k, v) for k, v in a.offload.items()]
    artifacts += [
        ("host", f"{a.host.os} {a.host.machine}, {a.host.cpu} x{a.host.cpu_count}, {mib(a.host.total_memory_bytes)}"),
        ("spectui / schema", f"{h.spectui_version} / {h.schema_version}"),
    ]
    sections = [("run", run), ("speed", speed)]
    if accept:
        sections.append(("acceptance", accept))
    if a.server is not None:
        from spectui.server.report import server_rows

        sections.append(("server", server_rows(rec)))
    facts = judge_sessions([rec.events])
    sections += [("memory", memory), ("conditions", condition_rows(facts)), ("envelope", envelope_rows(facts)), ("artifacts", artifacts)]
    return sections


def block_rows(rec: Recording) -> list[tuple[str, str]]:
    """The prediction from the run's own blocks (``metrics.predict.predict_blocks``, as the
    dashboard's stats panel shows it): the blocks' expected and realized gain, the K cap they
    pay best under. Text only: the JSON keeps the keys scripts read."""
    p = LiveRun.from_events(rec.events).block_prediction()
    if p is None:
        return []
    return [
        ("predicted speedup", f"{p.speedup:.2f}x from the run's {p.blocks} blocks and {p.ar_steps} AR steps (AR step: {p.source})"),
        ("block gain", f"{p.realized_gain:+.1f} tokens beyond their cost, expected {p.expected_gain:+.1f} ({p.expected_source})"
                       f" ({p.block_tokens} tokens for {p.block_cost:.1f} AR steps)"),
        ("best K cap", f"K {p.best_cap}: {p.best_cap_speedup:.2f}x" if p.best_cap else "AR: no cap of these blocks beats it"),
    ]


def decision_rows(rec: Recording) -> list[tuple[str, str]]:
    """What the cost-aware K did with the run's proposals (``End.decisions``), one line; none
    for a fixed K or a recording made before it was recorded."""
    d = next((e.decisions for e in rec.events if type(e) is End), None)
    if d is None:
        return []
    held = d.low_confidence + d.backoff
    yielded = sum(e.accepted + 1 for e in rec.events if type(e) is Step and e.drafted)
    return [("proposals held back", f"{held} of {d.proposals}: {d.low_confidence} low confidence, {d.backoff} backoff"
                                    f" ({d.probes} probe{'s' if d.probes != 1 else ''}); {d.tail_cut} tails cut"
                                    f" ({d.tokens_cut} tokens); blocks priced at {d.expected_tokens:.1f} tokens, yielded {yielded}")]


def condition_rows(f: EnvelopeFacts) -> list[tuple[str, str]]:
    """Power, thermal state and other load: what the host exposed, the rest "not available"."""
    return [
        ("power", power_text(f)),
        ("thermal", thermal_text(f)),
        ("throttling", throttling_text(f)),
        ("other load", other_load_text(f)),
        ("busiest others", busiest_text(f) if f.other_cpu_mean is not None or f.other_processes else "not available"),
    ]


def envelope_rows(f: EnvelopeFacts) -> list[tuple[str, str]]:
    """Each declared limit, its measured value and whether it held (``n/a``: not available)."""
    rows = []
    for line in envelope_lines(f):
        mark = "FLAG" if line.flagged else {True: "ok", False: "BREACH", None: "n/a"}[line.passed]
        rows.append((line.name, f"{mark:<6} {line.value} (limit {line.limit}){'; ' + line.detail if line.detail else ''}"))
    if f.envelope.min_headroom_mib <= 0:
        rows.append(("declared", "no headroom floor, and the host's memory is unknown"))
    return rows


def policy_changes(rec: Recording) -> list[PolicyChange]:
    return [e for e in rec.events if type(e) is PolicyChange]


def format_report(rec: Recording) -> str:
    """The sections as key / value tables under ``-- title ---`` lines, the values of every
    section in one column."""
    if rec.header.watch is not None:  # a watch's recording (spectui watch): its own summary
        from spectui.watch.summary import format_watch_report

        return format_watch_report(rec)
    sections = report_rows(rec, summarize(rec.events))
    width = max(len(k) for _, rows in sections for k, _ in rows)
    lines = []
    for title, rows in sections:
        lines.append(section_title(title, width + 24))
        if rows:
            lines.append(text_table(None, [[k, v] for k, v in rows], min_widths=[width]))
    return "\n".join(lines)


def report_json(rec: Recording) -> dict[str, Any]:
    if rec.header.watch is not None:
        from spectui.watch.summary import watch_report_json

        return watch_report_json(rec)
    return {
        "file": str(rec.path),
        "complete": rec.complete,
        "truncated": rec.truncated,
        "truncated_at": rec.truncated_at,
        "header": _header_json(rec),
        "summary": msgspec.to_builtins(summarize(rec.events)),
        "policy_changes": msgspec.to_builtins(policy_changes(rec)),
        "envelope": _envelope_json(rec),
        "server": _server_json(rec),
        **_energy_json(rec),
    }


def _energy_json(rec: Recording) -> dict[str, Any]:
    """``{"energy": ...}`` for a recording that has an energy record (measured or why not);
    nothing for one made before spectui sampled energy, so its report keeps the keys it had."""
    energy = session_energy(rec.events)
    return {} if energy is None else {"energy": msgspec.to_builtins(energy)}


#: header fields added after scripts first read this JSON: shown only where they hold a value
#: (spectui made the model's file; a cost-aware K priced a draft model), so the report of every
#: other run keeps the keys scripts already read
_SHOWN_WHEN_SET = (
    ("artifacts", "target", "origin"), ("artifacts", "draft", "origin"), ("config", "draft", "draft_cost"), ("provenance",),
    ("config", "draft", "draft_model"), ("config", "draft", "lookup"), ("config", "backend", "runtime_binary"), ("watch",),
)


def _header_json(rec: Recording) -> dict[str, Any]:
    """The header as stored, less the ``_SHOWN_WHEN_SET`` fields that hold nothing."""
    header = msgspec.to_builtins(rec.header)
    for *path, name in _SHOWN_WHEN_SET:
        node = header
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and not node.get(name):
            node.pop(name, None)
    return header


def _envelope_json(rec: Recording) -> dict[str, Any]:
    facts = judge_sessions([rec.events])
    return {"facts": msgspec.to_builtins(facts), "checks": msgspec.to_builtins(envelope_lines(facts))}


def _server_json(rec: Recording) -> dict[str, Any] | None:
    from spectui.server.report import server_json  # only server recordings need it

    return server_json(rec)
