"""A drafter chain (n-gram or suffix lookup first, the draft model where no match pays) on the
real model: greedy output equals AR, both drafters really draft in one run, and the model is
priced with what its drafting costs (in a chain or alone), so a draft model as dear as its
target stops drafting.

The embedded model drafts for itself here (the only model shipped): a draft forward costs about
one target token, the case in which a chain must fall back to the lookup and AR. The Qwen pair
of benchmarks/real_pair.py measures chains where the model is cheaper (benchmarks/pair.py).
"""

from __future__ import annotations

import pytest

from spectui.config import RunConfig, SamplingConfig
from spectui.drafting import CostAware, DraftConfig, Fixed, Lookup, Model, Pricing
from spectui.engine.loop.draft_length import DraftLength
from spectui.recording.schema import Step
from tests.prompts import ALL

MAX_TOKENS = 64
COPY = ("Fix the typos and return the text unchanged otherwise: 'The quick brwon fox jumsp over the "
        "lazy dgo while the cat sleeps on the warm windowsill of the old house.'")


def run(engine, prompt: str, **overrides) -> list[Step]:
    config = RunConfig(target=engine.target.model.info.path, prompt=prompt, max_tokens=MAX_TOKENS, **overrides)
    return [ev for ev in engine.run(config) if isinstance(ev, Step)]


def tokens(steps: list[Step]) -> list[int]:
    return [t for s in steps for t in s.tokens]


@pytest.fixture(scope="module")
def ar_outputs(engine) -> dict[str, list[int]]:
    """Each prompt's greedy AR output, decoded once for the four chains below."""
    return {prompt: tokens(run(engine, prompt, mode="ar")) for prompt in (*ALL, COPY)}


@pytest.mark.parametrize("chain", ["ngram", "suffix"])
@pytest.mark.parametrize("plan", ["fixed-k3", "cost-aware"])
def test_chain_equals_ar(engine, ar_outputs, chain, plan):
    """A fixed K drafts from the lookup where it matches and from the model elsewhere: both
    really draft. The cost-aware K prices the model with its measured cost: here the model is
    the target itself (a draft forward costs one target token), which no block repays even at
    perfect acceptance, so the model stays silent and the lookup drafts alone."""
    path = engine.target.model.info.path
    lookup_blocks = model_blocks = 0
    for prompt, ar in ar_outputs.items():
        draft = DraftConfig(drafter=Model(path=path, temperature=1.0, chain=Lookup(name=chain, memory=False)), length=Fixed())
        draft = draft.drafting_with(Model(path=path), fixed_k=3 if plan == "fixed-k3" else None)
        assert draft.cost_aware == (plan == "cost-aware"), "a chain is cost-aware unless K is fixed"
        steps = run(engine, prompt, mode="spec", draft=draft, sampling=SamplingConfig(seed=3))
        assert tokens(steps) == ar, f"{chain} chain ({plan}) diverged from AR on {prompt[:40]!r}"
        lookup_blocks += sum(1 for s in steps if s.drafted and not s.draft_forwards)
        model_blocks += sum(1 for s in steps if s.drafted and s.draft_forwards)
    assert lookup_blocks > 0, plan
    if plan == "fixed-k3":
        assert model_blocks > 0
    else:
        assert model_blocks == 0, f"the model drafted {model_blocks} blocks at one target token per draft forward"


def test_a_draft_models_cost_aware_k_is_priced_with_its_drafting(engine, ar_outputs):
    """Alone too, a draft model's cost-aware K prices each drafted token: the engine measures
    what one costs when the run starts (the header records it), and a model as dear as its
    target drafts no block (it probes none either: a draft never wrong would not repay it
    here), so the run is AR at AR's speed instead of paying for drafts that cannot pay."""
    path = engine.target.model.info.path
    config = RunConfig(target=path, prompt=COPY, max_tokens=MAX_TOKENS, mode="spec",
                       draft=DraftConfig(drafter=Model(path=path), length=Fixed()).drafting_with(Model(path=path), cost_aware=True))
    events = list(engine.run(config))
    header = events[0]
    assert header.config.draft.cost_aware and 0.6 < header.pricing.draft_cost < 1.6, header.pricing
    steps = [ev for ev in events if isinstance(ev, Step)]
    assert tokens(steps) == ar_outputs[COPY]
    assert not any(s.drafted for s in steps), [s.k for s in steps]


def test_draft_cost_probe_on_self_draft(engine):
    """The chain's prior: the target drafting for itself costs about one target token per forward."""
    _, prompt = engine.prepare_prompt(RunConfig(prompt=COPY))
    assert 0.6 < engine.draft_cost_probe(prompt) < 1.6


def test_model_as_dear_as_its_target_is_not_repaid():
    """The chain's model K is priced with the measured draft cost: at 1.0 target tokens per draft
    forward no K pays at an acceptance of 0.9 on a CPU-like curve; at 0.05 long drafts do."""
    length = DraftLength(CostAware(k_min=1, k_max=8), Pricing(seed=(1.0, 1.6, 2.2, 2.8, 3.4, 4.0, 4.6, 5.2, 5.8)))
    for _ in range(4):
        length.update(0, 0, 0, verify_us=1000.0)  # AR steps time the unit
        length.update(4, 4, 4, verify_us=3400.0, match=0, draft_us=4000.0, forwards=4)  # 1.0 per forward
    assert length.draft_cost() == pytest.approx(1.0)
    assert length.acceptance(0) > 0.8
    assert length.model_k() == 0
    cheap = DraftLength(CostAware(k_min=1, k_max=8), Pricing(seed=(1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8)))
    for _ in range(4):
        cheap.update(0, 0, 0, verify_us=1000.0)
        cheap.update(4, 4, 4, verify_us=1400.0, match=0, draft_us=200.0, forwards=4)
    assert cheap.draft_cost() == pytest.approx(0.05)
    assert cheap.model_k() >= 4


def test_chain_needs_a_draft_model(model_path):
    from spectui.cli import build_parser
    from spectui.cli.run_flags import config_from_args
    from spectui.errors import SpectuiError

    with pytest.raises(SpectuiError, match="drafter chain"):
        config_from_args(build_parser().parse_args(["run", "--prompt", "hi", "--draft", "ngram", "--chain", "ngram"]))
    # a chain's kind is the registry's to know, asked before any model loads (``Engine.load``)
    from spectui.engine.drafters import check_options

    with pytest.raises(SpectuiError, match="no drafter is called 'model'"):
        check_options(DraftConfig(drafter=Model(path=model_path, chain=Lookup(name="model")), length=Fixed()))
