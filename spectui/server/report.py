"""The "server" section of ``spectui report`` for a ``--server`` recording: what was measured,
how the token ids and the prefill were obtained, and the acceptance the server reported (or
that it reported none)."""

from __future__ import annotations

from typing import Any

import msgspec

from spectui.recording.reader import Recording
from spectui.recording.schema import End, Prefill, ServerReport
from spectui.server.wire import ACCEPTED_TOKENS, DRAFT_TOKENS, DRAFTS

NOT_REPORTED = "not reported"


def server_report(rec: Recording) -> ServerReport | None:
    end = next((e for e in reversed(rec.events) if type(e) is End), None)
    return end.server if end is not None else None


def acceptance_text(report: ServerReport | None) -> str:
    if report is None:
        return f"{NOT_REPORTED} (the recording has no end record)"
    if report.drafted < 0:
        return report.acceptance_source or NOT_REPORTED
    rate = f"{report.accepted / report.drafted:.3f}" if report.drafted else "n/a"
    return f"{rate} ({report.accepted} of {report.drafted} drafted) from {report.acceptance_source}"


def server_rows(rec: Recording) -> list[tuple[str, str]]:
    a = rec.header.artifacts
    s = a.server
    if s is None:
        return []
    report = server_report(rec)
    prefill = next((e for e in rec.events if type(e) is Prefill), None)
    rows = [
        ("url", s.url),
        ("server", f"{s.kind} {s.version}".strip()),
        ("endpoint", s.endpoint),
        ("model id", s.model_id or "(none listed)"),
        ("local model", f"{a.target.path} ({s.vocabulary_source})" if s.vocabulary_source else "none (identity from the model id only)"),
        ("token ids", _token_ids(report, s.vocabulary)),
        ("prefill", prefill.source if prefill is not None else "no content arrived"),
        ("acceptance", acceptance_text(report)),
    ]
    if report is not None:
        if report.timings:
            t = report.timings
            rows.append((
                "server timings",
                f"prompt {t.get('prompt_n', 0):.0f} tokens in {t.get('prompt_ms', 0):.1f} ms (cache {t.get('cache_n', 0):.0f}), "
                f"predicted {t.get('predicted_n', 0):.0f} in {t.get('predicted_ms', 0):.1f} ms "
                f"({t.get('predicted_per_second', 0):.1f} tok/s)",
            ))
        if report.prompt_tokens >= 0 or report.completion_tokens >= 0:
            rows.append(("usage (prompt / completion)", f"{_n(report.prompt_tokens)} / {_n(report.completion_tokens)}"))
        rows.append(("/metrics", _metrics_text(report)))
        rows.append(("finish (server)", report.finish_reason or "none"))
        if report.system_fingerprint:
            rows.append(("system fingerprint", report.system_fingerprint))
    rows += [(k, v) for k, v in s.props.items() if "speculative" in k or k.startswith("slots.") or k == "identified_by"]
    return rows


def server_json(rec: Recording) -> dict[str, Any] | None:
    if rec.header.artifacts.server is None:
        return None
    report = server_report(rec)
    return {
        "report": msgspec.to_builtins(report) if report is not None else None,
        "acceptance": acceptance_text(report),
    }


def _n(v: int) -> str:
    return NOT_REPORTED if v < 0 else str(v)


def _token_ids(report: ServerReport | None, vocabulary: str) -> str:
    method = report.token_ids if report is not None else ""
    if method == "re-tokenized":
        return f"re-tokenized from the streamed text with {vocabulary}"
    if method == "server":
        return "sent by the server"
    if method == "none":
        return "none (no local vocabulary: one -1 per chunk)"
    return method or "unknown"


def _metrics_text(report: ServerReport) -> str:
    d = report.metrics_delta
    if DRAFT_TOKENS in d or DRAFTS in d:
        drafts, drafted, accepted = (d.get(k, 0) for k in (DRAFTS, DRAFT_TOKENS, ACCEPTED_TOKENS))
        text = f"spec_decode +{drafts:.0f} drafts, +{drafted:.0f} drafted, +{accepted:.0f} accepted"
    elif d:
        text = "no spec_decode counters (this llama-server build exposes none)"
    else:
        text = NOT_REPORTED
    return f"{text}; {report.metrics_note}" if report.metrics_note else text
