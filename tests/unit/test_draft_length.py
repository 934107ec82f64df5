"""The cost-aware draft length: its arithmetic on known costs and acceptance (the engine-level
behaviour, exactness included, runs on the real model in tests/backends/test_exactness.py)."""

from __future__ import annotations

import pytest

from spectui.drafting import CostAware, DraftConfig, Fixed, Model, Pricing
from spectui.engine.loop.draft_length import COST_MIN_SAMPLES, MARGIN, PROBE_AFTER, DraftLength, VerifyCost, _expected
from spectui.engine.loop.pricing import MODEL_CLASS, cell
from spectui.engine.protocol import SUPPORT_ONCE, Draft
from spectui.metrics.predict import verify_cost


def adaptive(k: int = 4, k_min: int = 1, k_max: int = 16) -> DraftLength:
    return DraftLength(CostAware(k_min=k_min, k_max=k_max))


def teach(d: DraftLength, curve: dict[int, float], unit_us: float = 1000.0) -> None:
    """Feed timings per block size, as the loop would after steps of those sizes."""
    for n, c in curve.items():
        observe(d.cost, n, c * unit_us)


def observe(cost: VerifyCost, n: int, us: float) -> None:
    for _ in range(COST_MIN_SAMPLES):
        cost.observe(n, us)


def test_fixed_k_never_moves():
    d = DraftLength(Fixed(k=5))
    for accepted in (0, 5, 2):
        d.update(5, 5, accepted, 100.0)
    d.shadow(False)
    assert d.k == d.model_k() == 5


def test_cost_uses_measurements_and_the_prior_beyond_them():
    cost = VerifyCost(16)
    assert cost(5) == pytest.approx(verify_cost(5))  # nothing measured yet: the cost model
    observe(cost, 1, 1000)
    observe(cost, 3, 2000)
    assert cost(1) == 1.0 and cost(3) == pytest.approx(2.0)
    assert cost(5) == pytest.approx(2.0 + verify_cost(5) - verify_cost(3))  # from the nearest size below
    cost.observe(3, 30000)  # one preempted step: a running median ignores it
    assert cost(3) == pytest.approx(2.0)
    for _ in range(COST_MIN_SAMPLES + 1):
        cost.observe(3, 3000)  # a lasting change moves it
    assert cost(3) == pytest.approx(3.0)


def test_cost_table_follows_each_change_and_sizes_past_it_grow_from_the_largest_timed():
    """The costs are kept as one table per change of a size's median (an AR step's timing moves
    the unit every few steps): a moved unit, a dip and a size past the table all still hold."""
    cost = VerifyCost(4)  # the table covers sizes up to 5
    observe(cost, 1, 1000)
    observe(cost, 3, 2000)
    assert cost(4) == pytest.approx(2.0 + verify_cost(4) - verify_cost(3))
    assert cost(9) == pytest.approx(2.0 + verify_cost(9) - verify_cost(3))  # past the table
    for _ in range(6):
        cost.observe(1, 500)  # the one-token step got faster: every size costs more of it
    assert cost(3) == pytest.approx(4.0)
    assert cost(9) == pytest.approx(4.0 + verify_cost(9) - verify_cost(3))
    observe(cost, 5, 1500)  # a dip: 5 timed cheaper than 3
    assert cost(5) == pytest.approx(cost(4)) and cost(4) > cost(3)
    assert cost(9) >= cost(5)


def test_flat_cost_and_high_acceptance_draft_long():
    d = adaptive()
    teach(d, {n: 1.0 + 0.02 * (n - 1) for n in range(1, 18)})  # a GPU: verifying is nearly free
    for _ in range(6):
        d.update(d.k, d.k, d.k, 1020.0)  # every block fully accepted
    assert d.k == 16


def test_steep_cost_and_low_acceptance_stop_drafting():
    d = adaptive()
    teach(d, {n: 1.0 + 0.6 * (n - 1) for n in range(1, 18)})  # this 2-core CPU
    for _ in range(4):
        d.update(max(d.k, 1), 4, 0, 3000.0)  # every draft rejected at once
    assert d.k == 0


def test_k_maximises_expected_tokens_per_cost():
    d = adaptive()
    curve = {n: 1.0 + 0.6 * (n - 1) for n in range(1, 18)}
    teach(d, curve)
    for _ in range(40):  # a steady 90% per position of a draft model's blocks
        d.update(4, 4, 4, 3400.0)
        d.update(4, 4, 3, 3400.0)
    chances = d.calibration.chances(MODEL_CLASS, 16)
    value = {k: _expected(chances, k) / curve[k + 1] for k in range(1, 17)}
    best = max(value, key=value.get)
    assert d.model_k() == (best if value[best] >= 1.0 + MARGIN else 0)


def test_bounds_hold():
    d = adaptive(k=3, k_min=2, k_max=6)
    teach(d, {n: 1.0 for n in range(1, 8)})
    for _ in range(5):
        d.update(d.k, d.k, d.k, 1000.0)
    assert d.k == 6
    d2 = adaptive(k=3, k_min=2, k_max=6)
    teach(d2, {n: 1.0 + 0.5 * (n - 1) for n in range(1, 8)})
    for _ in range(10):
        d2.update(2, 2, 1, 1500.0)
    assert d2.model_k() in (0, 2, 3, 4, 5, 6)  # never 1: either no draft or at least k_min


def test_free_guesses_bring_drafting_back():
    d = adaptive()
    teach(d, {n: 1.0 + 0.6 * (n - 1) for n in range(1, 18)})
    text = list(range(100, 140))
    wrong = Draft(list(range(500, 516)), match=3, support=SUPPORT_ONCE)
    for _ in range(6):  # proposals that are rejected at once: held back soon
        k = d.k_for(wrong)
        d.update(k, k, 0, 1000.0 * (1 + 0.6 * k), emitted=[text[0]])
    assert d.k_for(wrong) == 0
    d.update(0, 0, 0, 1000.0, emitted=[text[0]])
    i = 0
    while i < 24:  # the text turned copyable: the held-back proposals are followed, and land
        right = Draft(text[i:i + 16], match=3, support=SUPPORT_ONCE)
        k = d.k_for(right)
        d.update(k, k, k, 1000.0 * (1 + 0.6 * k), emitted=text[i:i + k + 1])
        i += k + 1
    assert d.k_for(Draft(text[i:i + 16], match=3, support=SUPPORT_ONCE)) >= 1


def test_a_draft_model_is_probed_with_backoff():
    d = adaptive()
    teach(d, {n: 1.0 + 0.6 * (n - 1) for n in range(1, 18)})
    d.update(0, 0, 0, 1000.0)
    assert d.k == 0  # the prior (35% acceptance) does not pay on this cost curve
    idle = 1
    while d.model_k() == 0:
        d.update(0, 0, 0, 1000.0)
        idle += 1
    assert idle == PROBE_AFTER
    d.update(1, 1, 0, 1600.0)  # the probe failed: wait twice as long next time
    assert d.k == 0
    idle = 0
    while d.model_k() == 0:
        d.update(0, 0, 0, 1000.0)
        idle += 1
    assert idle == 2 * PROBE_AFTER
    d.update(1, 1, 1, 1600.0)  # a probe that lands resets the wait
    assert d._probe_after == PROBE_AFTER


def test_acceptance_is_kept_per_match_length():
    d = adaptive()
    teach(d, {n: 1.0 + 0.6 * (n - 1) for n in range(1, 18)})
    for _ in range(6):
        d.update(8, 8, 8, 5200.0, match=4)  # drafts found by 8+ tokens: all accepted
        d.update(8, 8, 0, 5200.0, match=1)  # drafts found by one token: all rejected
    assert d.k_for(4) >= 8
    assert d.k_for(1) == 0
    assert d.acceptance(4) > 0.9 > 0.1 > d.acceptance(1)


def test_a_longer_match_starts_from_what_a_shorter_one_earned():
    d = adaptive()
    teach(d, {n: 1.0 + 0.6 * (n - 1) for n in range(1, 18)})
    for _ in range(12):
        d.update(8, 8, 8, 5200.0, match=3)  # a copy found by a 4-7 token context: all kept
    # the copy runs on and its context grows past 8: still a copy, keep drafting long
    assert d.acceptance(4) >= d.acceptance(3) > 0.9
    assert d.k_for(4) >= 8
    # but a shorter match does not inherit from a longer one; a shorter one's poor record
    # says the text copies less than the prior's texts did, and moves a longer one's prior
    # down with it (``pricing.Calibration.text_odds``), not to its own record
    assert d.acceptance(1) < 0.5
    e = adaptive()
    for _ in range(6):
        e.update(8, 8, 0, 5200.0, match=2)
    assert e.acceptance(2) < e.acceptance(4) < adaptive().acceptance(4)


def test_seed_gives_the_shape_until_the_run_measures():
    seed = (1.0, 1.3, 1.5, 1.6, 2.5)  # a curve with cheap blocks of 2-4 (repacked Q4_0)
    cost = VerifyCost(16, seed)
    assert cost(3) == pytest.approx(1.5)  # nothing measured: the seed
    assert cost(7) == pytest.approx(2.5 + verify_cost(7) - verify_cost(5))  # past it: the model's growth
    observe(cost, 3, 3000)  # a run that always drafts: no one-token timing, the scale from the seed
    assert cost(3) == pytest.approx(1.5)
    assert cost(5) == pytest.approx(2.5)
    observe(cost, 1, 1000)  # a measured one-token step: the run's own numbers win
    assert cost(3) == pytest.approx(3.0)
    assert cost.measured() == {1: 1.0, 3: 3.0}


def test_seeded_curve_picks_the_sizes_the_kernel_likes():
    """K falls out of the measured curve: with blocks of 4 cheap and 5 dear (rows in groups
    of 4), a high acceptance picks a 4-token block (K=3), no hard-coded rule."""
    seed = (1.0, 1.6, 1.8, 1.9, 3.0, 3.1, 3.2, 3.3, 4.4)
    d = DraftLength(CostAware(k_min=1, k_max=8), Pricing(seed=seed))
    for _ in range(10):  # 80% at every position of a 4-7 token match
        for hit in (1, 1, 1, 1, 0, 1, 1, 1, 1, 0):
            for j in range(8):
                d.calibration.observe(cell(3, j), bool(hit))
    assert d.k_for(3) == 3


def test_a_draft_models_cost_aware_k_prices_its_drafting_in_the_run_and_in_tunes_replay():
    """A draft model's K is priced with what a drafted token costs: on a CPU curve, a model as
    dear as 0.55 of its target (the Qwen2.5-Coder 0.5B for the 1.5B here) is not worth drafting
    even when it is never wrong, so the plan is AR; a model 20x cheaper drafts long blocks.
    tune's replay of the plan (the pair benchmark's prediction) follows the same rule."""
    from spectui.tune.model_replay import replay_model

    curve = {n: 1.0 + 0.6 * (n - 1) for n in range(1, 18)}
    for draft_cost, pays in ((0.55, False), (0.05, True)):
        d = DraftLength(CostAware(k_max=16, learn=False), Pricing(seed=tuple(curve.values()), draft_cost=draft_cost))
        for _ in range(60):  # a draft that is always right (probed first: the prior says 0.35)
            k = d.model_k()
            d.update(k, k, k) if k else d.update(0, 0, 0)
        assert (d.model_k() >= 4) == pays, (draft_cost, d.model_k())
        replayed = replay_model([True] * 200, curve.__getitem__, draft_cost,
                                DraftConfig(drafter=Model(path="d.gguf"), length=CostAware(k_max=16)), seed=tuple(curve.values()))
        assert (replayed.speedup > 1.2) == pays and (replayed.mean_k == 0) == (not pays), (draft_cost, replayed)
