"""``spectui models``: the local model catalogue, each target with its compatible drafts and
the trained heads (EAGLE-3, DFlash, DSpark) that fit it (``spectui.models.heads``).

No model is loaded: metadata only (``spectui.models.catalogue``). The names printed are what
``--target`` and ``--draft`` accept.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from spectui.format import terminal_safe

if TYPE_CHECKING:  # imported on use: listing models must not slow every command's start
    from spectui.models.catalogue import Catalogue, ModelEntry
    from spectui.models.heads import HeadInfo


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "models",
        help="the models on this machine (LM Studio, Ollama, Hugging Face cache, llama.cpp cache, folders) and their compatible drafts",
    )
    p.add_argument("folders", nargs="*", metavar="DIR", help="more folders to search (also: $SPECTUI_MODELS)")
    p.add_argument("--json", action="store_true", help="one JSON object: every model, its drafts, and the notes")
    p.add_argument(
        "--drafts-for", metavar="NAME", default=None,
        help="one target: its compatible drafts, and every other model with the reason it cannot draft for it",
    )
    p.set_defaults(func=cmd_models)


def cmd_models(args: argparse.Namespace) -> int:
    import msgspec

    from spectui.models.catalogue import discover

    cat = discover(args.folders)
    if args.drafts_for is not None:
        return _drafts_for(cat, args.drafts_for, as_json=args.json)
    if args.json:
        heads = heads_by_target(cat)
        doc = {
            "models": [{**msgspec.to_builtins(m), "drafts": [d.name for d in cat.drafts_for(m)],
                        "heads": [{"name": h.name, "method": info.method} for h, info in heads.get(m.path, [])]}
                       for m in cat.models],
            "notes": cat.notes,
        }
        print(msgspec.json.encode(doc).decode())
        return 0
    print(terminal_safe(format_catalogue(cat), multiline=True))  # names and notes read from model files
    if any(m.source == "embedded" for m in cat.models):
        from spectui.engine.host.weights import embedded_note

        note = embedded_note()
        if note:
            print(f"note: {terminal_safe(note)}")
    return 0


def format_catalogue(cat: Catalogue) -> str:
    from spectui.format import size, text_table

    def row(m: ModelEntry, prefix: str = "") -> list[str]:
        params = f"{m.n_params / 1e9:.1f}B" if m.n_params >= 1e9 else f"{m.n_params / 1e6:.0f}M"
        return [
            prefix + m.name, m.source, m.format, m.architecture, params, m.quant, size(m.size_bytes),
            f"{m.n_ctx_train:,}" if m.n_ctx_train else "?", m.vocab_sha256[:12] or "?",
        ]

    rows: list[list[str]] = []
    rules: set[int] = set()
    heads = heads_by_target(cat)
    for m in cat.models:
        rules.add(len(rows))
        rows.append(row(m))
        rows += [row(d, "  draft: ") for d in cat.drafts_for(m)]
        rows += [row(h, f"  head ({info.method}): ") for h, info in heads.get(m.path, [])]
    header = ["model (--target / --draft)", "source", "format", "arch", "params", "quant", "size", "trained ctx", "vocab"]
    lines = [f"spectui models: {len(cat.models)} found"]
    lines += [f"note: {n}" for n in cat.notes]
    if rows:
        lines.append(text_table(header, rows, right={4, 6, 7}, rules_before=rules))
    return "\n".join(lines)


def heads_by_target(cat: Catalogue) -> dict[str, list[tuple[ModelEntry, HeadInfo]]]:
    """Each GGUF target's path -> the heads in the catalogue that fit it. The headers are read
    only when there is a head: a catalogue without one costs nothing more."""
    from spectui.errors import SpectuiError
    from spectui.models.gguf import read_gguf
    from spectui.models.heads import HEAD_ARCHITECTURES, is_head, misfit, read_head

    heads = []
    for m in cat.models:
        if m.format == "gguf" and m.architecture in HEAD_ARCHITECTURES:
            try:
                info = read_head(m.path)
            except SpectuiError:
                continue  # unreadable: the catalogue already says so
            if info is not None:
                heads.append((m, info))
    out: dict[str, list[tuple[ModelEntry, HeadInfo]]] = {}
    if not heads:
        return out
    for m in cat.models:
        if m.format != "gguf" or m.architecture in HEAD_ARCHITECTURES:
            continue
        try:
            target = read_gguf(m.path)
        except SpectuiError:
            continue
        if not is_head(target):
            out[m.path] = [(h, info) for h, info in heads if misfit(info, target) is None]
    return out


def _drafts_for(cat: Catalogue, name: str, *, as_json: bool) -> int:
    import msgspec

    from spectui.errors import SpectuiError

    target = cat.find(name)
    if target is None:
        raise SpectuiError(f"model {name!r} not found in the catalogue; `spectui models` lists the names")
    drafts, refused = cat.drafts_for(target), cat.refused_drafts(target)
    if as_json:
        doc = {
            "target": target.name,
            "drafts": [d.name for d in drafts],
            "refused": [{"name": m.name, "reason": why} for m, why in refused],
        }
        print(msgspec.json.encode(doc).decode())
        return 0
    lines = [f"drafts for {target.name} ({target.architecture}, {target.quant}):"]
    lines += [f"  {d.name}" for d in drafts] or ["  none: only n-gram drafting (--draft ngram) fits this target"]
    if refused:
        lines.append("cannot draft for it:")
        lines += [f"  {m.name}: {why}" for m, why in refused]
    print(terminal_safe("\n".join(lines), multiline=True))  # model names read from their files
    return 0
