"""A workload's pass or fail: the speedup of one setting at one load, and its exactness.

``spectui gate --workload DIR --setting S --clients N --min-speedup X --max-defects D`` reads
an earlier ``spectui workload`` folder (no model) and says, one line per check, whether the
setting paid at that load (its speedup over the same text) and stayed exact (requests judged
a defect against their AR output at one client, at that load and every pass).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from spectui.errors import SpectuiError
from spectui.workload.result import DEFECT, UNJUDGED, WorkloadResult


@dataclass
class WorkloadVerdict:
    passed: bool = True
    lines: list[str] = field(default_factory=list)

    def check(self, ok: bool, line: str) -> None:
        self.passed = self.passed and ok
        self.lines.append(f"{'pass' if ok else 'FAIL'}  {line}")


def gate_workload(result: WorkloadResult, *, setting: str, clients: int = 0, rate: float = 0.0, min_speedup: float | None = None,
                  max_defects: int = 0, max_unjudged: int | None = None) -> WorkloadVerdict:
    """Judge ``setting`` at ``clients`` (or ``rate``) over every pass measured there."""
    names = [s for s in result.settings if s == setting or s.endswith(f" {setting}")]
    if len(names) != 1:
        raise SpectuiError(f"--setting {setting}: the workload ran {', '.join(result.settings)}")
    levels = [lv for lv in result.levels if lv.setting == names[0] and (lv.clients, lv.rate) == (clients, rate)]
    if not levels:
        at = f"{clients} clients" if clients else f"{rate:g} requests/s"
        raise SpectuiError(f"{names[0]} ran at no level of {at} in this workload")
    verdict = WorkloadVerdict()
    load = f"{clients} client{'s' if clients != 1 else ''}" if clients else f"{rate:g} requests/s"
    if min_speedup is not None:
        last = levels[-1]  # the warmest pass
        ok = math.isfinite(last.speedup) and last.speedup >= min_speedup
        verdict.check(ok, f"speedup {last.speedup:.2f}x at {load} (pass {last.pass_no + 1}), at least {min_speedup:.2f}x: {last.same_text}")
    defects = sum(lv.counts.get(DEFECT, 0) for lv in levels)
    verdict.check(defects <= max_defects, f"{defects} request(s) judged a defect at {load}, at most {max_defects}")
    if max_unjudged is not None:
        unjudged = sum(lv.counts.get(UNJUDGED, 0) for lv in levels)
        verdict.check(unjudged <= max_unjudged, f"{unjudged} request(s) unjudged at {load}, at most {max_unjudged}")
    if not result.complete:
        verdict.check(False, f"the workload did not finish: {result.stopped or 'stopped'}")
    return verdict
