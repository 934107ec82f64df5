"""The one judge of exactness on plain data: its verdicts, the calibration's lookup at the
parting's depth in the sequence, partings without margins, and properties over generated
partings (hypothesis).

The real-model side (margins recorded by real runs, a real near-tie, an edited recording
failing the gate) is ``tests/backends/test_divergence_real.py``; the same verdict from
``spectui diff`` and the workload on the same recordings is ``tests/unit/test_workload_judge.py``
and ``tests/functional/test_one_judge.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spectui.compare.divergence import (
    BATCHED,
    DEFECT,
    IDENTICAL,
    NEAR_TIE,
    UNJUDGED,
    VERDICTS,
    Load,
    Parting,
    RunOutput,
    Side,
    judge,
    judge_outputs,
    parting,
)
from spectui.engine.host.noise import calibration_depth
from spectui.engine.loop.decode import top_two
from spectui.recording.schema import BatchNoise

#: invariant to depth 256, then up to 0.84 (the shape measured on the embedded model, 2 threads)
NOISE = BatchNoise(depth_step=32, by_depth=[0.0] * 8 + [0.52, 0.84, 0.84, 0.84, 0.84, 0.84, 0.84, 0.84], depth=512)


def test_noise_lookup_by_depth():
    assert NOISE.at(0) == 0.0
    assert NOISE.at(255) == 0.0
    assert NOISE.at(256) == 0.52
    assert NOISE.at(316) == 0.84
    assert NOISE.at(511) == 0.84
    # positions 0..511 were measured: 512 is past it, never read from a shallower bucket
    assert NOISE.at(512) is None and NOISE.at(513) is None
    assert NOISE.at(-1) is None
    assert BatchNoise().at(0) is None
    # a calibration that stopped inside its last bucket (a time budget) reads nothing past where it stopped
    stopped = BatchNoise(depth_step=32, by_depth=[0.0, 0.3], depth=40)
    assert stopped.at(39) == 0.3 and stopped.at(40) is None


@pytest.mark.parametrize(("reach", "n_ctx", "depth"), [(10, 4096, 64), (65, 4096, 128), (316, 4096, 512), (5000, 8192, 1024), (300, 200, 199)])
def test_calibration_depth(reach, n_ctx, depth):
    assert calibration_depth(reach, n_ctx) == depth


def _side(token: int, margin: int | None, runner: int | None = None, recording: str = "") -> Side:
    return Side(token=token, margin=None if margin is None else margin / 1000, runner_up=runner, recording=recording)


def _judge(margin_b: int | None, margin_c: int | None, *, index: int = 186, prompt: int | None = 130, calibrations=(NOISE, NOISE),
           runners=(448, 1004), load: Load | None = None, recordings=("", "")):
    return judge(Parting(index=index, prompt=prompt, baseline=_side(1004, margin_b, runners[0], recordings[0]),
                         candidate=_side(448, margin_c, runners[1], recordings[1]), calibrations=tuple(calibrations), load=load))


def test_a_swap_within_the_noise_is_a_near_tie():
    # load-code-continuation on 2 threads: token 186 at depth 316, margins 0.064 and 0.027
    j = _judge(64, 27)
    assert j.verdict == NEAR_TIE and not j.fails
    assert j.swapped and j.depth == 316
    assert j.bound == pytest.approx(1.68)
    assert "0.064" in j.reason and "0.027" in j.reason and "1.680" in j.reason and "prompt 130 + token 186" in j.reason


def test_the_depth_is_the_position_in_the_sequence_not_the_output_index():
    # the case that made the workload call near-ties defects: token 88 of a 250-token prompt.
    # At the output index (88) the calibration is 0.000; at the sequence position (338) it is 0.84.
    j = _judge(107, 11, index=88, prompt=250)
    assert j.depth == 338 and j.noise == 0.84 and j.verdict == NEAR_TIE


def test_margins_beyond_the_noise_are_a_defect_with_its_reproduction():
    j = _judge(1500, 400, recordings=("AR/c1/0001.spectui", "my run/c1/0001.spectui"))
    assert j.verdict == DEFECT and j.fails
    assert "speculation changed the output" in j.reason and "1.900 > 1.680" in j.reason
    assert j.reproduce == "spectui diff AR/c1/0001.spectui 'my run/c1/0001.spectui'"
    assert j.reason.endswith(f"reproduce: {j.reproduce}")
    assert j.line.startswith("defect: speculation changed the output")


def test_any_parting_where_the_backend_is_invariant_is_a_defect():
    # depth 150: both runs' logits agree bit for bit there, so even a tiny margin cannot flip
    j = _judge(1, 1, index=20)
    assert j.verdict == DEFECT and j.noise == 0.0


def test_the_larger_noise_of_the_two_calibrations_counts():
    loud = BatchNoise(depth_step=32, by_depth=[2.0] * 16, depth=512)
    assert _judge(1500, 400, calibrations=(NOISE, loud)).verdict == NEAR_TIE


@pytest.mark.parametrize(
    ("calibrations", "margins", "prompt", "why"),
    [
        ((None, None), (64, 27), 130, "no batch-noise calibration"),
        ((NOISE, BatchNoise(depth_step=32, by_depth=[0.1] * 4, depth=128)), (64, 27), 130,
         "the batch-noise calibration reaches depth 128, not the parting's depth 316"),
        ((NOISE, NOISE), (None, 27), 130, "no margin recorded by the baseline"),
        ((NOISE, NOISE), (64, 27), None, "the prompt's length is not recorded"),
    ],
)
def test_unjudged_without_margins_depth_or_calibration(calibrations, margins, prompt, why):
    j = _judge(*margins, prompt=prompt, calibrations=calibrations)
    assert j.verdict == UNJUDGED and j.fails
    assert why in j.reason


def test_one_margin_alone_is_no_verdict_even_against_a_bound_of_zero():
    # a speculative llama-server run sends no log-probabilities for drafted tokens; at depth 150
    # the calibration is 0.000, and one margin alone would have convicted any parting
    for margin in (57, 2500):
        j = _judge(margin, None, index=20)
        assert j.verdict == UNJUDGED and "no margin recorded by the candidate" in j.reason
        assert "one run's margin alone is no verdict" in j.reason


def test_one_side_ending_first_is_not_a_token_choice():
    p = Parting(index=5, prompt=3, baseline=_side(7, 10, 8), candidate=Side(ended="stop"), calibrations=(NOISE,))
    j = judge(p)
    assert j.verdict == UNJUDGED and "candidate ended at token 5 (stop)" in j.reason
    failed = judge(Parting(index=5, prompt=3, baseline=_side(7, 10, 8), candidate=Side(ended="error"), calibrations=(NOISE,)))
    assert failed.verdict == UNJUDGED and "ended early at token 5 (error)" in failed.reason


def test_not_swapped_when_the_runner_up_is_another_token():
    assert not _judge(64, 27, runners=(5, 1004)).swapped


def test_what_load_did_makes_a_parting_batched():
    assert _judge(1500, 400, load=Load(ar_itself="AR at 2")).verdict == BATCHED
    assert _judge(None, None, load=Load(twin_parts_here=True)).verdict == BATCHED
    within = _judge(1500, 400, load=Load(moved=2.0, moved_by="AR at 4, request 3"))
    assert within.verdict == BATCHED and "within what load moved AR itself in this run (2.000, AR at 4, request 3)" in within.reason
    past = _judge(1500, 400, load=Load(moved=1.8, moved_by="AR at 4, request 3"))
    assert past.verdict == DEFECT and "beyond what load moved AR itself in this run (1.800)" in past.reason
    # a missing margin stays unjudged under load too: a bound on a sum needs both terms
    assert _judge(2500, None, load=Load(moved=0.1)).verdict == UNJUDGED


def test_a_parting_under_load_within_what_a_neighbour_moves_is_batched():
    # bit for bit in blocks, but a neighbouring request in the server's batch moves the logits (the embedded Q4_1
    # at 2 threads: a prompt prefilled beside 3 of a neighbour's tokens moved later logits by up to 1.2 from depth 100)
    neighbour = BatchNoise(depth_step=32, by_depth=[0.0] * 16, depth=512, beside_by_depth=[0.05] * 8 + [0.2] * 8)
    assert neighbour.beside_at(316) == 0.2 and neighbour.beside_at(512) is None and NOISE.beside_at(316) is None
    within = _judge(200, 100, calibrations=(neighbour, neighbour), load=Load(beside=True))
    assert within.verdict == BATCHED and "0.300 <= 0.400 (2 x 0.200, what a neighbouring request in the batch moves" in within.reason
    # past it, or at one client (nothing shares the batch), or where one side's calibration never measured it: a defect
    assert _judge(300, 150, calibrations=(neighbour, neighbour), load=Load(beside=True)).verdict == DEFECT
    assert _judge(200, 100, calibrations=(neighbour, neighbour), load=Load()).verdict == DEFECT
    one_sided = BatchNoise(depth_step=32, by_depth=[0.0] * 16, depth=512)
    assert _judge(200, 100, calibrations=(neighbour, one_sided), load=Load(beside=True)).verdict == DEFECT
    # the larger of what load moved AR and what a neighbour moves is what explains it
    assert _judge(200, 100, calibrations=(one_sided, one_sided), load=Load(beside=True, moved=0.35, moved_by="AR at 2")).verdict == BATCHED


def test_outputs_that_do_not_part_are_identical_and_sampled_ones_are_not_judged():
    a = RunOutput(tokens=[1, 2, 3], top=[(900, 9)] * 3, prompt=10, calibration=NOISE)
    j = judge_outputs(a, a)
    assert j is not None and j.verdict == IDENTICAL and j.index is None and not j.fails
    assert judge_outputs(a, RunOutput(tokens=[1, 2, 4], greedy=False)) is None


@pytest.mark.parametrize("best", [0, 3, 9])
def test_top_two_margin_and_runner_up(best):
    rng = np.random.default_rng(best)
    row = rng.normal(size=10).astype(np.float32)
    row[best] = 5.0
    order = np.argsort(row)
    runner = int(order[-2])
    margin, got = top_two(row, best)
    assert got == runner
    assert margin == round(1000 * float(row[best] - row[runner]))


def test_top_two_on_a_tie_and_a_vocabulary_of_one():
    assert top_two(np.array([1.0, 3.0, 3.0], dtype=np.float32), 1) == (0, 2)
    assert top_two(np.array([2.0], dtype=np.float32), 0) == (0, 0)


# -- properties over generated partings ----------------------------------------------------------------


@st.composite
def calibrations(draw: st.DrawFn) -> BatchNoise | None:
    if draw(st.booleans()) and draw(st.booleans()):
        return None
    steps = draw(st.lists(st.integers(0, 1500), min_size=1, max_size=20))
    by_depth = (np.maximum.accumulate(steps) / 1000).tolist()
    full = len(by_depth) * 32
    return BatchNoise(depth_step=32, by_depth=by_depth, depth=draw(st.integers(max(full - 31, 1), full)))


margins = st.one_of(st.none(), st.integers(0, 4000))


@st.composite
def partings(draw: st.DrawFn) -> Parting:
    index = draw(st.integers(0, 400))
    return Parting(
        index=index,
        prompt=draw(st.one_of(st.none(), st.integers(0, 400))),
        baseline=_side(1, draw(margins), draw(st.sampled_from([2, 7])), "a.spectui"),
        candidate=_side(2, draw(margins), draw(st.sampled_from([1, 7])), "b.spectui"),
        calibrations=tuple(draw(st.lists(calibrations(), min_size=1, max_size=2))),
    )


@settings(max_examples=400, deadline=None)
@given(partings())
def test_every_parting_gets_exactly_one_verdict_decided_by_margins_depth_and_calibration(p: Parting):
    j = judge(p)
    assert j.verdict in VERDICTS and j.verdict not in (IDENTICAL, BATCHED)  # no load, and they part
    assert j.depth == (None if p.prompt is None else p.prompt + p.index)
    known = [c for c in p.calibrations if c is not None]
    reaches = j.depth is not None and bool(known) and all(j.depth < c.depth for c in known)
    margins_known = p.baseline.margin is not None and p.candidate.margin is not None
    if not (margins_known and reaches):
        # no margin, no depth or no calibration that reaches it: never a verdict either way
        assert j.verdict == UNJUDGED
        return
    assert j.depth is not None
    noise = max(c.by_depth[j.depth // 32] for c in known)  # the deepest bucket that holds the parting, no other
    assert j.noise == noise and j.bound == 2 * noise
    moved = p.baseline.margin + p.candidate.margin  # type: ignore[operator]
    assert j.verdict == (NEAR_TIE if moved <= 2 * noise else DEFECT)
    if j.verdict == DEFECT:
        assert j.reproduce == "spectui diff a.spectui b.spectui" and "reproduce: spectui diff" in j.reason


@settings(max_examples=300, deadline=None)
@given(partings(), st.integers(-50, 50))
def test_only_the_sequence_position_matters_not_how_it_splits_into_prompt_and_output(p: Parting, shift: int):
    if p.prompt is None or p.index is None or not (0 <= p.prompt + shift and 0 <= p.index - shift):
        return
    moved = Parting(index=p.index - shift, prompt=p.prompt + shift, baseline=p.baseline, candidate=p.candidate,
                    calibrations=p.calibrations)
    assert judge(moved).verdict == judge(p).verdict


@settings(max_examples=300, deadline=None)
@given(partings())
def test_the_verdict_is_the_same_whichever_run_is_the_baseline(p: Parting):
    swapped = Parting(index=p.index, prompt=p.prompt, baseline=p.candidate, candidate=p.baseline, calibrations=p.calibrations[::-1])
    assert judge(swapped).verdict == judge(p).verdict


@settings(max_examples=300, deadline=None)
@given(partings(), st.integers(0, 3000))
def test_larger_margins_never_turn_a_defect_into_a_near_tie(p: Parting, more: int):
    if p.candidate.margin is None:
        return
    wider = Parting(index=p.index, prompt=p.prompt, baseline=p.baseline, calibrations=p.calibrations,
                    candidate=Side(token=2, margin=p.candidate.margin + more / 1000, runner_up=p.candidate.runner_up))
    if judge(p).verdict == DEFECT:
        assert judge(wider).verdict == DEFECT


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=30), st.lists(st.integers(0, 5), min_size=1, max_size=30),
       st.integers(0, 300), calibrations())
def test_outputs_are_judged_at_their_first_difference(a: list[int], b: list[int], prompt: int, noise: BatchNoise | None):
    top = [(500, 9)] * 30
    x = RunOutput(tokens=a, top=top[: len(a)], prompt=prompt, calibration=noise)
    y = RunOutput(tokens=b, top=top[: len(b)], prompt=prompt, calibration=noise)
    j = judge_outputs(x, y)
    assert j is not None
    if a == b:
        assert j.verdict == IDENTICAL
        return
    n = next((i for i, (s, t) in enumerate(zip(a, b)) if s != t), min(len(a), len(b)))
    assert j.index == n and j.depth == prompt + n
    assert j == judge(parting(x, y, index=n))
    if n == min(len(a), len(b)):
        assert j.verdict == UNJUDGED  # one ended where the other went on: no token choice to judge
