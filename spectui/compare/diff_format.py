"""How a ``spectui diff`` reads: text for a terminal (``format_diff_text``) and markdown
(``format_diff_markdown``) of the ``RunDiff`` that ``spectui.compare.diff`` computes."""

from __future__ import annotations

from spectui.compare.diff import OutputDiff, RunDiff, RunSide
from spectui.compare.energy import energy_markdown, energy_text
from spectui.compare.headers import Value
from spectui.format import markdown_table, mib, num_or_na, section_title, signed_mib, text_table
from spectui.metrics.stats import Summary

#: A terminal table clips long values (llama.cpp's system_info line); --json has them whole.
CELL_WIDTH = 56


def _show(v: Value) -> str:
    if v is None:
        return "(none)"
    if v == "":
        return "(empty)"
    return str(v)


def _escape(text: str) -> str:
    """Control characters visible, so a context stays on one line."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def _clip(v: str) -> str:
    return v if len(v) <= CELL_WIDTH else v[: CELL_WIDTH - 1] + "…"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if a == a and b == b and b > 0 else "n/a"


def _pct(a: float, b: float) -> str:
    return f"{(a / b - 1) * 100:+.1f}%" if a == a and b == b and b > 0 else "n/a"


def describe_outputs(o: OutputDiff, *, with_cause: bool = True) -> list[str]:
    u = o.unit
    if o.not_compared:
        return [f"{o.not_compared} ({o.baseline_length} vs {o.candidate_length} {u}s)"]
    if o.identical:
        return [f"identical: {o.common_length} {u}s", *(f"({n})" for n in o.notes)]
    d = o.first_divergence
    assert d is not None
    lines = []
    if o.n_differing:
        lines.append(
            f'diverge at {u} {d.index}: {d.baseline_token} "{_escape(d.baseline_piece)}" vs'
            f' {d.candidate_token} "{_escape(d.candidate_piece)}"; {o.n_differing} of {o.common_length} common positions differ'
        )
    else:
        lines.append(f"identical over the common {o.common_length} {u}s; one output continues past the other")
    if with_cause and d.cause is not None and o.n_differing:
        lines.append(f"cause: {d.cause.line}")
    if o.baseline_length != o.candidate_length:
        lines.append(f"lengths differ: {o.baseline_length} vs {o.candidate_length} {u}s")
    lines += [f"({n})" for n in o.notes]
    lines.append(f'baseline : "{_escape(d.baseline_context)}"')
    lines.append(f'candidate: "{_escape(d.candidate_context)}"')
    # the caret sits under the first character where the two sides part
    lines.append(" " * (len('candidate: "') + len(_escape(d.baseline_context[: d.context_offset]))) + "^")
    return lines


Row = list[str]


def _speed_rows(d: RunDiff) -> list[Row]:
    b, c, sp = d.baseline.summary, d.candidate.summary, d.speedup
    ci = f" (95% CI {num_or_na(sp.ci_low, '.2f')}-{num_or_na(sp.ci_high, '.2f')})" if sp.ci_low == sp.ci_low else ""
    ttft = _pct(c.ttft_ms, b.ttft_ms)
    if d.ttft_growth == d.ttft_growth:  # not NaN
        if d.short_prompt:
            ttft += f", {'within' if d.ttft_within_limit else 'beyond'} +{d.ttft_limit:.0%} (short prompt)"
        else:
            ttft += f", long prompt: the +{d.ttft_limit:.0%} limit does not apply"
    same = f"; over {sp.compared_tokens} tokens, up to where the outputs part" if sp.parted_at >= 0 else ""
    rows = [
        ["decode tok/s", num_or_na(sp.baseline_tok_s, ".2f"), num_or_na(sp.candidate_tok_s, ".2f"), _ratio(sp.ratio, 1.0) + ci + same],
        ["steady tok/s", num_or_na(b.steady_tok_s, ".2f"), num_or_na(c.steady_tok_s, ".2f"), _ratio(c.steady_tok_s, b.steady_tok_s)],
        ["TTFT ms", num_or_na(b.ttft_ms), num_or_na(c.ttft_ms), ttft],
        ["prefill ms", num_or_na(b.prefill_ms), num_or_na(c.prefill_ms), _pct(c.prefill_ms, b.prefill_ms)],
    ]
    for q in ("p50", "p95", "p99"):
        bv, cv = getattr(b, f"itl_{q}_ms"), getattr(c, f"itl_{q}_ms")
        rows.append([f"ITL {q} ms", num_or_na(bv, ".2f"), num_or_na(cv, ".2f"), _pct(cv, bv)])
    return rows


def _accept_rows(d: RunDiff) -> list[Row]:
    b, c = d.baseline.summary, d.candidate.summary

    def per_pos(s: Summary) -> str:
        return " ".join(num_or_na(x, ".2f") for x in s.per_position_acceptance) or "n/a"

    rows = []
    if d.baseline.server_acceptance or d.candidate.server_acceptance:
        rows.append(["acceptance (server-reported)", d.baseline.server_acceptance or "-", d.candidate.server_acceptance or "-", ""])
    return rows + [
        ["acceptance rate", num_or_na(b.acceptance_rate, ".3f"), num_or_na(c.acceptance_rate, ".3f"), ""],
        ["mean accepted length", num_or_na(b.mean_accepted_length, ".2f"), num_or_na(c.mean_accepted_length, ".2f"), ""],
        ["per-position acceptance", per_pos(b), per_pos(c), ""],
        ["blocks / rollbacks", f"{b.draft_blocks} / {b.rollbacks}", f"{c.draft_blocks} / {c.rollbacks}", ""],
        ["draft forwards", str(b.draft_forwards), str(c.draft_forwards), ""],
    ]


def _memory_rows(d: RunDiff) -> list[Row]:
    b, c = d.baseline, d.candidate
    bs, cs = b.summary, c.summary

    def peak(s: Summary) -> str:
        return mib(s.peak_rss_bytes) if s.peak_rss_bytes else "n/a"

    def growth(side: RunSide) -> str:
        return signed_mib(side.rss_growth_bytes) if side.first_rss_bytes else "n/a"

    rss_change = signed_mib(cs.peak_rss_bytes - bs.peak_rss_bytes) if bs.peak_rss_bytes and cs.peak_rss_bytes else ""
    return [
        ["peak RSS", peak(bs), peak(cs), rss_change],
        ["RSS growth (peak - first)", growth(b), growth(c), ""],
        ["minimum headroom", mib(bs.min_headroom_bytes), mib(cs.min_headroom_bytes), ""],
        ["swap delta", signed_mib(bs.swap_delta_bytes), signed_mib(cs.swap_delta_bytes), ""],
    ]


def _files_rows(d: RunDiff) -> list[Row]:
    b, c = d.baseline, d.candidate
    bs, cs = b.summary, c.summary
    return [
        ["file", b.file, c.file, ""],
        ["mode", b.mode, c.mode, ""],
        ["status", b.status, c.status, ""],
        ["finish", bs.finish_reason or "none", cs.finish_reason or "none", ""],
        ["tokens (prompt / generated)", f"{bs.n_prompt_tokens} / {bs.n_tokens}", f"{cs.n_prompt_tokens} / {cs.n_tokens}", ""],
    ]


def format_diff_text(d: RunDiff) -> str:
    sides = [["baseline", f"{d.baseline.file} ({d.baseline.mode})"], ["candidate", f"{d.candidate.file} ({d.candidate.mode})"]]
    lines = [text_table(None, sides, indent=0)]
    if d.forced:
        lines.append(f"COMPARED BY FORCE: {'; '.join(d.not_comparable)}")
    if d.basis:
        lines.append(d.basis)
    lines.append(section_title(f"artifacts: {len(d.artifacts)} difference{'s' if len(d.artifacts) != 1 else ''}"))
    if d.artifacts:
        rows = [[f.path, _clip(_escape(_show(f.baseline))), _clip(_escape(_show(f.candidate))), f.note] for f in d.artifacts]
        lines.append(text_table(["field", "baseline", "candidate", ""], rows))
    else:
        lines.append("  none: same model file, quant, runtime, template, sampling, prompt, host and spectui version")
    lines += _conditions_text(d)
    lines.append(section_title("configuration (expected to differ)"))
    if d.configuration:
        lines.append(text_table(["field", "baseline", "candidate"], [[f.path, _show(f.baseline), _show(f.candidate)] for f in d.configuration]))
    else:
        lines.append("  same mode, drafter and K")
    lines.append(section_title("runs"))
    lines.append(text_table(["", "baseline", "candidate", ""], _files_rows(d)))
    lines.append(section_title("outputs"))
    lines += ["  " + x for x in describe_outputs(d.outputs)]
    lines.append(section_title("speed"))
    lines.append(text_table(["", "baseline", "candidate", "candidate vs baseline"], _speed_rows(d)))
    lines += energy_text(d.energy)
    lines.append(section_title("acceptance"))
    lines.append(text_table(["", "baseline", "candidate", ""], _accept_rows(d)))
    lines.append(section_title("memory"))
    lines.append(text_table(["", "baseline", "candidate", "change"], _memory_rows(d)))
    return "\n".join(lines)


def _conditions_text(d: RunDiff) -> list[str]:
    """Differing run conditions, then each side's measured other load (a shared machine shows
    even when both sides were shared alike)."""
    n = len(d.conditions)
    lines = [section_title(f"run conditions: {n} difference{'s' if n != 1 else ''} (power, thermal, other load)")]
    rows = [[f.path, _show(f.baseline), _show(f.candidate)] for f in d.conditions]
    rows.append(["other load (measured)", d.baseline.other_load, d.candidate.other_load])
    rows.append(["busiest others", _clip(d.baseline.busiest_others), _clip(d.candidate.busiest_others)])
    lines.append(text_table(["condition", "baseline", "candidate"], rows))
    return lines


def _markdown(header: list[str], rows: list[Row]) -> list[str]:
    """A markdown table of visible-escaped cells, then a blank line."""
    return [markdown_table(header, [[_escape(v) for v in r] for r in rows]), ""]


def format_diff_markdown(d: RunDiff) -> str:
    lines = [
        "## spectui diff",
        "",
        f"* baseline: `{d.baseline.file}` ({d.baseline.mode}, {d.baseline.status})",
        f"* candidate: `{d.candidate.file}` ({d.candidate.mode}, {d.candidate.status})",
    ]
    if d.forced:
        lines.append(f"* **compared by force**: {'; '.join(d.not_comparable)}")
    if d.basis:
        lines.append(f"* {d.basis}")
    lines += ["", f"### Artifacts ({len(d.artifacts)} differences)", ""]
    if d.artifacts:
        rows = [[f"`{f.path}`", _show(f.baseline), _show(f.candidate), f.note] for f in d.artifacts]
        lines += _markdown(["field", "baseline", "candidate", "note"], rows)
    else:
        lines += ["None: same model file, quant, runtime, template, sampling, prompt, host and spectui version.", ""]
    lines += [f"### Run conditions ({len(d.conditions)} differences)", ""]
    rows = [[f.path, _show(f.baseline), _show(f.candidate)] for f in d.conditions]
    rows += [["other load (measured)", d.baseline.other_load, d.candidate.other_load]]
    lines += _markdown(["condition", "baseline", "candidate"], rows)
    lines += ["### Configuration (expected to differ)", ""]
    if d.configuration:
        rows = [[f"`{f.path}`", _show(f.baseline), _show(f.candidate)] for f in d.configuration]
        lines += _markdown(["field", "baseline", "candidate"], rows)
    else:
        lines += ["Same mode, drafter and K.", ""]
    lines += ["### Outputs", ""]
    o = describe_outputs(d.outputs, with_cause=False)
    lines += [o[0], ""]
    div = d.outputs.first_divergence
    if div is not None and div.cause is not None and d.outputs.n_differing:
        lines += [f"**Cause:** {div.cause.line}", ""]
    if len(o) > 1:
        lines += ["```", *o[1:], "```", ""]
    lines += ["### Speed", ""]
    lines += _markdown(["metric", "baseline", "candidate", "candidate vs baseline"], _speed_rows(d))
    lines += energy_markdown(d.energy)
    lines += ["### Acceptance", ""]
    lines += _markdown(["metric", "baseline", "candidate"], [r[:3] for r in _accept_rows(d)])
    lines += ["### Memory", ""]
    lines += _markdown(["metric", "baseline", "candidate", "change"], _memory_rows(d))
    return "\n".join(lines).rstrip() + "\n"
