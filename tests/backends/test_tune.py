"""What ``spectui tune`` predicts from is exact and real: the replay of a model-free drafter
(prompt lookup, the suffix drafter; fixed or cost-aware K) over a greedy output gives the very
blocks a real speculative run verifies, the draft model's confidence run yields its blocks,
and the weight probe measures a real requantized copy."""

from __future__ import annotations

import math
import os

import pytest

from spectui.config import RunConfig
from spectui.drafting import CostAware, DraftConfig, Fixed, Lookup, Model, Pricing
from spectui.engine.host.verify_cost import measure_curve
from spectui.engine.host.weights import probe_weights
from spectui.models.gguf import read_gguf
from spectui.prompts import find_prompt
from spectui.recording.schema import Step
from spectui.tune import runner
from spectui.tune.plan import plan_tier
from spectui.tune.replay import replay

#: under 256 tokens of context: block and one-token logits are bit-identical (test_exactness)
MAX_TOKENS = 96
PROMPTS = ("copy-quote-paragraph", "load-typo-fix", "short-greeting")


def config(engine, name: str, mode: str, draft: DraftConfig | None = None) -> RunConfig:
    spec = find_prompt(name)
    return RunConfig(target=engine.target.model.info.path, mode=mode, prompt=spec.text, prompt_name=name,
                     prompt_tier=spec.tier, max_tokens=MAX_TOKENS, draft=draft or DraftConfig())


#: a cost-aware K that prices blocks by this seed alone (``learn_cost`` off), so a run's K
#: choices do not depend on the machine's timings and the replay can follow them exactly
SEED = (1.0, 1.8, 2.5, 2.7, 3.5, 4.0, 4.2, 4.4, 5.0, 5.3, 5.8, 6.2, 6.8, 7.4, 7.9, 8.6, 9.2)
DRAFTS = {
    "ngram K=2": DraftConfig(length=Fixed(k=2)),
    "ngram K=5": DraftConfig(length=Fixed(k=5)),
    "suffix K=5": DraftConfig(drafter=Lookup(name="suffix", memory=False), length=Fixed(k=5)),
    "ngram cost-aware": DraftConfig(length=CostAware(learn=False)),
    "suffix cost-aware": DraftConfig(drafter=Lookup(name="suffix", memory=False), length=CostAware(learn=False)),
}


@pytest.mark.parametrize("label", DRAFTS)
def test_replay_gives_the_blocks_a_real_run_verifies(engine, label):
    draft = DRAFTS[label]
    for name in PROMPTS:
        data = runner.collect_outputs(engine, [config(engine, name, "ar")], lambda _m: None)[0]
        steps = [e for e in engine.run(config(engine, name, "spec", draft), memory_interval_s=None, pricing=Pricing(seed=SEED))
                 if type(e) is Step][1:]
        real = [(s.drafted, s.accepted) for s in steps if s.drafted]
        replayed: list[tuple[int, int]] = []
        replay(data.prompt, data.output, lambda n: 1.0, draft, MAX_TOKENS,
               on_block=lambda _d, _i, tokens, kept, into=replayed: into.append((len(tokens), kept)), eog=engine.target.eog_tokens,
               seed=SEED)
        # the same blocks, each with as much kept: neither drafts past the end of generation
        assert replayed == real, name
        assert [t for s in steps for t in s.tokens] == data.output[1:]


def test_model_blocks_and_the_plan_they_give(engine):
    path = engine.target.model.info.path
    configs = [config(engine, "load-typo-fix", "ar", DraftConfig(drafter=Model(path=path), length=Fixed()))]
    data = runner.collect_model_blocks(engine, configs, 4, lambda _m: None)
    blocks = data[0].blocks
    assert blocks and all(len(conf) == drafted and drafted <= 4 for conf, drafted, _ in blocks)
    # the model drafting for itself: every block accepted, every confidence a probability
    assert all(accepted == drafted for _, drafted, accepted in blocks)
    assert all(0.0 < c <= 1.0 for conf, _, _ in blocks for c in conf)
    curve = measure_curve(engine.target, data[0].prompt, depth=len(data[0].prompt), rounds=1)
    plan = plan_tier("copy", data, curve.cost, DraftConfig(drafter=Model(path=path), length=Fixed()), curve.relative, draft_cost=1.0)
    # a draft as dear as the target cannot pay: at best K + 1 tokens for K + cost(K + 1) units
    assert plan.best.drafter == "ar" and plan.best_speedup == 1.0 and "does not pay" in plan.verdict
    cheap = plan_tier("copy", data, curve.cost, DraftConfig(drafter=Model(path=path), length=Fixed()), curve.relative, draft_cost=0.01)
    assert cheap.best.drafter == "model" and cheap.best_speedup > 1.0
    assert cheap.acceptance == 1.0 and all(a == 1.0 for a in cheap.per_position)


def test_weight_probe_measures_a_requantized_copy():
    rows = probe_weights(RunConfig().backend, find_prompt("medium-reasoning").text, types=("Q4_0",))
    (row,) = rows
    assert read_gguf(row.path).quant == "Q4_0" and row.size_bytes > 0
    assert len(row.curve.relative) == 16 and row.curve.relative[0] == 1.0
    assert all(math.isfinite(c) and c > 0.5 for c in row.curve.relative)
    assert row.curve.cost(16) > row.curve.cost(2)  # sixteen rows never cost what two do


def test_weight_probe_of_the_users_own_target_says_which_model_it_measured(tmp_path, monkeypatch):
    """``--probe-target``: the copies are made from the given model, not the embedded one,
    and each row names the model it was made from."""
    from spectui.engine.host.quantize import cached_copy
    from spectui.models.artifacts import file_sha256
    from spectui.models.registry import embedded_model_path

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    target = str(cached_copy(embedded_model_path(), "Q8_0"))  # "your model": another file than the probe
    (row,) = probe_weights(RunConfig().backend, find_prompt("short-greeting").text, types=("Q4_0",), source=target)
    assert row.source == target
    assert read_gguf(row.path).quant == "Q4_0"
    assert os.path.basename(os.path.dirname(row.path)) == file_sha256(target)[:16]  # made from the target's bytes
    (own,) = probe_weights(RunConfig().backend, find_prompt("short-greeting").text, types=("Q4_0",))
    assert own.source == embedded_model_path() and own.path != row.path
