"""Energy per generated token, baseline against candidate: ``spectui diff`` and ``compare``'s
energy section, and ``spectui gate``'s energy check (``--max-energy-ratio``).

Speculation verifies tokens it then throws away and may run a second model, so a faster run
can still spend more joules per token; the ratio here is candidate J/token / baseline J/token
(below 1: the candidate spends less per token). The figures are each recording's ``End.energy``
(``spectui.metrics.energy_session``): the same decode window and tokens as decode tok/s.

The gate's limit, and why an unmeasured one fails: a limit a user set that the gate silently
skipped would pass what nobody looked at. Where a side has no J/token (no counter on the
machine that recorded it: a VM, a laptop without a reader), the check fails with the reason,
unless ``--energy-optional`` says the limit is to be checked only where it can be; then it is
"n/a". Without a limit the check only reports, and it is left out for recordings that carry no
energy record at all (made before spectui sampled energy), so their verdicts stay as they were.
"""

from __future__ import annotations

import msgspec

from spectui.compare.check import Check
from spectui.compare.thresholds import GateThresholds
from spectui.format import markdown_table, num, section_title, text_table
from spectui.metrics.energy_session import session_energy
from spectui.metrics.stats import nanmedian
from spectui.recording.reader import Recording
from spectui.recording.schema import SessionEnergy

__all__ = ["EnergyComparison", "check_energy", "compare_energy", "energy_markdown", "energy_rows", "energy_text"]

Row = list[str]


class EnergyComparison(msgspec.Struct, kw_only=True):
    """Each side's energy record (None: the recording has none) and the J/token ratio."""

    baseline: SessionEnergy | None
    candidate: SessionEnergy | None
    #: candidate J/token / baseline J/token; None where a side has no per-token figure
    ratio: float | None = None


def _per_token(e: SessionEnergy | None) -> float | None:
    return e.j_per_token if e is not None and not e.why_not else None


def _why_missing(e: SessionEnergy | None) -> str:
    if e is None:
        return "no energy record (made before spectui sampled energy)"
    return e.why_not or e.note or "no per-token figure"


def compare_energy(baseline: Recording, candidate: Recording) -> EnergyComparison | None:
    """None when neither recording carries an energy record (both predate it)."""
    b, c = session_energy(baseline.events), session_energy(candidate.events)
    if b is None and c is None:
        return None
    jb, jc = _per_token(b), _per_token(c)
    return EnergyComparison(baseline=b, candidate=c, ratio=jc / jb if jb and jc is not None else None)


def energy_rows(e: EnergyComparison) -> list[Row]:
    """``[label, baseline, candidate, candidate vs baseline]`` rows where a side has numbers."""
    b, c = e.baseline, e.candidate

    def cell(side: SessionEnergy | None, name: str, spec: str, unit: str) -> str:
        return num(getattr(side, name), spec, unit) if side is not None and not side.why_not else "n/a"

    ratio = f"{e.ratio:.2f}x" if e.ratio is not None else ""
    return [
        ["J/token (decode)", cell(b, "j_per_token", ".4g", " J"), cell(c, "j_per_token", ".4g", " J"), ratio],
        ["power (decode)", cell(b, "decode_watts", ".1f", " W"), cell(c, "decode_watts", ".1f", " W"), ""],
        ["session energy", cell(b, "joules", ".4g", " J"), cell(c, "joules", ".4g", " J"), ""],
        ["counters", cell(b, "sources", "", ""), cell(c, "sources", "", ""), ""],
    ]


def energy_lines(e: EnergyComparison) -> list[str]:
    """Why a side has no figure, one line each (one line when both say the same)."""
    missing = [(name, _why_missing(side)) for name, side in (("baseline", e.baseline), ("candidate", e.candidate))
               if _per_token(side) is None]
    if len(missing) == 2 and missing[0][1] == missing[1][1]:
        return [f"energy: {missing[0][1]}"]
    return [f"{name} energy: {why}" for name, why in missing]


def measured(e: EnergyComparison) -> bool:
    """Whether either side has a number to show."""
    return any(side is not None and not side.why_not for side in (e.baseline, e.candidate))


COLUMNS = ["", "baseline", "candidate", "candidate vs baseline"]


def energy_text(e: EnergyComparison | None) -> list[str]:
    """The diff's energy section ([] when neither recording carries an energy record)."""
    if e is None:
        return []
    table = [text_table(COLUMNS, energy_rows(e))] if measured(e) else []
    return [section_title("energy"), *table, *("  " + x for x in energy_lines(e))]


def energy_markdown(e: EnergyComparison | None) -> list[str]:
    if e is None:
        return []
    table = [markdown_table(["metric", *COLUMNS[1:]], energy_rows(e)), ""] if measured(e) else []
    return ["### Energy", "", *table, *(f"* {x}" for x in energy_lines(e)), ""]


# -- the gate ----------------------------------------------------------------------------------


def check_energy(baselines: list[Recording], candidates: list[Recording], t: GateThresholds) -> Check | None:
    """Median candidate J/token / median baseline J/token against ``t.max_energy_ratio``; None
    (no check) when no limit is set and no recording carries an energy record."""
    records = {id(r): session_energy(r.events) for r in baselines + candidates}
    limit = t.max_energy_ratio
    if limit is None and all(e is None for e in records.values()):
        return None
    b = [j for r in baselines if (j := _per_token(records[id(r)])) is not None]
    c = [j for r in candidates if (j := _per_token(records[id(r)])) is not None]
    unmeasured = [f"{r.path}: {_why_missing(records[id(r)])}" for r in baselines + candidates if _per_token(records[id(r)]) is None]
    if not b or not c:
        detail = f"J/token could not be measured ({unmeasured[0]}{f'; {len(unmeasured) - 1} more' if len(unmeasured) > 1 else ''})"
        if limit is None:
            passed, detail = None, "n/a: " + detail
        elif t.energy_optional:
            passed, detail = None, f"n/a: the limit was not checked (--energy-optional); {detail}"
        else:
            passed, detail = False, f"the limit could not be checked: {detail}; --energy-optional lets the gate pass without it"
        return Check(name="energy", passed=passed, value=None, threshold=limit, comparison="<=", unit="x", detail=detail)
    jb, jc = nanmedian(b), nanmedian(c)
    ratio = jc / jb if jb > 0 else float("nan")
    detail = f"median {jc:.4g} J/token ({len(c)} of {len(candidates)} runs) vs {jb:.4g} J/token ({len(b)} of {len(baselines)} runs)"
    if unmeasured:
        detail += f"; unmeasured: {unmeasured[0]}{f' and {len(unmeasured) - 1} more' if len(unmeasured) > 1 else ''}"
    if limit is None:
        return Check(name="energy", passed=None, value=ratio, threshold=None, unit="x", detail=detail + "; no limit set (--max-energy-ratio)")
    return Check(name="energy", passed=bool(ratio <= limit), value=ratio, threshold=limit, comparison="<=", unit="x", detail=detail)
