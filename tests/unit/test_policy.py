"""The fallback policy's memory triggers, fed real ``MemorySample`` records (the engine-level
behaviour, with real acceptance, is in tests/backends/test_fallback.py)."""

from __future__ import annotations

from spectui.config import PolicyConfig, RunConfig
from spectui.drafting import DraftConfig, Fixed
from spectui.engine.drafters.ngram import NgramDrafter
from spectui.engine.loop.policy import FallbackPolicy, ladder, shrink_k
from spectui.recording.schema import MemorySample

MB = 1024 * 1024


def policy(**cfg) -> FallbackPolicy:
    run = RunConfig(prompt="x", draft=DraftConfig(length=Fixed(k=4)))
    return FallbackPolicy(PolicyConfig(enabled=True, **cfg), ladder(run), {"ngram": NgramDrafter()})


def sample(swap_mb: float = 0, pressure: float = 0.0) -> MemorySample:
    return MemorySample(0, 100 * MB, 8000 * MB, 8000 * MB, int(swap_mb * MB), 0, 0, pressure)


def test_shrink_k_walks_the_ladder():
    assert [shrink_k(k) for k in (1, 2, 3, 4, 6, 8, 16)] == [1, 1, 2, 3, 4, 6, 12]


def test_swap_growth_steps_down_once_and_holds_probes():
    p = policy(swap_growth_ceiling_mb=100, probe_after_steps=2)
    p.observe_memory(sample(swap_mb=500))  # the first sample is the baseline, whatever it is
    p.observe_memory(sample(swap_mb=560))
    assert p.decide(1) is None
    p.observe_memory(sample(swap_mb=650))
    change = p.decide(2)
    assert (change.before, change.after, change.reason) == ("ngram K=4", "ngram K=3", "swap grew 150 MB (ceiling 100 MB)")
    p.observe_memory(sample(swap_mb=700))  # still over: no second step for the same crossing
    for _ in range(10):
        p.observe_block(0, 0)
    assert p.decide(3) is None  # and no probe while it holds
    p.observe_memory(sample(swap_mb=520))  # back under the ceiling
    change = p.decide(4)
    assert (change.before, change.after) == ("ngram K=3", "ngram K=4") and change.reason.startswith("probe after")


def test_pressure_ceiling():
    p = policy(pressure_ceiling=4)
    p.observe_memory(sample(pressure=2))
    assert p.decide(1) is None
    p.observe_memory(sample(pressure=4))
    assert p.decide(2).reason == "memory pressure 4 (ceiling 4)"


def test_no_step_below_ar():
    p = policy(window_blocks=1, low_windows=1)
    for t in range(5):
        p.observe_block(3, 0)
        p.decide(t)
    assert p.rung.label == "AR" and p.drafter is None
    p.observe_memory(sample())
    p.observe_memory(sample(swap_mb=10_000))
    assert p.decide(9) is None
