"""The per-model verify-cost cache: what tune stores, what runs leave, what a run starts from."""

from __future__ import annotations

import pytest

from spectui.cli import build_parser
from spectui.cli.run_flags import config_from_args
from spectui.drafting import CostAware, DraftConfig, Fixed, Model, Pricing
from spectui.errors import SpectuiError
from spectui.models.cost_curves import CostCurve, curve_key, load_curve, merge_run_curve, save_curve

KEY = curve_key("ab" * 32, "llamacpp", 2, -1)


def test_tune_curve_round_trips_and_runs_do_not_overwrite_it(tmp_path):
    curve = CostCurve(relative=(1.0, 1.6, 1.9, 1.94), unit_us=4600.0, depth=115, source="tune")
    save_curve(KEY, curve, cache=tmp_path)
    assert load_curve(KEY, cache=tmp_path) == curve
    merge_run_curve(KEY, {1: 1.0, 2: 3.0, 4: 5.0}, cache=tmp_path)
    assert load_curve(KEY, cache=tmp_path) == curve  # measured on purpose: kept
    assert load_curve(curve_key("cd" * 32, "llamacpp", 2, -1), cache=tmp_path) is None


def test_runs_leave_a_curve_that_later_runs_refine(tmp_path):
    merge_run_curve(KEY, {1: 1.0, 2: 1.8, 5: 3.0}, cache=tmp_path)
    first = load_curve(KEY, cache=tmp_path)
    assert first.source == "runs"
    assert first.relative == pytest.approx((1.0, 1.8, 2.2, 2.6, 3.0))  # 3 and 4 interpolated
    merge_run_curve(KEY, {1: 1.0, 2: 2.8}, cache=tmp_path)
    second = load_curve(KEY, cache=tmp_path)
    assert 1.8 < second.relative[1] < 2.8  # a moving average, not the last run alone
    assert second.relative[4] == pytest.approx(3.0)
    merge_run_curve(KEY, {1: 1.0, 3: 40.0}, cache=tmp_path)  # an absurd timing is clipped
    assert load_curve(KEY, cache=tmp_path).relative[2] <= 1.25 * 3


def test_a_corrupt_cache_is_no_curve(tmp_path):
    (tmp_path / "verify-cost.json").write_text("{not json")
    assert load_curve(KEY, cache=tmp_path) is None
    (tmp_path / "verify-cost.json").write_text(f'{{"{KEY}": {{"relative": [2.0, 1.0]}}}}')
    assert load_curve(KEY, cache=tmp_path) is None  # must start at one token = 1.0
    save_curve(KEY, CostCurve(relative=(1.0, 2.0)), cache=tmp_path)  # and is rewritten whole
    assert load_curve(KEY, cache=tmp_path).relative == (1.0, 2.0)


def test_seed_must_be_a_curve():
    with pytest.raises(SpectuiError):
        Pricing(seed=(2.0, 3.0)).validate()
    with pytest.raises(SpectuiError):
        DraftConfig(drafter=Model(path="d.gguf", p_min=1.0)).validate()


def config(*flags: str):
    return config_from_args(build_parser().parse_args(["run", "--prompt", "hi", *flags]))


def test_prompt_lookup_without_k_is_cost_aware_and_an_explicit_k_is_fixed():
    assert config().draft.cost_aware and config("--mode", "spec").draft.cost_aware
    assert config("--k", "4").draft.length == Fixed(k=4)
    assert not config("--draft", "/m/draft.gguf").draft.cost_aware  # a draft model: K=4 unless asked
    assert config("--k-max", "2").draft.length == CostAware(k_max=2)
    assert config("--draft", "/m/d.gguf", "--p-min", "0.6").describe() == "speculative, draft model /m/d.gguf, K=4, p-min 0.6"
