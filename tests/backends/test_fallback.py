"""The runtime fallback policy on the real model: it steps down in the documented order, probes
back up with a growing interval, survives a failing drafter or verifier, and never changes
the output: greedy speculative output with the policy moving is still the target's own.

Acceptance is forced low the honest way: the draft model (the same weights) drafts at
temperature 4, so its guesses are mostly noise and the target rejects them.
"""

from __future__ import annotations

import re

import msgspec
import pytest

from spectui.config import PolicyConfig, RunConfig
from spectui.drafting import CostAware, DraftConfig, Fixed, Model
from spectui.engine.drafters.model import ModelDrafter, draft_sampling
from spectui.engine.drafters.ngram import NgramDrafter
from spectui.engine.loop.decode import decode
from spectui.engine.loop.draft_length import DraftLength
from spectui.engine.loop.policy import FallbackPolicy, ladder
from spectui.engine.loop.sampling import Sampler
from spectui.recording.reader import read_recording
from spectui.recording.schema import End, PolicyChange, Step
from spectui.recording.writer import RecordingWriter

PROMPT = "Write a short poem about a lighthouse keeper and the sea."
COPY_PROMPT = (
    "Repeat this list exactly, one item per line: apples, pears, plums, apples, pears, plums, "
    "apples, pears, plums, apples, pears, plums."
)
MAX_TOKENS = 96


def config_for(model_path: str, prompt: str = PROMPT, **policy) -> RunConfig:
    return RunConfig(
        target=model_path,
        prompt=prompt,
        max_tokens=MAX_TOKENS,
        draft=DraftConfig(drafter=Model(path=model_path, temperature=4.0), length=Fixed(k=4)),
        policy=PolicyConfig(enabled=True, **policy),
    )


def tokens_of(events) -> list[int]:
    return [t for e in events if type(e) is Step for t in e.tokens]


@pytest.fixture(scope="module")
def ar_tokens(engine, model_path):
    def run(prompt: str) -> list[int]:
        return tokens_of(engine.run(RunConfig(target=model_path, prompt=prompt, max_tokens=MAX_TOKENS, mode="ar")))

    return {p: run(p) for p in (PROMPT, COPY_PROMPT)}


def test_ladder_order():
    model = RunConfig(prompt="x", draft=DraftConfig(drafter=Model(path="draft.gguf"), length=Fixed(k=4)))
    assert [r.label for r in ladder(model)] == ["model K=4", "model K=3", "ngram K=3", "AR"]
    ngram = RunConfig(prompt="x", draft=DraftConfig(length=Fixed(k=8)))
    assert [r.label for r in ladder(ngram)] == ["ngram K=8", "ngram K=6", "AR"]
    assert [r.label for r in ladder(RunConfig(prompt="x", draft=DraftConfig(length=Fixed(k=1))))] == ["ngram K=1", "AR"]
    # the cost-aware K is capped by its own k_max at the top rung, never by the configured K
    adaptive = RunConfig(prompt="x", draft=DraftConfig(length=CostAware(k_max=16)))
    assert [r.label for r in ladder(adaptive)] == ["ngram K=16", "ngram K=12", "AR"]


def test_steps_down_in_order_and_output_stays_ar(engine, model_path, ar_tokens, tmp_path):
    config = config_for(model_path, window_blocks=2, low_windows=2, acceptance_floor=0.6, probe_after_steps=100_000)
    path = tmp_path / "fallback.spectui"
    with RecordingWriter(path) as writer:
        for ev in engine.run(config):
            writer.write(ev)
    rec = read_recording(path)  # the transitions are in the recording, in order, with reasons
    changes = [e for e in rec.events if type(e) is PolicyChange]
    assert [(c.before, c.after) for c in changes] == [
        ("model K=4", "model K=3"),
        ("model K=3", "ngram K=3"),
        ("ngram K=3", "AR"),
    ]
    for c in changes:
        assert re.fullmatch(r"acceptance \d\.\d\d < floor 0\.60 for 2 windows of 2 blocks", c.reason), c.reason
    times = [c.t_us for c in changes]
    assert times == sorted(times) and times[0] > 0
    # each step drafted what its rung said: K 4, then 3 (model, then n-gram), then nothing
    steps = [e for e in rec.events if type(e) in (Step, PolicyChange)]
    rung_k = 4
    for e in steps[1:]:  # the first token comes from the prefill
        if type(e) is PolicyChange:
            rung_k = 0 if e.after == "AR" else int(e.after.rsplit("=", 1)[1])
        else:
            assert e.k <= rung_k and (rung_k > 0 or e.drafted == 0)
    assert tokens_of(rec.events) == ar_tokens[PROMPT]
    assert type(rec.events[-1]) is End and rec.events[-1].reason in ("length", "stop")


def test_probes_back_up_with_backoff(engine, model_path, ar_tokens):
    base = 6
    config = config_for(model_path, window_blocks=2, low_windows=1, acceptance_floor=0.6, probe_after_steps=base)
    events = list(engine.run(config))
    changes = [e for e in events if type(e) is PolicyChange]
    probes = [c for c in changes if c.reason.startswith("probe after")]
    assert probes, [c.reason for c in changes]
    labels = [r.label for r in ladder(config)]
    for c in changes:  # every move is one rung, up on a probe, down otherwise
        delta = labels.index(c.after) - labels.index(c.before)
        assert delta == (-1 if c in probes else 1), c
    # a probe whose first window is low goes straight back down, and the next probe waits twice
    # as long (up to 16x); the step count is in each probe's reason
    waited = [int(re.search(r"after (\d+) steps", p.reason).group(1)) for p in probes]
    for i, p in enumerate(probes[:-1]):
        after = changes[changes.index(p) + 1]
        if after.reason.startswith("probe failed"):
            assert waited[i + 1] == min(waited[i] * 2, base * 16), (waited, [c.reason for c in changes])
    assert waited[0] == base
    assert tokens_of(events) == ar_tokens[PROMPT]


class _FailOnce:
    """A real backend or drafter whose ``method`` raises on its ``nth`` call that ``when`` picks:
    a fault injected into the real engine, not a stand-in for it."""

    def __init__(self, inner, method: str, nth: int, when=lambda *a, **kw: True) -> None:
        self._inner, self._method, self._nth, self._when, self._calls = inner, method, nth, when, 0

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if name != self._method:
            return attr

        def call(*args, **kwargs):
            if self._when(*args, **kwargs):
                self._calls += 1
                if self._calls == self._nth:
                    raise RuntimeError(f"injected {name} failure")
            return attr(*args, **kwargs)

        return call


def _decode(engine, config, target, drafters, prompt_tokens):
    policy = FallbackPolicy(config.policy, ladder(config), drafters)
    return list(
        decode(
            target,
            prompt_tokens,
            sampler=Sampler(config.sampling),
            max_tokens=config.max_tokens,
            draft_length=DraftLength(config.draft.length),
            policy=policy,
        )
    )


def test_verifier_error_falls_to_ar(engine, model_path, ar_tokens):
    config = RunConfig(
        target=model_path,
        prompt=COPY_PROMPT,
        max_tokens=MAX_TOKENS,
        draft=DraftConfig(length=Fixed(k=4)),
        policy=PolicyConfig(enabled=True, probe_after_steps=100_000),
    )
    _, prompt_tokens = engine.prepare_prompt(config)
    flaky = _FailOnce(engine.target, "eval", nth=3, when=lambda tokens, **kw: len(tokens) > 1)
    events = _decode(engine, config, flaky, {"ngram": NgramDrafter(1, 4)}, prompt_tokens)
    changes = [e for e in events if type(e) is PolicyChange]
    assert [(c.before, c.after) for c in changes] == [("ngram K=4", "AR")]
    assert changes[0].reason == "verifier error: RuntimeError: injected eval failure"
    after = events[events.index(changes[0]) + 1 :]
    assert all(e.drafted == 0 for e in after if type(e) is Step)
    assert tokens_of(events) == ar_tokens[COPY_PROMPT]


def test_drafter_error_moves_to_the_lighter_drafter(engine, model_path, ar_tokens):
    config = config_for(model_path, prompt=COPY_PROMPT, probe_after_steps=100_000)
    drafter = Model(path=model_path)
    config = msgspec.structs.replace(config, draft=DraftConfig(drafter=drafter, length=Fixed(k=4)))
    _, prompt_tokens = engine.prepare_prompt(config)
    model = _FailOnce(ModelDrafter(engine.draft_model, draft_sampling(config.sampling, drafter)), "propose", nth=2)
    events = _decode(engine, config, engine.target, {"model": model, "ngram": NgramDrafter(1, 4)}, prompt_tokens)
    changes = [e for e in events if type(e) is PolicyChange]
    assert [(c.before, c.after) for c in changes] == [("model K=4", "ngram K=3")]
    assert changes[0].reason == "drafter error: RuntimeError: injected propose failure"
    assert tokens_of(events) == ar_tokens[COPY_PROMPT]
