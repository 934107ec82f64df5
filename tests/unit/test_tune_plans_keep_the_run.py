"""tune derives every setting it predicts and measures from the run's own ``DraftConfig``:
what the flags said that a setting does not change (a drafter chain, a draft model's
price, n-gram sizes, the draft temperature) stays as it was."""

from __future__ import annotations

from spectui.config import DraftConfig
from spectui.tune.plan import Setting

SEED = (1.0, 1.6, 2.1)


def test_a_draft_model_setting_keeps_the_runs_chain_and_draft_cost():
    base = DraftConfig(source="/models/draft.gguf", chain="ngram", draft_cost=0.55, adaptive=True, k=4,
                       ngram_min=2, ngram_max=6, temperature=0.7)
    got = Setting("model", 6, 0.6).draft_config(base, SEED)
    assert (got.source, got.chain, got.draft_cost) == ("/models/draft.gguf", "ngram", 0.55)
    assert (got.k, got.adaptive, got.p_min) == (6, False, 0.6)
    assert (got.ngram_min, got.ngram_max, got.temperature) == (2, 6, 0.7)
    got.validate()


def test_a_lookup_setting_keeps_the_runs_sizes_and_drops_only_what_it_cannot_use():
    base = DraftConfig(source="/models/draft.gguf", chain="suffix", draft_cost=0.4, k_min=2, k_max=12, ngram_max=5)
    cost_aware = Setting("ngram", None).draft_config(base, SEED)
    assert (cost_aware.source, cost_aware.adaptive, cost_aware.cost_seed) == ("ngram", True, SEED)
    assert (cost_aware.k_min, cost_aware.k_max, cost_aware.ngram_max) == (2, 12, 5)
    assert cost_aware.chain == ""  # a chain puts a lookup in front of a model: none here
    assert cost_aware.draft_cost == 0.4 and not cost_aware.memory  # replayed without the suffix memory
    cost_aware.validate()
    fixed = Setting("suffix", 3).draft_config(base, SEED)
    assert (fixed.source, fixed.k, fixed.adaptive, fixed.chain) == ("suffix", 3, False, "")
    fixed.validate()


def test_a_given_cost_seed_wins_over_tunes_curve():
    base = DraftConfig(source="ngram", adaptive=True, cost_seed=(1.0, 1.2))
    assert Setting("ngram", None).draft_config(base, SEED).cost_seed == (1.0, 1.2)
