"""Does ``spectui workload`` judge every parting as ``spectui diff`` does, on the same recordings?

For a finished workload's folder: every request of a setting under load or not, held against
its reference (the same request's AR at one client, first pass): the workload's verdict as kept
in ``workload.json`` and again as ``--analyze`` judges it from the recordings, beside the verdict
``spectui diff`` gives the same two recordings. ``batched`` is the workload's own (what load
alone did: AR under the same load parted there too); diff, which sees two recordings and no
load, gives such a parting its verdict by the margins alone, so those are counted apart.

    python benchmarks/judge_agreement.py FOLDER [FOLDER ...]
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from spectui.compare.diff import diff_recordings
from spectui.recording.reader import read_recording
from spectui.workload.judge import rejudge
from spectui.workload.result import BATCHED, IDENTICAL, REFERENCE, load_result


def agreement(folder: Path) -> list[str]:
    kept = load_result(folder)
    stored = {(lv.setting, lv.clients, lv.rate, lv.pass_no, r.index): r.exact for lv in kept.levels for r in lv.requests}
    result = load_result(folder)
    changed, missing = rejudge(folder, result)
    if missing:
        return [f"{folder}: {missing} recording(s) cannot be read; not judged again"]
    refs = {(lv.family, r.index): folder / r.recording for lv in result.levels if lv.ar and (lv.clients, lv.rate, lv.pass_no) == (1, 0.0, 0)
            for r in lv.requests}
    lines, tally = [], Counter()
    for lv in result.levels:
        for r in lv.requests:
            if r.exact == REFERENCE or (lv.family, r.index) not in refs:
                continue
            d = diff_recordings(read_recording(refs[(lv.family, r.index)]), read_recording(folder / r.recording))
            div = d.outputs.first_divergence
            by_diff = IDENTICAL if div is None else (div.cause.verdict if div.cause is not None else "not judged")
            same = r.exact == by_diff
            tally[(r.exact, by_diff)] += 1
            if r.exact != IDENTICAL or by_diff != IDENTICAL:
                kept_as = stored[(lv.setting, lv.clients, lv.rate, lv.pass_no, r.index)]
                mark = "same" if same else ("load" if r.exact == BATCHED else "DIFFERS")
                lines.append(f"  {lv.setting} at {lv.clients or lv.rate}, pass {lv.pass_no}, request {r.index}: workload {r.exact}"
                             f" (kept: {kept_as}), diff {by_diff} [{mark}]: {r.why}")
    agree = sum(n for (w, d), n in tally.items() if w == d)
    load = sum(n for (w, d), n in tally.items() if w == BATCHED and d != BATCHED)
    differ = sum(tally.values()) - agree - load
    head = [f"{folder}: {sum(tally.values())} requests against their reference; workload and diff agree on {agree},"
            f" batched by the workload (load) {load}, differ {differ}",
            "  counts (workload verdict, diff verdict): " + ", ".join(f"{w}/{d} {n}" for (w, d), n in sorted(tally.items())),
            f"  judged again from the recordings: {len(changed)} verdict(s) changed from the kept workload.json"]
    return head + [f"    {c}" for c in changed] + lines


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print("\n".join(agreement(Path(arg))))
