"""Greedy speculative decoding is token-identical to AR on the real model.

Rejections must really happen: the n-gram drafter guesses wrong on prose, and the model
drafter samples at temperature 1.0, so both sides of every verification branch run.
On this CPU, llama.cpp's logits for a block of K tokens are bit-identical to one-at-a-time
evaluation (measured), so a divergence is a bug; where one happens the failure message
gives the position and the target's top-2 logit margin there.
"""

from __future__ import annotations

import numpy as np
import pytest

from spectui.config import DraftConfig, RunConfig, SamplingConfig
from spectui.recording.schema import Step, TokenOrigin
from tests.prompts import ALL

MAX_TOKENS = 48
K_VALUES = (1, 2, 4, 8)


def generate(engine, prompt: str, **overrides) -> tuple[list[int], list[Step]]:
    config = RunConfig(target=engine.target.model.info.path, prompt=prompt, max_tokens=MAX_TOKENS, **overrides)
    steps = [ev for ev in engine.run(config) if isinstance(ev, Step)]
    return [t for s in steps for t in s.tokens], steps


@pytest.fixture(scope="module")
def ar_outputs(engine):
    return {p: generate(engine, p, mode="ar")[0] for p in ALL}


def logit_margin(engine, prompt: str, tokens: list[int], index: int) -> str:
    """The target's top-2 margin at ``index`` on a fresh one-token-at-a-time evaluation."""
    config = RunConfig(prompt=prompt)
    _, prompt_tokens = engine.prepare_prompt(config)
    t = engine.target
    t.truncate(0)
    row = None
    for tok in [*prompt_tokens, *tokens[:index]]:
        row = np.array(t.eval((tok,), all_logits=False)[-1])
    top2 = np.sort(row)[-2:]
    return f"top-2 logit margin {top2[1] - top2[0]:.6f} at index {index}"


def first_divergence(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


DRAFTERS = {
    "ngram": lambda path: DraftConfig(source="ngram"),
    "model-t1": lambda path: DraftConfig(source=path, temperature=1.0),
}


@pytest.mark.parametrize("drafter", list(DRAFTERS))
@pytest.mark.parametrize("k", K_VALUES)
def test_greedy_speculative_equals_ar(engine, ar_outputs, drafter, k):
    path = engine.target.model.info.path
    rejections = 0
    accepted = 0
    for prompt, ar in ar_outputs.items():
        draft = DRAFTERS[drafter](path)
        draft = DraftConfig(**{**{f: getattr(draft, f) for f in draft.__struct_fields__}, "k": k})
        spec, steps = generate(engine, prompt, mode="spec", draft=draft, sampling=SamplingConfig(seed=k))
        i = first_divergence(ar, spec)
        if i is not None:
            pytest.fail(
                f"{drafter} K={k} diverged from AR on {prompt[:40]!r}: index {i}, AR {ar[i:i+3]} vs spec "
                f"{spec[i:i+3]}; {logit_margin(engine, prompt, ar, i)}"
            )
        rejections += sum(1 for s in steps if s.accepted < s.drafted)
        accepted += sum(s.accepted for s in steps)
        assert all(s.drafted <= k for s in steps)
    assert rejections > 0, f"{drafter} K={k}: no draft was ever rejected, the test proves nothing"
    assert accepted > 0, f"{drafter} K={k}: no draft was ever accepted"


def test_token_origins_are_consistent(engine, ar_outputs):
    """Every step emits `accepted` DRAFT tokens then one CORRECTION / BONUS / AR token."""
    prompt = next(iter(ar_outputs))
    _, steps = generate(engine, prompt, mode="spec", draft=DraftConfig(source="ngram", k=4))
    for s in steps[1:]:
        if s.drafted == 0:
            assert s.origins == [TokenOrigin.AR]
            continue
        expect = [TokenOrigin.DRAFT] * s.accepted
        expect.append(TokenOrigin.BONUS if s.accepted == s.drafted else TokenOrigin.CORRECTION)
        assert s.origins == expect[: len(s.origins)]
        assert len(s.tokens) == len(s.origins) == len(s.pieces) == len(s.t_us)


def test_adaptive_k_stays_bounded_and_exact(engine, ar_outputs):
    path = engine.target.model.info.path
    for prompt, ar in list(ar_outputs.items())[:3]:
        draft = DraftConfig(source=path, temperature=1.0, k=3, adaptive=True, k_min=1, k_max=6)
        spec, steps = generate(engine, prompt, mode="spec", draft=draft)
        assert spec == ar
        ks = {s.k for s in steps[1:] if s.k}
        assert ks <= set(range(1, 7))
    assert len(ks) > 1, "adaptive K never changed"
