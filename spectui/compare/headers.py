"""Two recordings' headers, field by field: what differs, and whether the runs compare at all.

``compare_headers`` splits the differences in two. *Artifacts* (model file, quant, runtime,
template, sampling, prompt, host, spectui version) should be equal for a fair comparison and
are listed first, most telling first. *Configuration* (mode, drafter, K) is what an AR-versus-
speculative comparison is for. ``comparability`` says why two runs cannot be compared at all:
different prompt tokens or different target weights (a server recording has its own rules, in
``spectui.server.compare``; a redacted one against one it was not redacted with is matched by
its prompt's length, ``spectui.recording.redact``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from spectui.metrics.same_text import common_tokens
from spectui.recording.redact import outputs_not_comparable
from spectui.recording.schema import Header

Value = str | int | float | bool | None


class FieldDiff(msgspec.Struct, kw_only=True):
    """One header field that differs. Long values (prompts, system info) are cut to the part
    around their first difference; ``note`` says where that is."""

    path: str  # e.g. "artifacts.target.sha256", "config.sampling.temperature"
    baseline: Value
    candidate: Value
    note: str = ""


def _flatten(prefix: str, obj: Any) -> Iterator[tuple[str, Any]]:
    """(dotted path, scalar) pairs of a msgspec-builtins tree, in field order."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _flatten(f"{prefix}.{k}", v)
    else:
        yield prefix, obj


def _fields(prefix: str, obj: Any) -> dict[str, Any]:
    return dict(_flatten(prefix, msgspec.to_builtins(obj)))


def _field_diff(path: str, a: Any, b: Any) -> FieldDiff:
    if isinstance(a, list) or isinstance(b, list):  # prompt tokens: far too long to show
        a, b = a or [], b or []
        i = common_tokens(a, b)
        note = f"first difference at token {i}"
        return FieldDiff(path=path, baseline=f"{len(a)} tokens", candidate=f"{len(b)} tokens", note=note)
    if isinstance(a, str) and isinstance(b, str) and max(len(a), len(b)) > 60:
        i = common_tokens(a, b)
        lo = max(0, i - 20)

        def cut(s: str) -> str:
            return ("..." if lo else "") + s[lo : i + 40] + ("..." if len(s) > i + 40 else "")

        note = f"first difference at character {i} ({len(a)} vs {len(b)} characters)"
        return FieldDiff(path=path, baseline=cut(a), candidate=cut(b), note=note)
    return FieldDiff(path=path, baseline=a, candidate=b)


def diffs(a: dict[str, Any], b: dict[str, Any]) -> list[FieldDiff]:
    """Every key whose values differ; a key only one side has shows as None."""
    keys = list(a) + [k for k in b if k not in a]
    return [_field_diff(k, a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)]


def _artifact_fields(h: Header, *, with_draft: bool, with_text: bool = True) -> dict[str, Any]:
    """Everything that should be equal between two runs being compared, most telling first.
    ``with_text=False`` (one side redacted, ``spectui.recording.redact``): the prompt by its
    length alone, since a redacted prompt's text and tokens compare with nothing."""
    c, a = h.config, h.artifacts
    if with_text:
        out: dict[str, Any] = {"prompt_tokens": h.prompt_tokens, "prompt_text": h.prompt_text, "config.prompt": c.prompt}
    else:
        out = {"prompt_tokens": f"{len(h.prompt_tokens)} tokens"}
    for name in ("prompt_tier", "chat", "target"):
        out[f"config.{name}"] = getattr(c, name)
    out.update(_fields("artifacts.target", a.target))
    out.update(_fields("config.sampling", c.sampling))
    out["config.max_tokens"] = c.max_tokens
    # an interleaved run's clock leaves out its peer's time: not comparable at face value
    out["clock"] = h.clock
    out.update(_fields("artifacts.runtime", a.runtime))
    out.update(_fields("config.backend", c.backend))
    out.update(_fields("artifacts.offload", a.offload))
    if with_draft and a.draft is not None:
        out.update(_fields("artifacts.draft", a.draft))
    out.update(_fields("artifacts.host", a.host))
    if a.server is not None:  # a measured server: where and what it was
        for name in ("url", "kind", "version", "endpoint", "model_id"):
            out[f"artifacts.server.{name}"] = getattr(a.server, name)
    out["spectui_version"] = h.spectui_version
    out["schema_version"] = h.schema_version
    return out


def _draft_label(h: Header) -> str | None:
    d = h.artifacts.draft
    return None if d is None else f"{d.name or d.path} ({d.quant}, sha256 {d.sha256[:12]})"


def compare_headers(b: Header, c: Header) -> tuple[list[FieldDiff], list[FieldDiff]]:
    """(artifact differences, configuration differences).

    The draft settings of an AR run are inert (the config keeps their defaults), so between AR
    and speculative only the mode, the drafter and K are listed. A draft model's own artifacts
    count as configuration when the drafter itself changed, and as artifacts when the same
    drafter path now holds a different file.
    """
    bc, cc = b.config, c.config
    config: list[FieldDiff] = []
    if bc.mode != cc.mode:
        config.append(FieldDiff(path="config.mode", baseline=bc.mode, candidate=cc.mode))
        config.append(
            FieldDiff(
                path="config.draft.drafter",
                baseline=bc.draft.flag if bc.mode == "spec" else None,
                candidate=cc.draft.flag if cc.mode == "spec" else None,
            )
        )
        config.append(
            FieldDiff(
                path="config.draft.length",
                baseline=bc.draft.k_label() if bc.mode == "spec" else None,
                candidate=cc.draft.k_label() if cc.mode == "spec" else None,
            )
        )
    elif bc.mode == "spec":
        config += diffs(_fields("config.draft", bc.draft), _fields("config.draft", cc.draft))
    same_drafter = bc.mode == cc.mode == "spec" and bc.draft.flag == cc.draft.flag
    both_drafts = b.artifacts.draft is not None and c.artifacts.draft is not None
    if not (same_drafter and both_drafts) and _draft_label(b) != _draft_label(c):
        config.append(FieldDiff(path="artifacts.draft", baseline=_draft_label(b), candidate=_draft_label(c)))
    with_draft = same_drafter and both_drafts
    text = not outputs_not_comparable(b, c)
    artifacts = diffs(_artifact_fields(b, with_draft=with_draft, with_text=text), _artifact_fields(c, with_draft=with_draft, with_text=text))
    return artifacts, config


def comparability(b: Header, c: Header) -> list[str]:
    """Why two runs cannot be compared (empty when they can)."""
    if b.artifacts.server is not None or c.artifacts.server is not None:
        from spectui.server.compare import comparability as server_comparability

        return server_comparability(b, c)[0]
    why = []
    if outputs_not_comparable(b, c):  # a redacted side's prompt tokens are stand-ins: their count is all that compares
        if len(b.prompt_tokens) != len(c.prompt_tokens):
            why.append(f"the prompts differ in length ({len(b.prompt_tokens)} vs {len(c.prompt_tokens)} tokens; one side is redacted)")
    elif b.prompt_tokens != c.prompt_tokens:
        i = common_tokens(b.prompt_tokens, c.prompt_tokens)
        why.append(
            f"the prompt tokens differ ({len(b.prompt_tokens)} vs {len(c.prompt_tokens)} tokens, first difference at token {i})"
        )
    bs, cs = b.artifacts.target.sha256, c.artifacts.target.sha256
    if bs != cs:
        why.append(f"the target models differ (sha256 {bs[:12] or 'unknown'} vs {cs[:12] or 'unknown'})")
    return why
