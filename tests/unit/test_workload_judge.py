"""The workload's judge: the one judge (``spectui.compare.divergence``) with what load alone
did. A speculative parting is a defect only where its margins add up to more than load moved
AR itself in the same run; AR's own partings set that bound, and defects judged before the bound
was known are judged again. The depth is the parting's position in the sequence, prompt
included, and the same recordings get the same verdict from ``spectui diff`` and from the
workload judged again from its folder (``spectui workload --analyze``)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from spectui.compare.diff import diff_recordings
from spectui.config import RunConfig
from spectui.recording.reader import read_recording
from spectui.recording.schema import BatchNoise, End, Event, Header, ServerReport, Step
from spectui.workload.judge import Judge, rejudge
from spectui.workload.plan import Setting
from spectui.workload.result import (
    BATCHED,
    DEFECT,
    IDENTICAL,
    NEAR_TIE,
    REFERENCE,
    RESULT_NAME,
    UNJUDGED,
    LevelResult,
    RequestOutcome,
    WorkloadResult,
    load_result,
)
from tests.conftest import run_cli
from tests.unit.test_diff import write_events

AR = Setting("llama-server AR", "llama-server", RunConfig(mode="ar"))
SPEC = Setting("llama-server ngram-mod", "llama-server", RunConfig(mode="spec"))
#: a calibrated noise of 0: any parting with margins is past the one-sequence bound
EXACT = BatchNoise(depth_step=32, by_depth=[0.0] * 8, depth=256)
#: 0.000 to depth 256, 0.904 past it (the shape the issue's embedded runs had)
DEEP = BatchNoise(depth_step=32, by_depth=[0.0] * 8 + [0.904] * 8, depth=512)


def _events(tokens: list[int], margins: list[int | None], runners: list[int], *, noise: BatchNoise | None = EXACT,
            prompt: int = 20, embedded: bool = False, mode: str = "spec") -> list[Event]:
    """A greedy run's events: a header (its calibration; an embedded run's prompt tokens), one
    step a token (``None``: that token came without a margin, as a server's drafted tokens do), the end."""
    header = Header(config=RunConfig(mode=mode), batch_noise=noise, prompt_tokens=list(range(prompt)) if embedded else [])
    steps: list[Event] = [Step([t], [0], [b"x"], [i], margins_milli=None if m is None else [m], runner_up=None if m is None else [r])
                          for i, (t, m, r) in enumerate(zip(tokens, margins, runners))]
    server = None if embedded else ServerReport(prompt_tokens=prompt)
    return [header, *steps, End(t_us=1, reason="length", n_tokens=len(tokens), server=server)]


def _run(tokens: list[int], margins: list[int | None], runners: list[int], **kw) -> tuple[RequestOutcome, list[Event]]:
    return RequestOutcome(index=0, tokens=tokens, reason="length", n_tokens=len(tokens)), _events(tokens, margins, runners, **kw)


def _judge() -> Judge:
    judge = Judge()
    reference, events = _run([1, 2, 3, 4], [900, 900, 300, 900], [9, 9, 5, 9], mode="ar")
    judge(AR, reference, events, (1, 0.0, 0))
    assert reference.exact == REFERENCE
    return judge


def test_a_parting_past_what_load_moved_ar_stays_a_defect_and_one_within_it_is_batched():
    judge = _judge()
    spec, events = _run([1, 2, 5, 4], [900, 900, 200, 900], [9, 9, 3, 9])  # 0.300 + 0.200 = 0.500
    judge(SPEC, spec, events, (8, 0.0, 0))
    assert spec.exact == DEFECT
    # AR itself under 4 clients parts at the same kind of place, at margins adding up to 0.600
    forked, events = _run([1, 2, 7, 4], [900, 900, 300, 900], [9, 9, 3, 9], mode="ar")
    judge(AR, forked, events, (4, 0.0, 0))
    assert forked.exact == BATCHED
    judge.settle()
    assert spec.exact == BATCHED and "within what load moved AR itself in this run (0.600, AR at 4" in spec.why
    # a parting past that bound stays a defect, whenever it is judged
    wide, events = _run([1, 2, 6, 4], [900, 900, 400, 900], [9, 9, 3, 9])  # 0.300 + 0.400 = 0.700
    judge(SPEC, wide, events, (8, 0.0, 0))
    judge.settle()
    assert wide.exact == DEFECT


def test_a_top_two_gap_ar_moved_under_load_without_parting_bounds_what_load_moves():
    """AR under load keeps every token, but the gap between its top two moved 0.600 at token 2
    (0.300 at one client, 0.900 under 4 clients, the same runner-up): a speculative parting under
    that load whose margins add up to 0.500 is the load's batching; one of 0.700 is a defect."""
    judge = _judge()
    kept, events = _run([1, 2, 3, 4], [900, 900, 900, 900], [9, 9, 5, 9], mode="ar")
    judge(AR, kept, events, (4, 0.0, 0))
    assert kept.exact == IDENTICAL and judge.load_forks["llama-server"][0] == pytest.approx(0.6)
    within, events = _run([1, 2, 5, 4], [900, 900, 200, 900], [9, 9, 3, 9])  # 0.300 + 0.200
    judge(SPEC, within, events, (4, 0.0, 0))
    assert within.exact == BATCHED and "(0.600, AR at 4, request 0, a top-two gap)" in within.why
    past, events = _run([1, 2, 5, 4], [900, 900, 400, 900], [9, 9, 3, 9])  # 0.300 + 0.400
    judge(SPEC, past, events, (4, 0.0, 0))
    assert past.exact == DEFECT
    # a gap between other tokens (another runner-up) is no measure of this one
    other = _judge()
    moved, events = _run([1, 2, 3, 4], [900, 900, 900, 900], [9, 9, 6, 9], mode="ar")
    other(AR, moved, events, (4, 0.0, 0))
    assert other.load_forks["llama-server"][0] == 0.0  # the other tokens' gaps did not move


def test_what_load_moved_ar_does_not_explain_a_parting_at_one_client():
    judge = _judge()
    forked, events = _run([1, 2, 7, 4], [900, 900, 300, 900], [9, 9, 3, 9], mode="ar")
    judge(AR, forked, events, (4, 0.0, 0))  # AR under 4 clients moved 0.600
    alone, events = _run([1, 2, 5, 4], [900, 900, 200, 900], [9, 9, 3, 9])  # 0.500, at one client
    judge(SPEC, alone, events, (1, 0.0, 0))
    judge.settle()
    assert alone.exact == DEFECT and "reproduce: spectui diff" not in alone.why  # no folder here: no paths to name


def test_identical_output_is_identical_whatever_load_moved():
    judge = _judge()
    same, events = _run([1, 2, 3, 4], [900, 900, 300, 900], [9, 9, 5, 9])
    judge(SPEC, same, events, (8, 0.0, 0))
    assert same.exact == IDENTICAL


def test_a_candidate_without_a_margin_at_the_parting_is_unjudged_not_a_defect():
    # the committed warm results: "one margin alone, 0.057, exceeds 0.000 ... the candidate recorded none"
    judge = _judge()
    spec, events = _run([1, 2, 5, 4], [900, 900, None, None], [9, 9, 0, 0])
    judge(SPEC, spec, events, (1, 0.0, 0))
    assert spec.exact == UNJUDGED and "no margin recorded by the candidate at token 2" in spec.why


def test_an_embedded_parting_is_judged_at_its_depth_in_the_sequence():
    # the case: token 88 of a 250-token prompt, margins 0.107 + 0.011: a near-tie at
    # depth 338 (bound 1.808), where a lookup at the output index (88) read a bound of 0.000
    ref_tokens = list(range(100))
    mine = [*ref_tokens[:88], 727, *ref_tokens[89:]]
    margins, runners = [3000] * 100, [5000] * 100
    judge = Judge()
    embedded_ar = Setting("embedded AR", "embedded", RunConfig(mode="ar"))
    defaults = Setting("embedded defaults", "embedded", RunConfig(mode="spec"))
    ref = RequestOutcome(index=1, tokens=ref_tokens)
    judge(embedded_ar, ref, _events(ref_tokens, [*margins[:88], 107, *margins[89:]], [*runners[:88], 727, *runners[89:]], noise=DEEP, prompt=250,
                                    embedded=True, mode="ar"), (1, 0.0, 0))
    out = RequestOutcome(index=1, tokens=mine)
    judge(defaults, out, _events(mine, [*margins[:88], 11, *margins[89:]], [*runners[:88], 88, *runners[89:]], noise=DEEP,
                                 prompt=250, embedded=True), (1, 0.0, 0))
    assert out.exact == NEAR_TIE, out.why
    assert "depth 338: prompt 250 + token 88" in out.why and "1.808" in out.why


# -- the same recordings, the same verdict: spectui diff and the workload judged again from its folder --------


def _level(setting: Setting, requests: list[RequestOutcome]) -> LevelResult:
    return LevelResult(setting=setting.label, family=setting.family, ar=setting.ar, clients=1, requests=requests)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A workload's folder, as the workload leaves one: AR at one client, the reference, and a
    speculative setting whose requests part from it in each way a parting can go (real
    recording files; the events are made here, so each margin is the one the test needs)."""
    ref_tokens = [1, 2, 3, 4, 5, 6]
    ref_margins, ref_runners = [3000, 3000, 3000, 100, 3000, 3000], [9, 9, 9, 40, 9, 9]
    runs = {  # request -> (its tokens, margins, runners): the speculative run's
        0: ([1, 2, 3, 4, 5, 6], ref_margins, ref_runners),  # identical
        1: ([1, 2, 3, 40, 5, 6], [3000, 3000, 3000, 50, 3000, 3000], [9, 9, 9, 4, 9, 9]),  # near-tie at depth 303
        2: ([1, 9, 3, 4, 5, 6], [3000, 2800, 3000, 3000, 3000, 3000], [9, 2, 9, 9, 9, 9]),  # planted: both margins large
        3: ([1, 2, 3, 40, 5, 6], [3000, 3000, 3000, None, 3000, 3000], [9, 9, 9, 0, 9, 9]),  # no margin (drafted)
    }
    ar_reqs, spec_reqs = [], []
    (tmp_path / "ar").mkdir()
    (tmp_path / "spec").mkdir()
    for i, (tokens, margins, runners) in runs.items():
        ar_path = write_events(tmp_path / "ar" / f"{i:04d}.spectui", _events(ref_tokens, ref_margins, ref_runners, noise=DEEP,
                                                                              prompt=300, mode="ar"))
        spec_path = write_events(tmp_path / "spec" / f"{i:04d}.spectui", _events(tokens, margins, runners, noise=DEEP, prompt=300))
        ar_reqs.append(RequestOutcome(index=i, recording=str(ar_path.relative_to(tmp_path)), tokens=ref_tokens, exact=REFERENCE))
        # as an older judge left them: every parting a defect
        spec_reqs.append(RequestOutcome(index=i, recording=str(spec_path.relative_to(tmp_path)), tokens=tokens,
                                        exact=IDENTICAL if i == 0 else DEFECT, why="" if i == 0 else "an older judge's verdict"))
    result = WorkloadResult(workload="held-out", path="held-out.jsonl", n_requests=len(runs), settings=[AR.label, SPEC.label],
                            clients=[1], levels=[_level(AR, ar_reqs), _level(SPEC, spec_reqs)], complete=True)
    (tmp_path / RESULT_NAME).write_bytes(msgspec.json.encode(result))
    return tmp_path


EXPECTED = {0: IDENTICAL, 1: NEAR_TIE, 2: DEFECT, 3: UNJUDGED}


def test_the_workload_judged_again_and_diff_give_every_parting_the_same_verdict(folder: Path):
    result = load_result(folder)
    changed, why_not = rejudge(folder, result)
    assert why_not == ""
    assert sorted(changed) == ["llama-server ngram-mod at 1, request 1: defect -> near-tie",
                               "llama-server ngram-mod at 1, request 3: defect -> unjudged"]
    ar, spec = result.levels
    for ref, out in zip(ar.requests, spec.requests):
        d = diff_recordings(read_recording(folder / ref.recording), read_recording(folder / out.recording))
        div = d.outputs.first_divergence
        diff_verdict = IDENTICAL if div is None else div.cause.verdict  # type: ignore[union-attr]
        assert out.exact == diff_verdict == EXPECTED[out.index], (out.why, div)
        if div is not None:
            assert div.cause is not None and div.cause.reason in out.why
    assert spec.counts == {IDENTICAL: 1, NEAR_TIE: 1, BATCHED: 0, DEFECT: 1, UNJUDGED: 1}


def test_a_planted_defect_is_a_defect_in_every_command_with_its_reproduction(folder: Path):
    ref, planted = folder / "ar" / "0002.spectui", folder / "spec" / "0002.spectui"
    shown = run_cli("workload", "--analyze", str(folder))
    assert shown.returncode == 0, shown.stderr
    line = next(x for x in shown.stdout.splitlines() if "request 2:" in x)
    assert "defect: parts from AR at one client at token 1: speculation changed the output" in line
    assert f"reproduce: spectui diff {ref} {planted}" in line
    assert "2 verdict(s) changed" in shown.stderr
    # the reproduction it names says the same
    diff = run_cli("diff", str(ref), str(planted))
    assert diff.returncode == 0 and "cause: defect: speculation changed the output" in diff.stdout, diff.stdout
    gate = run_cli("gate", "--json", "--baseline", str(ref), "--candidate", str(planted))
    assert gate.returncode == 1
    outputs = next(c for c in json.loads(gate.stdout)["checks"] if c["name"] == "outputs")
    assert outputs["passed"] is False and "defect: speculation changed the output" in outputs["detail"]
    # the workload's gate reads the verdicts kept in the folder: judged again, they stay
    workload_gate = run_cli("gate", "--workload", str(folder), "--setting", "ngram-mod", "--clients", "1")
    assert workload_gate.returncode == 1 and "1 request(s) judged a defect" in workload_gate.stdout + workload_gate.stderr
    # the dashboard's compare bar over the same two recordings
    from spectui.metrics.live import LiveRun
    from spectui.ui.screens.compare import divergence_cause

    shown_live = divergence_cause(LiveRun.from_events(read_recording(ref).events), LiveRun.from_events(read_recording(planted).events), 1)
    assert shown_live is not None and shown_live.verdict == DEFECT and shown_live.short.startswith("defect (margins 3.000+2.800")
    # the near-tie beside it passes the recordings' gate
    near = run_cli("gate", "--json", "--baseline", str(folder / "ar" / "0001.spectui"), "--candidate", str(folder / "spec" / "0001.spectui"))
    assert next(c for c in json.loads(near.stdout)["checks"] if c["name"] == "outputs")["passed"] is True


def test_a_folder_whose_recordings_are_gone_keeps_its_verdicts_and_says_so(folder: Path):
    (folder / "spec" / "0001.spectui").unlink()
    result = load_result(folder)
    assert rejudge(folder, result) == ([], "1 recording(s) of this workload cannot be read")
    assert [r.exact for r in result.levels[1].requests] == [IDENTICAL, DEFECT, DEFECT, DEFECT]
    shown = run_cli("workload", "--analyze", str(folder))
    assert shown.returncode == 0 and "not judged again: 1 recording(s)" in shown.stderr


def test_a_folder_without_its_reference_keeps_its_verdicts_and_says_so(folder: Path):
    """A reference run apart that the result did not keep (as before it kept one): judged again
    with no reference, every request would read identical; nothing is changed instead."""
    result = load_result(folder)
    result.levels = result.levels[1:]  # the spec level alone: its reference is not in the result
    (folder / RESULT_NAME).write_bytes(msgspec.json.encode(result))
    assert rejudge(folder, load_result(folder)) == ([], "no reference (AR at one client) of llama-server is in this folder's result")
    shown = run_cli("workload", "--analyze", str(folder))
    assert shown.returncode == 0 and "not judged again: no reference" in shown.stderr
    assert [r.exact for r in load_result(folder).levels[0].requests] == [IDENTICAL, DEFECT, DEFECT, DEFECT]  # as recorded
