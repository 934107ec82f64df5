"""Nothing past the end of generation is drafted: a proposal is cut at its first end-of-generation
token, in a run (``propose.through_end``) and in tune's replay of one."""

from __future__ import annotations

import numpy as np

from spectui.drafting import DraftConfig, Fixed, Lookup
from spectui.engine.loop.propose import through_end
from spectui.engine.protocol import SUPPORT_ONCE, Draft
from spectui.tune.replay import replay

EOG = 2


def test_a_proposal_is_cut_after_its_first_end_of_generation_token():
    probs = [np.full(4, 0.25) for _ in range(5)]
    cut = through_end(Draft([7, 8, EOG, 9, EOG], probs, 5, [0.9] * 5, match=3, support=SUPPORT_ONCE), {EOG})
    assert cut.tokens == [7, 8, EOG]
    assert cut.probs is not None and len(cut.probs) == 3 and cut.confidence == [0.9] * 3
    assert (cut.forwards, cut.match, cut.support) == (5, 3, SUPPORT_ONCE)
    whole = Draft([7, 8, EOG])
    assert through_end(whole, {EOG}) is whole  # ending on it, or without one: as it was
    assert through_end(Draft([7, 8, 9]), {EOG}).tokens == [7, 8, 9]


def test_the_replay_drafts_nothing_past_the_end_of_the_turn_it_copies():
    # the prompt's user turn ends (EOG) and the assistant's header follows; the output
    # restates the turn's last words and answers on: lookup proposes the turn's end and on
    prompt = [10, 11, 12, 13, 14, EOG, 20, 21, 22]
    output = [11, 12, 13, 14, 30, 31, 32, 33]
    blocks: list[list[int]] = []
    draft = DraftConfig(drafter=Lookup(memory=False), length=Fixed(k=6))
    replay(prompt, output, lambda n: 1.0, draft, on_block=lambda d, i, toks, got: blocks.append(toks), eog=frozenset({EOG}))
    assert blocks and all(EOG not in b[:-1] for b in blocks), blocks
    assert any(b[-1] == EOG for b in blocks)  # the end itself is still proposed
    uncut: list[list[int]] = []
    replay(prompt, output, lambda n: 1.0, draft, on_block=lambda d, i, toks, got: uncut.append(toks))
    assert any(EOG in b[:-1] for b in uncut)  # without the target's end tokens, as before
