"""KV-cache rollback is exact: after a rejected block the target continues as if the rejected
tokens had never been evaluated."""

from __future__ import annotations

import numpy as np

from spectui.config import RunConfig

#: llama.cpp on this CPU gives bit-identical logits; the tolerance only leaves room for GPU
#: kernels whose reductions depend on the batch shape.
ATOL = 1e-3


def test_logits_after_rollback_match_fresh_evaluation(engine):
    t = engine.target
    _, prompt = engine.prepare_prompt(RunConfig(prompt="Name three rivers in Europe."))
    t.truncate(0)
    first = int(t.eval(prompt, all_logits=False)[-1].argmax())

    # a block whose drafts are nonsense: the target keeps `first` and one draft, rejects the rest
    drafts = [1234, 4321, 777, 99]
    base = t.n_past
    rows = np.array(t.eval([first, *drafts], all_logits=True))
    assert rows.shape == (5, t.n_vocab)
    t.truncate(base + 2)  # keep `first` and drafts[0]
    assert t.n_past == base + 2
    after_rollback = np.array(t.eval((555,), all_logits=False)[-1])

    # fresh: the same prefix evaluated without ever seeing the rejected tokens
    t.truncate(0)
    t.eval([*prompt, first, drafts[0]], all_logits=False)
    fresh = np.array(t.eval((555,), all_logits=False)[-1])

    diff = float(np.abs(after_rollback - fresh).max())
    assert diff <= ATOL, f"max |logit difference| after rollback = {diff}"
    assert int(after_rollback.argmax()) == int(fresh.argmax())


def test_block_rows_match_one_token_at_a_time(engine):
    """Row i of a block evaluation equals the logits after feeding tokens one by one."""
    t = engine.target
    _, prompt = engine.prepare_prompt(RunConfig(prompt="Count from one to ten."))
    block = [1, 2, 3, 4, 5, 6, 7, 8]
    block = t.tokenize(" one, two, three, four, five", special=False)[:8]
    t.truncate(0)
    t.eval(prompt, all_logits=False)
    batched = np.array(t.eval(block, all_logits=True))
    t.truncate(0)
    t.eval(prompt, all_logits=False)
    single = np.stack([np.array(t.eval((tok,), all_logits=False)[-1]) for tok in block])
    diff = float(np.abs(batched - single).max())
    assert diff <= ATOL, f"max |logit difference| batched vs single = {diff}"


def test_model_drafter_recovers_after_partial_rejection(engine):
    """The drafter's own cache is rolled back to the committed history before it drafts."""
    from spectui.config import SamplingConfig
    from spectui.engine.drafters.model import ModelDrafter

    d = ModelDrafter(engine.draft_model, SamplingConfig())
    _, prompt = engine.prepare_prompt(RunConfig(prompt="List the planets of the solar system."))
    d.reset(prompt)
    first = d.propose(prompt, 4).tokens
    # pretend the target accepted one draft and corrected the next
    history = [*prompt, first[0], 9999]
    again = d.propose(history, 3).tokens
    # reference: a fresh drafter that has only ever seen `history`
    d.reset(history[:-1])
    fresh = d.propose(history, 3).tokens
    assert again == fresh
    assert engine.draft_model.n_past == len(history) + 2
