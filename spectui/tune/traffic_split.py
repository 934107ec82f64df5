"""The one split of a workload into a tuning half and a check half.

The search sees only the tuning half; the setting it picks, the runtime's defaults and AR are
then measured on the check half, requests the search never saw, and only those figures are
reported: a setting picked and scored on the same requests would be flattered by its own luck.

The unit is what one client takes at a time (a request on its own, or a whole conversation:
a later turn carries the earlier ones, so a conversation split across the halves would leak
the check half's text into the tuning half). Units alternate in the workload's order, the
first to the tuning half: deterministic, and each half gets a share of every kind of request a
workload interleaves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from spectui.errors import SpectuiError

T = TypeVar("T")


def split_units(units: Sequence[T], *, name: str = "the workload", n_requests: int | None = None) -> tuple[list[T], list[T]]:
    """(tuning, check): every other unit, the first to tuning. Fewer than two units cannot be
    split: one line (``SpectuiError``)."""
    if len(units) < 2:
        n = n_requests if n_requests is not None else len(units)
        what = "one conversation" if len(units) == 1 and n > 1 else f"{len(units)} unit{'s' * (len(units) != 1)}"
        raise SpectuiError(f"{name}: {n} request{'s' * (n != 1)} in {what}: too few to split into a tuning half and a check"
                           " half (tune needs at least two requests or conversations; a conversation stays whole on one side)")
    return list(units[0::2]), list(units[1::2])
