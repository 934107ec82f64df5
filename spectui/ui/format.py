"""Number formatting for the screen: short, fixed units, and an em dash for 'not yet'."""

from __future__ import annotations

import math

DASH = "—"


def missing(v: float | None) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def num(v: float | None, spec: str = ".1f", unit: str = "") -> str:
    if missing(v):
        return DASH
    return f"{format(v, spec)}{unit}"


def pct(v: float | None) -> str:
    return DASH if missing(v) else f"{v * 100:.1f}%"


def size(n: int | None) -> str:
    """Bytes in binary units; negative or None means unknown."""
    if n is None or n < 0:
        return DASH
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}" if unit == "GiB" else f"{n / scale:.0f} {unit}"
    return f"{n} B"


def signed_size(n: int) -> str:
    return ("+" if n >= 0 else "-") + size(abs(n))


def ellipsize_left(text: str, width: int) -> str:
    """Keep the end of a path (its file name) when it does not fit."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    return "…" + text[-(width - 1):] if width > 1 else "…"
