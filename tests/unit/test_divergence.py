"""The divergence classifier, the calibration's depth lookup and the top-2 margin, on plain data.

The real-model side (margins recorded by real runs, a real near-tie, an edited recording
failing the gate) is ``tests/backends/test_divergence_real.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from spectui.compare.divergence import CHANGED, NEAR_TIE, UNCLASSIFIED, classify
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
    assert NOISE.at(512) == 0.84
    assert NOISE.at(513) is None  # never extrapolated: noise grows with depth
    assert BatchNoise().at(0) is None


@pytest.mark.parametrize(("reach", "n_ctx", "depth"), [(10, 4096, 64), (65, 4096, 128), (316, 4096, 512), (5000, 8192, 1024), (300, 200, 199)])
def test_calibration_depth(reach, n_ctx, depth):
    assert calibration_depth(reach, n_ctx) == depth


def _classify(margin_b: int, margin_c: int, *, index: int = 186, prompt: int = 130, noises=(NOISE, NOISE), runners=(448, 1004)):
    return classify(
        index=index,
        baseline=(1004, (margin_b, runners[0])),
        candidate=(448, (margin_c, runners[1])),
        prompt_tokens=prompt,
        noises=list(noises),
    )


def test_a_swap_within_the_noise_is_a_near_tie():
    # load-code-continuation on 2 threads: token 186 at depth 316, margins 0.064 and 0.027
    cause = _classify(64, 27)
    assert cause.verdict == NEAR_TIE and not cause.fails
    assert cause.swapped and cause.depth == 316
    assert cause.bound == pytest.approx(1.68)
    assert "0.064" in cause.reason and "0.027" in cause.reason and "1.680" in cause.reason


def test_margins_beyond_the_noise_are_speculation():
    cause = _classify(1500, 400)
    assert cause.verdict == CHANGED and cause.fails
    assert "1.900 > 1.680" in cause.reason


def test_any_divergence_where_the_backend_is_invariant_is_speculation():
    # depth 150: both runs' logits agree bit for bit there, so even a tiny margin cannot flip
    cause = _classify(1, 1, index=20)
    assert cause.verdict == CHANGED and cause.noise == 0.0


def test_the_larger_noise_of_the_two_headers_counts():
    loud = BatchNoise(depth_step=32, by_depth=[2.0] * 16, depth=512)
    assert _classify(1500, 400, noises=(NOISE, loud)).verdict == NEAR_TIE


@pytest.mark.parametrize(
    ("noises", "margins", "why"),
    [
        ((None, None), (64, 27), "no batch-noise calibration"),
        ((NOISE, BatchNoise(depth_step=32, by_depth=[0.1] * 4, depth=128)), (64, 27), "no batch-noise calibration"),
        ((NOISE, NOISE), (None, 27), "no top-2 margin recorded by the baseline"),
    ],
)
def test_unclassified_without_margins_or_calibration(noises, margins, why):
    b, c = margins
    cause = classify(
        index=186,
        baseline=(1004, None if b is None else (b, 448)),
        candidate=(448, (c, 1004)),
        prompt_tokens=130,
        noises=list(noises),
    )
    assert cause.verdict == UNCLASSIFIED and cause.fails
    assert why in cause.reason


def test_one_margin_past_the_bound_settles_it_alone():
    # a speculative llama-server run sends no log-probabilities for drafted tokens
    cause = classify(index=186, baseline=(1004, (2500, 448)), candidate=(448, None), prompt_tokens=130, noises=[NOISE])
    assert cause.verdict == CHANGED and "one margin alone, 2.500" in cause.reason
    assert classify(index=186, baseline=(1004, (500, 448)), candidate=(448, None), prompt_tokens=130, noises=[NOISE]).verdict == UNCLASSIFIED


def test_one_side_ending_first_is_not_a_token_choice():
    cause = classify(index=5, baseline=(7, (10, 8)), candidate=(None, None), prompt_tokens=3, noises=[NOISE])
    assert cause.verdict == UNCLASSIFIED and "candidate ended first" in cause.reason


def test_not_swapped_when_the_runner_up_is_another_token():
    assert not _classify(64, 27, runners=(5, 1004)).swapped


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
