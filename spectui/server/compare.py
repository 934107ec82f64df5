"""What ``spectui diff`` needs to compare a server recording with an embedded one (or another
server's).

A server recording has no prompt tokens (the server tokenizes and applies its own chat
template) and, unless a local copy of the model was named, no model sha256. Two runs are then
comparable when they sent the same prompt the same way (chat or raw) to the same model, known
by its sha256 where both sides have one, else by its name. The outputs are compared token by
token when both sides have ids (a server's re-tokenized from its text), else character by
character; an embedded run's final end-of-generation token is left out against a server's,
which never streams that token.
"""

from __future__ import annotations

import os

from spectui.recording.output import decode_pieces
from spectui.recording.reader import Recording
from spectui.recording.schema import End, Header


def is_server(h: Header) -> bool:
    return h.artifacts.server is not None


def model_name(h: Header) -> str:
    """The model's file or directory name without extension: the embedded run's target path,
    a server's local model or, failing that, the id it lists."""
    a = h.artifacts
    source = a.target.path or (a.server.model_id if a.server is not None else "") or a.target.name
    base = os.path.basename(source.rstrip("/")) or source
    return base[: -len(".gguf")] if base.lower().endswith(".gguf") else base


def comparability(b: Header, c: Header) -> tuple[list[str], str]:
    """(why the two cannot be compared, what they were compared by) with a server involved."""
    why = []
    if (b.config.messages(), b.config.chat) != (c.config.messages(), c.config.chat):
        def how(h: Header) -> str:
            return "chat" if h.config.chat else "raw"

        why.append(f"the prompts differ ({how(b)} {len(b.config.prompt)} chars vs {how(c)} {len(c.config.prompt)} chars)")
    bs, cs = b.artifacts.target.sha256, c.artifacts.target.sha256
    if bs and cs:
        by = "the model file's sha256"
        if bs != cs:
            why.append(f"the target models differ (sha256 {bs[:12]} vs {cs[:12]})")
    else:
        by = "the model's name (no sha256 on a server side: give that run --target FILE)"
        if model_name(b) != model_name(c):
            why.append(f"the models differ ({model_name(b)} vs {model_name(c)})")
    basis = f"a server recording has no prompt tokens: compared by the prompt text ({'chat' if c.config.chat else 'raw'}) and {by}"
    return why, basis


def _token_ids(rec: Recording) -> str:
    end = next((e for e in reversed(rec.events) if type(e) is End), None)
    if end is not None and end.server is not None:
        return end.server.token_ids
    return "exact"  # the embedded engine's own ids


def _stopped(rec: Recording) -> bool:
    last = rec.events[-1] if rec.events else None
    return type(last) is End and last.reason == "stop"


def align_outputs(
    baseline: Recording, candidate: Recording, b: tuple[list[int], list[bytes]], c: tuple[list[int], list[bytes]]
) -> tuple[tuple[list[int], list[bytes]], tuple[list[int], list[bytes]], str, list[str]]:
    """The two outputs made comparable: (baseline, candidate, unit, notes)."""
    notes = []
    sides = [baseline, candidate]
    outs = [b, c]
    servers = [is_server(r.header) for r in sides]
    if servers[0] != servers[1] and all(_stopped(r) for r in sides):
        i = servers.index(False)
        if outs[i][0]:
            outs[i] = (outs[i][0][:-1], outs[i][1][:-1])
            notes.append(f"the {('baseline', 'candidate')[i]}'s end-of-generation token is left out (servers do not stream it)")
    if any("none" in _token_ids(r).split("+") for r in sides):
        notes.append("compared character by character: a server recording has no token ids (no local vocabulary)")
        outs = [_characters(o) for o in outs]
        return outs[0], outs[1], "character", notes
    methods = [_token_ids(r).split("+") for r in sides]
    if any(m == ["re-tokenized"] for m in methods):
        notes.append("server token ids are its streamed text re-tokenized with the local vocabulary")
    elif any("re-tokenized" in m for m in methods):  # the server sent ids, except where they fell short
        notes.append("server token ids are the server's, and its streamed text re-tokenized where they did not cover it")
    return outs[0], outs[1], "token", notes


def _characters(out: tuple[list[int], list[bytes]]) -> tuple[list[int], list[bytes]]:
    text = decode_pieces(out[1])
    return [ord(ch) for ch in text], [ch.encode("utf-8") for ch in text]
