"""Predicted speedup and break-even acceptance (spectui.metrics.predict)."""

from __future__ import annotations

import math

import pytest

from spectui.metrics.predict import (
    VERIFY_COST_POINTS,
    break_even_acceptance,
    expected_tokens,
    predict,
    predicted_speedup,
    verify_cost,
)


@pytest.mark.parametrize("k", [1, 2, 4, 8, 16])
def test_expected_tokens_limits(k):
    assert expected_tokens(0.0, k) == 1.0  # nothing accepted: the correction alone
    assert expected_tokens(1.0, k) == k + 1  # everything accepted plus the bonus token


def test_expected_tokens_matches_the_sum_it_closes():
    # E = sum_{i=0..K} a^i: the block reaches position i with probability a^i
    for a in (0.1, 0.5, 0.8, 0.99):
        for k in (1, 3, 4, 7):
            assert expected_tokens(a, k) == pytest.approx(sum(a**i for i in range(k + 1)))
    assert expected_tokens(0.5, 4) == pytest.approx(1.9375)


def test_expected_tokens_is_continuous_at_one():
    assert expected_tokens(1 - 1e-9, 4) == pytest.approx(5.0, rel=1e-6)


def test_expected_tokens_rejects_nonsense():
    with pytest.raises(ValueError):
        expected_tokens(1.5, 4)
    with pytest.raises(ValueError):
        expected_tokens(0.5, -1)


def test_verify_cost_model_goes_through_the_measured_points():
    for n, cost in VERIFY_COST_POINTS:
        assert verify_cost(n) == pytest.approx(cost)
    assert verify_cost(3) == pytest.approx((1.8 + 2.8) / 2)  # linear between 2 and 4
    assert verify_cost(32) > verify_cost(16)  # extrapolated, still growing
    assert verify_cost(0.5) == pytest.approx(0.5)


def test_speedup_is_tokens_per_block_over_block_cost():
    assert predicted_speedup(0.5, 4, 1.9375) == pytest.approx(1.0)
    assert predicted_speedup(1.0, 4, 2.5) == pytest.approx(2.0)


@pytest.mark.parametrize("k", [1, 2, 4, 8])
@pytest.mark.parametrize("cost", [1.2, 1.8, 2.5, 3.9])
def test_break_even_solves_speedup_equals_one(k, cost):
    a = break_even_acceptance(k, cost)
    if cost > k + 1:
        assert math.isnan(a)
        return
    assert 0.0 <= a <= 1.0
    assert predicted_speedup(a, k, cost) == pytest.approx(1.0, abs=1e-9)
    # below it speculation loses, above it wins
    if a > 0.01:
        assert predicted_speedup(a - 0.01, k, cost) < 1.0
    if a < 0.99:
        assert predicted_speedup(a + 0.01, k, cost) > 1.0


def test_break_even_edges():
    assert break_even_acceptance(4, 0.8) == 0.0  # cheaper than an AR step: always wins
    assert break_even_acceptance(4, 1.0) == 0.0
    assert math.isnan(break_even_acceptance(4, 5.5))  # even a = 1 yields only 5 tokens
    assert break_even_acceptance(4, 5.0) == pytest.approx(1.0)


def test_predict_from_measured_costs():
    p = predict(acceptance=0.8, k=4, draft_us=100, verify_us=2900, ar_step_us=1000)
    assert p is not None
    assert p.ar_step_source == "run"
    assert p.block_us == 3000
    assert p.relative_cost == pytest.approx(3.0)
    assert p.expected_tokens == pytest.approx(expected_tokens(0.8, 4))
    assert p.speedup == pytest.approx(expected_tokens(0.8, 4) / 3.0)
    assert predicted_speedup(p.break_even, 4, 3.0) == pytest.approx(1.0)


def test_predict_falls_back_to_the_cost_model():
    p = predict(acceptance=0.8, k=4, draft_us=0, verify_us=2800, ar_step_us=None)
    assert p is not None
    assert p.ar_step_source == "model"
    # K = 4 verifies 5 tokens: 2.8 + (4.6 - 2.8) / 4 = 3.25 single-token forwards
    assert p.relative_cost == pytest.approx(verify_cost(5))
    assert p.ar_step_us == pytest.approx(2800 / verify_cost(5))


def test_predict_keeps_the_source_it_was_given():
    p = predict(acceptance=0.5, k=2, draft_us=10, verify_us=1800, ar_step_us=1000, ar_step_source="baseline")
    assert p is not None and p.ar_step_source == "baseline"


def test_nothing_to_predict():
    assert predict(acceptance=0.5, k=0, draft_us=0, verify_us=100) is None
    assert predict(acceptance=math.nan, k=4, draft_us=0, verify_us=100) is None
    assert predict(acceptance=0.5, k=4, draft_us=0, verify_us=0) is None
