"""Prompt files: plain text a user can add to, each knowing its tier and token ceiling.

A prompt file is UTF-8 text. Leading lines of the form ``# key: value`` set metadata
(``tier``, ``max_tokens``); other leading ``#`` lines are comments; the rest is the prompt.
Without a ``tier`` line the tier is the file name up to its first ``-`` (``copy-typo-fix.txt``
is tier ``copy``); without ``max_tokens`` the ceiling is 256.

Quality prompts also say what passes: ``check: json`` with ``keys: city:str, population:int``,
or ``check: tool-call`` with ``tools: get_weather(city:str), get_time(timezone:str)`` and
optionally ``call: get_weather`` (see ``spectui.quality``). ``PromptSpec.check`` holds the
canonical one-line form, which runs record in their header. ``DEFAULT_PROMPT`` is the prompt
of a run that names none, here so the CLI and the dashboard share it.

Imports only ``spectui.quality``, ``spectui.paths`` and ``spectui.errors``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from spectui.errors import SpectuiError
from spectui.paths import shipped_dir
from spectui.quality import check_from_meta

DEFAULT_CEILING = 256
_META = re.compile(r"^#\s*([a-z_]+)\s*:\s*(.*?)\s*$")


#: The prompt of a run that names none: a typo fix, copy-heavy, so speculation has text to copy.
DEFAULT_PROMPT = (
    "Fix the typos in this text and return it unchanged otherwise: "
    "Speculative decodng lets a small draft modle propose several tokens that the large "
    "target model then verifys in a single forward pass. When the draft is right, the "
    "target accepts severel tokens at once; when it is wrong, the output is stil exactly "
    "what the target would have writen on its own."
)


@dataclass(frozen=True)
class PromptSpec:
    name: str
    tier: str
    max_tokens: int
    text: str
    path: str = ""
    check: str = ""  # canonical quality check (spectui.quality), "" = none


def prompts_dir() -> Path:
    """$SPECTUI_PROMPTS, else ./prompts, else the shipped prompts (``spectui.paths.shipped_dir``:
    the wheel's copy, or the checkout's top-level ``prompts/``)."""
    env = os.environ.get("SPECTUI_PROMPTS")
    if env:
        return Path(env).expanduser()
    local = Path("prompts")
    if local.is_dir():
        return local
    return shipped_dir("prompts")


def parse_prompt(text: str, name: str, path: str = "") -> PromptSpec:
    meta: dict[str, str] = {}
    lines = text.splitlines()
    body_start = 0
    for i, line in enumerate(lines):
        if not line.startswith("#"):
            body_start = i
            break
        m = _META.match(line)
        if m:
            meta[m.group(1)] = m.group(2)
    else:
        body_start = len(lines)
    body = "\n".join(lines[body_start:]).strip("\n")
    if not body.strip():
        raise SpectuiError(f"prompt file {path or name} has no prompt text")
    try:
        ceiling = int(meta.get("max_tokens", DEFAULT_CEILING))
    except ValueError:
        raise SpectuiError(f"prompt file {path or name}: max_tokens must be an integer") from None
    tier = meta.get("tier") or name.split("-", 1)[0]
    try:
        check = check_from_meta(meta)
    except SpectuiError as exc:
        raise SpectuiError(f"prompt file {path or name}: {exc}") from None
    return PromptSpec(
        name=name, tier=tier, max_tokens=ceiling, text=body, path=path, check=str(check) if check else ""
    )


def load_prompt(path: str | os.PathLike[str]) -> PromptSpec:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpectuiError(f"cannot read prompt file {p}: {exc}") from None
    return parse_prompt(text, p.stem, str(p))


def list_prompts(directory: str | os.PathLike[str] | None = None) -> list[PromptSpec]:
    folder = Path(directory) if directory is not None else prompts_dir()
    if not folder.is_dir():
        return []
    return [load_prompt(p) for p in sorted(folder.glob("*.txt"))]


def find_prompt(name: str, directory: str | os.PathLike[str] | None = None) -> PromptSpec:
    for spec in list_prompts(directory):
        if spec.name == name:
            return spec
    known = ", ".join(s.name for s in list_prompts(directory)) or "none"
    raise SpectuiError(f"no prompt named {name!r} in {directory or prompts_dir()} (known: {known})")
