"""A cost-aware run prices every block size it may draft by a measured cost.

A run times only the block sizes it drafts, so a cached curve that stops at 11 (what runs
left while K never passed 10) kept sizes 12-17 priced by the cost model's slope, several times
steeper than measured on this CPU: long copies never drafted them. The first run whose longest
block is past the cached curve measures the sizes it lacks, once; tune's curve stays as it is.
"""

from __future__ import annotations

import warnings

import pytest

from spectui.config import RunConfig
from spectui.drafting import CostAware, DraftConfig, Pricing
from spectui.engine.host.verify_cost import SeedNotice
from spectui.models.cost_curves import CostCurve, load_curve, save_curve

SHORT = (1.0, 1.9, 2.6, 3.1, 3.7, 4.0, 4.0, 4.5, 4.3, 4.6, 4.3)  # what runs had left: n = 1..11


@pytest.fixture(autouse=True)
def cached_curve_restored(engine):  # noqa: ANN001 - the session engine
    """Put back what the session's cache held for this engine: later tests start from it."""
    key = engine.cost_key()
    before = load_curve(key)
    yield
    if before is not None:
        save_curve(key, before)


def spec_config(model_path: str) -> RunConfig:
    return RunConfig(target=model_path, mode="spec", prompt="Repeat: the cat sat on the mat. The cat sat on the mat.",
                     max_tokens=8, draft=DraftConfig(length=CostAware(k_max=16)))


def measured_seed(engine, config: RunConfig, pricing: Pricing | None = None) -> bool:  # noqa: ANN001 - the session engine
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        list(engine.run(config, memory_interval_s=None, pricing=pricing))
    return any(issubclass(w.category, SeedNotice) for w in seen)


def test_a_short_cached_curve_is_measured_out_once(engine, model_path):
    config = spec_config(model_path)
    key = engine.cost_key()
    save_curve(key, CostCurve(relative=SHORT, source="runs"))
    assert measured_seed(engine, config)
    curve = load_curve(key)
    assert curve is not None and len(curve.relative) >= 17  # up to the longest block, k_max + 1
    assert curve.relative[10] != SHORT[10] or curve.relative[:11] != SHORT  # what it measured is folded in
    assert all(c >= 1.0 for c in curve.relative)
    assert not measured_seed(engine, config)  # once: the next run finds it whole
    # the dashboard measures before the run and says so (``SessionRunner``'s loading detail)
    save_curve(key, CostCurve(relative=SHORT, source="runs"))
    said: list[str] = []
    engine.measure_cost(config, before=lambda: said.append("measuring"))
    assert said == ["measuring"] and len(load_curve(key).relative) >= 17
    engine.measure_cost(config, before=lambda: said.append("again"))
    assert said == ["measuring"]


def test_tune_curve_and_a_run_with_its_own_seed_are_left_alone(engine, model_path):
    config = spec_config(model_path)
    key = engine.cost_key()
    tuned = CostCurve(relative=SHORT, unit_us=5000.0, depth=128, source="tune")
    save_curve(key, tuned)
    assert not measured_seed(engine, config)
    assert load_curve(key) == tuned
    save_curve(key, CostCurve(relative=SHORT, source="runs"))
    assert not measured_seed(engine, config, Pricing(seed=SHORT))  # a run handed its seed
    assert len(load_curve(key).relative) == len(SHORT)
