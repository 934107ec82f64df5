"""One judge on real runs: ``spectui workload`` (the embedded AR and defaults, greedy, recorded
by the embedded model) and ``spectui diff`` give every request the same verdict on the same
recordings, and a token planted where both runs were sure (a real recording, one token changed
to its runner-up) is a defect in every command, with the one command that reproduces it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spectui.compare.diff import diff_recordings
from spectui.recording.output import output_top_two
from spectui.recording.reader import read_recording
from spectui.workload.result import DEFECT, IDENTICAL, REFERENCE, load_result
from tests.conftest import run_cli
from tests.unit.test_diff import replace_token, write_events

pytestmark = pytest.mark.slow

DOC = ("Travel policy, section 3. Employees book trains in standard class for journeys under four hours; first class is allowed "
       "for longer journeys if it costs less than twice the standard fare. Hotel rooms may cost up to 140 euros a night in most "
       "cities and up to 210 euros in London, Paris, Zurich and New York. Meals are reimbursed up to 45 euros a day with receipts. "
       "Taxis are allowed when no public transport runs, or between 23:00 and 06:00. Expense claims must be filed within thirty "
       "days of the trip, with every receipt attached as a photo or a PDF.")
REQUESTS = [
    f"{DOC}\n\nQuestion: How much may a hotel room cost per night in Zurich?",
    f"Rewrite this policy as a numbered list of rules:\n\n{DOC}",
    f"Summarize this policy in two sentences:\n\n{DOC}",
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("judge")
    source = work / "held-out.jsonl"
    source.write_text("".join(json.dumps({"messages": [{"role": "user", "content": r}], "max_tokens": 64}) + "\n" for r in REQUESTS))
    out = work / "run"
    proc = run_cli("workload", str(source), "--draft", "defaults", "--clients", "1", "--threads", "2", "--headless", "--out", str(out),
                   timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_the_workload_and_diff_give_every_request_the_same_verdict(folder: Path) -> None:
    result = load_result(folder)
    ar = next(lv for lv in result.levels if lv.ar)
    spec = next(lv for lv in result.levels if not lv.ar)
    assert [r.exact for r in ar.requests] == [REFERENCE] * len(REQUESTS)
    for ref, out in zip(ar.requests, spec.requests):
        d = diff_recordings(read_recording(folder / ref.recording), read_recording(folder / out.recording))
        div = d.outputs.first_divergence
        assert out.exact == (IDENTICAL if div is None else div.cause.verdict), (out.why, div)  # type: ignore[union-attr]


def test_a_planted_token_where_both_runs_were_sure_is_a_defect_in_every_command(folder: Path) -> None:
    result = load_result(folder)
    ar = next(lv for lv in result.levels if lv.ar)
    spec = next(lv for lv in result.levels if not lv.ar)
    ref_path, path = folder / ar.requests[0].recording, folder / spec.requests[0].recording
    ref, rec = read_recording(ref_path), read_recording(path)
    mine, theirs = output_top_two(rec.events), output_top_two(ref.events)
    shared = spec.requests[0].parted_at if spec.requests[0].parted_at >= 0 else len(mine)
    i = next(i for i in range(2, shared) if mine[i] and theirs[i] and mine[i][0] >= 3000 and theirs[i][0] >= 3000)  # type: ignore[index]
    runner = mine[i][1]  # type: ignore[index]
    edited = replace_token(rec.events, i, runner, b"?")
    path.unlink()
    write_events(path, edited)

    analyzed = run_cli("workload", "--analyze", str(folder))
    assert analyzed.returncode == 0, analyzed.stderr
    line = next(x for x in analyzed.stdout.splitlines() if "defaults at 1, request 0:" in x)
    assert f"defect: parts from AR at one client at token {i}: speculation changed the output" in line
    assert f"reproduce: spectui diff {ref_path} {path}" in line
    assert load_result(folder).levels[spec_index(result)].requests[0].exact == DEFECT
    shown = run_cli("diff", str(ref_path), str(path))
    assert shown.returncode == 0 and "cause: defect: speculation changed the output" in shown.stdout
    gate = run_cli("gate", "--baseline", str(ref_path), "--candidate", str(path))
    assert gate.returncode == 1 and "defect: speculation changed the output" in gate.stdout
    workload_gate = run_cli("gate", "--workload", str(folder), "--setting", "defaults", "--clients", "1")
    assert workload_gate.returncode == 1 and "1 request(s) judged a defect" in workload_gate.stdout


def spec_index(result) -> int:
    return next(k for k, lv in enumerate(result.levels) if not lv.ar)
