"""tune derives every setting it predicts and measures from the run's own ``DraftConfig``:
what the flags said that a setting does not change (a drafter chain, n-gram sizes, the draft
temperature, a cost-aware K's limits) stays as it was."""

from __future__ import annotations

from spectui.drafting import CostAware, DraftConfig, Fixed, Lookup, Model
from spectui.tune.plan import Setting


def test_a_draft_model_setting_keeps_the_runs_chain():
    base = DraftConfig(drafter=Model(path="/models/draft.gguf", temperature=0.7, chain=Lookup(name="ngram", ngram_min=2, ngram_max=6)),
                       length=CostAware())
    got = Setting("model", 6, 0.6).draft_config(base)
    assert got.drafter == Model(path="/models/draft.gguf", p_min=0.6, temperature=0.7,
                                chain=Lookup(name="ngram", ngram_min=2, ngram_max=6, memory=False))
    assert got.length == Fixed(k=6)
    got.validate()


def test_a_lookup_setting_keeps_the_runs_sizes_and_drops_only_what_it_cannot_use():
    base = DraftConfig(drafter=Model(path="/models/draft.gguf", chain=Lookup(name="suffix", ngram_max=5)),
                       length=CostAware(k_min=2, k_max=12))
    cost_aware = Setting("ngram", None).draft_config(base)
    # a chain puts a lookup in front of a model: none here; replayed without the suffix memory
    assert cost_aware.drafter == Lookup(name="ngram", ngram_max=5, memory=False)
    assert cost_aware.length == CostAware(k_min=2, k_max=12)
    cost_aware.validate()
    fixed = Setting("suffix", 3).draft_config(base)
    assert (fixed.flag, fixed.length, fixed.chain) == ("suffix", Fixed(k=3), "")
    fixed.validate()
