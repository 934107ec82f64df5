"""The curve's best K: the draft length a verify-cost curve says pays best at an acceptance
(``metrics.predict.best_k``), and the stats panel's line for it."""

from __future__ import annotations

import pytest

from spectui.drafting import CostAware, DraftConfig, Fixed, Pricing
from spectui.engine.loop.draft_length import DraftLength
from spectui.metrics.predict import best_k, expected_tokens, seeded_cost, verify_cost

#: the embedded model requantized to Q4_0 (``spectui tune --weights``): n = 4 and 8 are cheap
Q4_0 = (1.0, 1.60, 1.77, 1.94, 2.1, 2.25, 2.45, 2.65)


def brute(a: float, cost, k_max: int = 16) -> int:  # noqa: ANN001
    values = {k: expected_tokens(a, k) / cost(k + 1) for k in range(1, k_max + 1)}
    k = max(values, key=values.get)
    return k if values[k] > 1.0 else 0


@pytest.mark.parametrize("a", [0.0, 0.2, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0])
@pytest.mark.parametrize("seed", [(), Q4_0])
def test_best_k_is_the_argmax_of_tokens_per_cost(a, seed):
    assert best_k(a, seed) == brute(a, seeded_cost(seed))


def test_nothing_pays_at_low_acceptance():
    assert best_k(0.0) == 0  # AR
    assert best_k(0.3, Q4_0) == 0


def test_full_acceptance_drafts_to_the_limit():
    assert best_k(1.0, (), 1, 16) == 16  # K + 1 tokens for a block that costs less than K + 1
    assert best_k(1.0, (), 2, 5) == 5


def test_a_cheaper_curve_drafts_longer():
    # the built-in (Q4_1) model: at 0.7 nothing beats AR; Q4_0's flat curve pays
    assert best_k(0.7) == 0
    assert best_k(0.7, Q4_0) > 0
    assert best_k(0.9, Q4_0) > best_k(0.9)


def test_range_is_kept():
    assert 3 <= best_k(0.6, Q4_0, 3, 6) <= 6 or best_k(0.6, Q4_0, 3, 6) == 0
    assert best_k(0.99, Q4_0, 1, 4) == 4


def test_seed_and_model_curves():
    cost = seeded_cost(Q4_0)
    assert cost(1) == 1.0 and cost(4) == Q4_0[3] and cost(8) == Q4_0[7]
    assert cost(12) == pytest.approx(Q4_0[-1] + verify_cost(12) - verify_cost(8))  # past the seed: the model's slope
    assert seeded_cost(())(8) == verify_cost(8)
    assert best_k(0.9, cost) == best_k(0.9, Q4_0)  # a callable is used as is


@pytest.mark.parametrize("seed", [(), Q4_0])
def test_matches_the_cost_aware_k_before_it_measured_anything(seed):
    """A cost-aware run's first K is the curve's best at its prior acceptance."""
    dl = DraftLength(CostAware(), Pricing(seed=seed))
    assert dl.k == best_k(dl.acceptance(), seed, 1, 16)


def test_stats_line():
    pytest.importorskip("textual")
    from spectui.ui.widgets.stats import curve_best

    assert curve_best(0.1, DraftConfig(), ()) == "AR (cost model)"
    # K = 7 verifies 8 tokens, a size Q4_0 evaluates cheaply: the curve's best, not k_max
    assert curve_best(0.99, DraftConfig(length=CostAware(k_max=8)), Q4_0) == "K 7 (seed curve)"
    assert curve_best(0.9, DraftConfig(length=Fixed()), Q4_0) == f"K {best_k(0.9, Q4_0)} (seed curve)"
