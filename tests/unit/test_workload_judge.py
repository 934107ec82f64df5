"""The workload's judge under load: a speculative parting is a defect only where its margins
add up to more than load moved AR itself in the same run; AR's own partings set that bound,
and defects judged before the bound was known are judged again."""

from __future__ import annotations

from spectui.config import RunConfig
from spectui.recording.schema import BatchNoise, End, ServerReport, Step
from spectui.workload.judge import Judge
from spectui.workload.plan import Setting
from spectui.workload.result import BATCHED, DEFECT, IDENTICAL, REFERENCE, RequestOutcome

AR = Setting("llama-server AR", "llama-server", RunConfig(mode="ar"))
SPEC = Setting("llama-server ngram-mod", "llama-server", RunConfig(mode="spec"))
#: a calibrated noise of 0: any parting with margins is past the one-sequence bound
EXACT = BatchNoise(depth_step=32, by_depth=[0.0] * 8, depth=256)


def _run(tokens: list[int], margins: list[int], runners: list[int]) -> tuple[RequestOutcome, list]:
    step = Step(tokens, [0] * len(tokens), [b""] * len(tokens), [0] * len(tokens), margins_milli=margins, runner_up=runners)
    end = End(t_us=1, reason="length", n_tokens=len(tokens), server=ServerReport(prompt_tokens=20))
    return RequestOutcome(index=0, tokens=tokens, reason="length", n_tokens=len(tokens)), [step, end]


def _judge() -> Judge:
    judge = Judge()
    judge.noises["llama-server"] = EXACT
    reference, events = _run([1, 2, 3, 4], [900, 900, 300, 900], [9, 9, 5, 9])
    judge(AR, reference, events, (1, 0.0, 0))
    assert reference.exact == REFERENCE
    return judge


def test_a_parting_past_what_load_moved_ar_stays_a_defect_and_one_within_it_is_batched():
    judge = _judge()
    spec, events = _run([1, 2, 5, 4], [900, 900, 200, 900], [9, 9, 3, 9])  # 0.300 + 0.200 = 0.500
    judge(SPEC, spec, events, (8, 0.0, 0))
    assert spec.exact == DEFECT
    # AR itself under 4 clients parts at the same kind of place, at margins adding up to 0.600
    forked, events = _run([1, 2, 7, 4], [900, 900, 300, 900], [9, 9, 3, 9])
    judge(AR, forked, events, (4, 0.0, 0))
    assert forked.exact == BATCHED
    judge.settle()
    assert spec.exact == BATCHED and "within what load moved AR itself in this run (0.600, AR at 4" in spec.why
    # a parting past that bound stays a defect, whenever it is judged
    wide, events = _run([1, 2, 6, 4], [900, 900, 400, 900], [9, 9, 3, 9])  # 0.300 + 0.400 = 0.700
    judge(SPEC, wide, events, (8, 0.0, 0))
    judge.settle()
    assert wide.exact == DEFECT


def test_identical_output_is_identical_whatever_load_moved():
    judge = _judge()
    same, events = _run([1, 2, 3, 4], [900, 900, 300, 900], [9, 9, 5, 9])
    judge(SPEC, same, events, (8, 0.0, 0))
    assert same.exact == IDENTICAL
