"""Speculative sampling on the real model produces the target's own distribution.

1. Next-token chi-square: from one fixed context, repeat a speculative block many times with
   a model drafter that samples from a different distribution (temperature 2.0 against the
   target's 1.0); the first emitted token must follow the target's warped distribution.
2. Whole runs through the decode loop: for every token emitted under sampling, the randomized
   probability integral transform under the target's distribution at that position (from a
   fresh teacher-forced evaluation) must be Uniform(0, 1). A wrong acceptance rule shows up
   as a non-uniform PIT; the Kolmogorov-Smirnov test checks it.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from spectui.config import RunConfig, SamplingConfig
from spectui.drafting import DraftConfig, Fixed, Lookup, Model
from spectui.engine.drafters.model import ModelDrafter
from spectui.engine.loop.sampling import draw, verify_sampled, warp
from spectui.recording.schema import Step
from tests.backends.prefix_memo import PrefixMemo

ALPHA = 1e-3
TARGET = SamplingConfig(temperature=1.0, top_k=8, seed=3)


@pytest.fixture(scope="module")
def memos() -> dict:
    """Remembered blocks per backend, shared by the chi-square tests: with and without p-min
    they evaluate mostly the same blocks from the same context."""
    return {}


@pytest.mark.parametrize("p_min", [0.0, 0.3], ids=["no-p-min", "p-min-0.3"])
def test_next_token_distribution_with_model_draft(any_engine, p_min, memos):
    """Chi-square of the first emitted token against the target's warped distribution, with
    a model draft at temperature 2 (a different distribution), on llama.cpp and on MLX; with
    draft confidence on, some drafts stop early (before their first token: an AR step)."""
    top_k, n = 4, 2000  # evaluations are memoized by prefix: n costs little
    t = PrefixMemo(any_engine.target, memo=memos.setdefault(("target", id(any_engine)), {}))
    d = PrefixMemo(any_engine.draft_model, memo=memos.setdefault(("draft", id(any_engine)), {}))
    prompt = t.tokenize("Pick a colour:")
    drafter = ModelDrafter(d, SamplingConfig(temperature=2.0, top_k=top_k, seed=11), p_min=p_min)
    rng = np.random.Generator(np.random.PCG64(5))
    p_first = warp(np.array(t.eval(prompt, all_logits=False)[-1]), 1.0, top_k=top_k)
    pending = int(np.argmax(p_first))
    history = [*prompt, pending]
    drafter.reset(prompt)
    base = t.n_past
    # the target distribution after `history`
    p = warp(np.array(t.eval((pending,), all_logits=False)[-1]), 1.0, top_k=top_k)
    t.truncate(base)

    firsts = np.empty(n, dtype=np.int64)
    accepted_any = rejected_any = False
    cut = 0  # drafts p-min stopped before their second token
    for i in range(n):
        draft = drafter.propose(history, 2)
        if not draft.tokens:  # not confident enough to draft anything: an AR step
            firsts[i] = draw(p, rng.random())
            cut += 1
            continue
        cut += len(draft.tokens) < 2
        logits = t.eval([pending, *draft.tokens], all_logits=True)
        acc, nxt = verify_sampled(draft.tokens, lambda j: warp(logits[j], 1.0, top_k=top_k), draft.probs, rng)  # noqa: B023 - called here
        t.truncate(base)
        firsts[i] = draft.tokens[0] if acc > 0 else nxt
        accepted_any |= acc > 0
        rejected_any |= acc < len(draft.tokens)
    # every path taken: acceptance, rejection, and with p-min drafts cut short
    assert accepted_any and rejected_any and (cut > 0) == (p_min > 0)

    support = np.flatnonzero(p)
    counts = np.array([(firsts == tok).sum() for tok in support])
    assert counts.sum() == n, "a token outside the target's top-k was emitted"
    pvalue = stats.chisquare(counts, p[support] * n).pvalue
    print(f"chi-square p={pvalue:.3f}; counts {counts.tolist()} vs expected {(p[support] * n).round(1).tolist()}; "
          f"evaluated {t.evaluated} target and {d.evaluated} draft tokens for {n} blocks")
    assert pvalue > ALPHA, f"chi-square p-value {pvalue:.2e}; counts {counts.tolist()} vs expected {(p[support] * n).round(1).tolist()}"


def pit_values(engine, config: RunConfig, rng: np.random.Generator) -> list[float]:
    """Randomized PIT of each emitted token (after the first) under the target's warped distribution."""
    _, prompt = engine.prepare_prompt(config)
    tokens = [tok for ev in engine.run(config) if isinstance(ev, Step) for tok in ev.tokens]
    t = engine.target
    t.truncate(0)
    t.eval(prompt, all_logits=False)
    rows = np.array(t.eval(tokens[:-1], all_logits=True))  # row i predicts tokens[i + 1]
    out = []
    s = config.sampling
    for i, tok in enumerate(tokens[1:]):
        p = warp(rows[i], s.temperature, s.top_k, s.top_p)
        below = p[:tok].sum()
        out.append(float(below + rng.random() * p[tok]))
    return out


@pytest.mark.parametrize(
    "draft",
    [
        pytest.param(lambda path: DraftConfig(drafter=Model(path=path, temperature=2.0), length=Fixed(k=3)), id="model-draft-t2"),
        pytest.param(lambda path: DraftConfig(drafter=Model(path=path, p_min=0.3, temperature=2.0), length=Fixed(k=3)), id="model-draft-t2-pmin"),
        pytest.param(lambda path: DraftConfig(length=Fixed(k=3)), id="ngram"),
        pytest.param(lambda path: DraftConfig(drafter=Lookup(name="suffix"), length=Fixed(k=3)), id="suffix"),
        # a chain: lookup blocks (deterministic drafts) where the text matches, model blocks
        # (drawn from the draft at t=2) elsewhere, in one run, chosen step by step
        pytest.param(lambda path: DraftConfig(drafter=Model(path=path, temperature=2.0, chain=Lookup(name="ngram")), length=Fixed(k=3)), id="chain"),
    ],
)
def test_decode_loop_samples_from_target_distribution(engine, draft):
    path = engine.target.model.info.path
    rng = np.random.Generator(np.random.PCG64(17))
    pits: list[float] = []
    prompts = ["Tell me about the ocean.", "Repeat after me: red green blue red green blue red green", "Write a poem about autumn."]
    for seed in range(6):
        for prompt in prompts:
            config = RunConfig(
                target=path,
                mode="spec",
                prompt=prompt,
                max_tokens=40,
                sampling=SamplingConfig(temperature=1.0, top_k=20, top_p=0.95, seed=seed),
                draft=draft(path),
            )
            pits.extend(pit_values(engine, config, rng))
    assert len(pits) > 300
    pvalue = stats.kstest(pits, "uniform").pvalue
    assert pvalue > ALPHA, f"PIT not uniform: KS p-value {pvalue:.2e} over {len(pits)} tokens"
