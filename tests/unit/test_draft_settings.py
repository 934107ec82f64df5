"""One rule resolves the draft settings for every caller: the flags and the dashboard's picker."""

from __future__ import annotations

from spectui.cli import build_parser
from spectui.cli.run_flags import config_from_args
from spectui.drafting import DraftConfig, Fixed, Lookup, Model


def flags(*argv: str) -> DraftConfig:
    return config_from_args(build_parser().parse_args(["run", *argv])).draft


def test_a_model_free_drafter_without_a_fixed_k_is_cost_aware():
    assert flags().cost_aware and flags("--draft", "suffix").cost_aware
    assert flags("--k", "6").length == Fixed(k=6)
    assert DraftConfig(length=Fixed(k=6)).drafting_with(Lookup()).cost_aware


def test_a_draft_model_keeps_a_fixed_k_unless_the_cost_aware_one_is_asked_for():
    base = DraftConfig(length=Fixed(k=3))
    model = base.drafting_with(Model(path="draft.gguf"), fixed_k=3)
    assert (model.length, model.drafter) == (Fixed(k=3), Model(path="draft.gguf"))
    asked = base.drafting_with(Model(path="draft.gguf"), cost_aware=True)
    assert asked.cost_aware
    # the picker keeps a model's cost-aware choice when it switches to another draft model
    assert asked.drafting_with(Model(path="other.gguf"), fixed_k=asked.fixed_k).cost_aware


def test_the_flags_and_the_picker_resolve_alike():
    # the dashboard's picker choosing n-gram drafting gives what `spectui run` gives without --k
    picked = flags("--k", "6").drafting_with(Lookup())
    assert picked == flags() == DraftConfig()  # one default: the flags', the dashboard's, the tests'


def test_a_run_priced_by_the_built_in_prior_says_so():
    """The cost-aware K's first prices come from a CPU measurement of another model until this
    machine measured this model: the headless summary names the prior when the run used it."""
    from spectui.cli.run import format_summary
    from spectui.metrics.stats import summarize

    unseeded = config_from_args(build_parser().parse_args(["run", "--mode", "spec"]))
    assert unseeded.draft.cost_aware
    assert "built-in CPU prior" in format_summary(unseeded, summarize([]))
    assert "built-in CPU prior" not in format_summary(unseeded, summarize([]), seeded=True)
    fixed = config_from_args(build_parser().parse_args(["run", "--mode", "spec", "--k", "4"]))
    assert "built-in CPU prior" not in format_summary(fixed, summarize([]))
