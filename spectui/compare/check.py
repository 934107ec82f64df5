"""One line of a verdict: what was checked, the measured value against its threshold, and why."""

from __future__ import annotations

import msgspec

Number = float | int | str | None


class Check(msgspec.Struct, kw_only=True):
    name: str
    passed: bool | None  # None: not applicable, or not measurable on this host (the detail says which)
    value: Number
    threshold: Number
    detail: str
    #: how value and threshold are read: ">=" (value must reach it) or "<="
    comparison: str = ""
    unit: str = ""  # "x" ratio, "%" share (0.08 = 8%), "pt" percentage points, "MiB", "s", "" plain
    #: the brief's checklist line this check enforces ("" for spectui's own checks)
    brief: str = ""
    #: passed, but the run's conditions make its numbers suspect (other processes' load)
    flagged: bool = False
