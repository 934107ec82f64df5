"""Pricing a setting from its replayed drafting counts, and the race that follows it."""

from __future__ import annotations

import math

import pytest

from spectui.runtime.spec_replay import Counts
from spectui.tune.traffic_price import ArRequest, ar_request, beta_of_run, fit_beta, priced_speedup
from spectui.tune.traffic_search import Trial, next_entrant, race_winner
from spectui.tune.traffic_space import Candidate

AR = [ArRequest(ttft_ms=50.0, ms_per_token=10.0, n_tokens=101), ArRequest(ttft_ms=80.0, ms_per_token=12.0, n_tokens=65)]
PLAIN = [Counts(passes=100, drafted=0, accepted=0), Counts(passes=64, drafted=0, accepted=0)]
# long drafts, most kept: half the passes, a hundred drafted tokens a request
BOLD = [Counts(passes=40, drafted=150, accepted=60), Counts(passes=30, drafted=100, accepted=34)]
# short drafts, nearly all kept
SHY = [Counts(passes=70, drafted=32, accepted=30), Counts(passes=44, drafted=22, accepted=20)]


def test_a_setting_that_never_drafts_is_priced_at_ar_whatever_a_drafted_token_costs() -> None:
    for beta in (0.0, 0.3, 2.0):
        assert priced_speedup(AR, PLAIN, beta) == pytest.approx(1.0)


def test_an_ar_request_is_its_first_token_and_its_time_per_later_token() -> None:
    a = ar_request([40.0, 50.0, 60.0, 70.0])
    assert a == ArRequest(ttft_ms=40.0, ms_per_token=10.0, n_tokens=4) and a.total_ms == 70.0
    assert ar_request([40.0]) is None


def test_the_beta_fitted_on_a_run_prices_that_run_exactly() -> None:
    for measured in (0.9, 1.3, 1.8):
        beta = beta_of_run(AR, BOLD, measured)
        assert priced_speedup(AR, BOLD, beta) == pytest.approx(measured)
    assert math.isnan(beta_of_run(AR, PLAIN, 1.0))  # nothing drafted: nothing to fit
    assert math.isnan(beta_of_run(AR, BOLD, math.nan))


def test_beta_is_the_median_of_the_runs_and_never_below_zero() -> None:
    assert fit_beta([0.2, 0.3, 5.0, math.nan]) == pytest.approx(0.3)
    assert fit_beta([-0.4, -0.1]) == 0.0
    assert fit_beta([]) == 0.0


def test_which_setting_enters_next_depends_on_what_a_drafted_token_costs() -> None:
    bold, shy = Candidate(("ngram-simple",), k=16), Candidate(("ngram-simple",), k=4)
    prices = {bold: lambda b: priced_speedup(AR, BOLD, b), shy: lambda b: priced_speedup(AR, SHY, b)}
    assert next_entrant(prices, 0.0, []) == bold  # free drafts: the fewest passes
    assert next_entrant(prices, 1.0, []) == shy  # dear drafts: the fewest wasted
    assert next_entrant(prices, 1.0, [shy]) == bold
    assert next_entrant(prices, 1.0, [shy, bold]) is None


def _trial(c: Candidate, rnd: int, speedup: float, *, priced: bool = False) -> Trial:
    return Trial(rnd, c, 1.0, speedup, 1.0, 4, priced=priced)


def test_the_race_is_won_over_the_rounds_and_prices_never_count_as_runs() -> None:
    a, b = Candidate(("ngram-simple",), k=8), Candidate(("ngram-mod",), k=16)
    trials = [_trial(a, 1, 1.30), _trial(b, 1, 1.10), _trial(a, 2, 0.95), _trial(b, 2, 1.15), _trial(a, 0, 9.0, priced=True)]
    assert race_winner(trials) == b  # geometric means 1.11 and 1.12: b
    assert race_winner([_trial(a, 0, 2.0, priced=True)]) is None
    # a setting the budget cut after one round is not held against two-round figures
    c = Candidate(("ngram-cache",))
    assert race_winner([*trials, _trial(c, 1, 3.0)]) == b


def test_settings_of_one_method_are_told_apart_by_their_prices_not_by_a_runs_luck() -> None:
    """Two ngram-simple settings measured a run apart by less than the host moves: the method's
    residual (measured over priced) is shared, so the better priced one wins."""
    m8, m16 = Candidate(("ngram-simple",), k=8), Candidate(("ngram-simple",), k=16)
    mod = Candidate(("ngram-mod",), k=16)
    prices = {m8: 1.13, m16: 1.06, mod: 1.07}
    trials = [_trial(m16, 1, 1.15), _trial(m8, 1, 1.17), _trial(mod, 1, 1.06),
              _trial(mod, 2, 1.10), _trial(m8, 2, 1.12), _trial(m16, 2, 1.15)]
    assert race_winner(trials) == m16  # by the runs alone: 1.150 against 1.145
    assert race_winner(trials, prices.__getitem__) == m8
    # a method whose runs sat below their prices loses to one whose runs sat above them
    slow = {m8: 1.13, m16: 1.06, mod: 1.20}
    assert race_winner(trials, slow.__getitem__) == m8
