"""The draft length that learns per position where copies end (``engine/loop/learned_length.py``):
the protocol, what it learns from blocks and from a proposal it held back, and a replay over
copies that it drafts longer blocks on as the copy holds."""

from __future__ import annotations

import random

from spectui.drafting import CostAware, DraftConfig
from spectui.engine.loop.learned_length import LearnedLength, SurvivalMemory, run_bucket
from spectui.engine.loop.length import LengthContext, LengthPolicy, Outcome
from spectui.engine.loop.length_choice import length_policy
from spectui.engine.protocol import Draft
from spectui.tune.ceiling import copy_ceiling, lookup_bound
from spectui.tune.replay import replay

CHEAP = (1.0, *(1.0 + 0.1 * (n - 1) for n in range(2, 18)))  # a block costs little more than a token


def test_it_is_a_draft_length_and_the_config_names_it():
    learner = length_policy(CostAware(k_max=8, rule="learned"))
    assert isinstance(learner, LearnedLength) and isinstance(learner, LengthPolicy)
    assert learner.sees_proposal and learner.k_max == 8
    assert not isinstance(length_policy(CostAware()), LearnedLength)  # the default prices by class


def test_blocks_kept_whole_raise_the_chances_of_a_long_run_and_misses_lower_them():
    learner = LearnedLength(seed=CHEAP)
    proposal = Draft(list(range(8)), match=3)
    before = learner.propose(LengthContext(proposal, 100))
    for _ in range(6):  # a copy that holds: every block kept whole
        k = learner.propose(LengthContext(proposal, 100))
        learner.observe(Outcome(k, k, k, emitted=list(range(k + 1))))
    assert learner._run >= 16 and run_bucket(learner._run) == 3
    held = learner.propose(LengthContext(proposal, 100))
    assert held > before
    for _ in range(8):  # then every block misses at once
        k = learner.propose(LengthContext(proposal, 100))
        if k:
            learner.observe(Outcome(k, k, 0, emitted=[99]))
        else:
            learner.observe(Outcome(0, 0, 0, emitted=[99]))
    assert learner.propose(LengthContext(proposal, 100)) < held
    decided = learner.learned().decisions
    assert decided is not None and decided.proposals >= 15 and decided.blocks > 0


def test_a_proposal_held_back_is_still_learned_from_the_token_emitted():
    learner = LearnedLength(seed=(1.0, *(1.0 * n for n in range(2, 18))))  # a block costs n tokens: nothing pays
    proposal = Draft([7, 8, 9], match=1)
    first = learner.survival(1, 0, 0)
    for _ in range(5):
        assert learner.propose(LengthContext(proposal, 100)) == 0
        learner.observe(Outcome(0, 0, 0, emitted=[7]))  # the target wrote what it proposed
    assert learner.survival(1, 5, 0) > first


def test_positions_past_a_short_block_are_learned_from_the_tokens_that_follow_it():
    """A block of 1 kept whole, then the next tokens the target emits: the proposal's later
    positions are scored on them (a prudent K that starts short learns what would lengthen it),
    and a proposal followed to its miss scores the miss, not the positions after it."""
    learner = LearnedLength(seed=CHEAP)
    later = learner.survival(2, 0, 4)
    proposal = Draft([10, 11, 12, 13, 14, 15, 16, 17], match=2)
    for _ in range(6):
        learner._run = 0  # every proposal keyed as a fresh match
        learner.propose(LengthContext(proposal, 100))
        learner.observe(Outcome(1, 1, 1, emitted=[10, 11]))  # drafted 1: the bonus token matches position 1
        learner.observe(Outcome(0, 0, 0, emitted=[12]))  # and the AR steps after it go on copying
        learner.observe(Outcome(0, 0, 0, emitted=[13]))
        learner.observe(Outcome(0, 0, 0, emitted=[14]))
        learner.observe(Outcome(0, 0, 0, emitted=[15]))
        learner.observe(Outcome(0, 0, 0, emitted=[99]))  # position 6 missed: 7 never reached
    assert learner.survival(2, 0, 4) > later  # positions 4-7 (one group) learned with no block reaching them
    kept, reached = learner._by_key[(2, 0)].at(3)  # the group of positions 4-7
    assert (kept, reached) == (12.0, 18.0)  # 4 and 5 kept, 6 missed each time; 7 not counted
    assert not learner._shadows  # nothing is followed past its miss


def test_memory_carries_what_a_run_learned_into_the_next():
    memory = SurvivalMemory()
    first = LearnedLength(seed=CHEAP, memory=memory)
    cold = first.survival(3, 0, 0)
    for _ in range(10):
        first.propose(LengthContext(Draft([1, 2, 3, 4], match=3), 100))
        first.observe(Outcome(4, 4, 0, emitted=[5]))  # misses at once, every time
    first.learned()
    second = LearnedLength(seed=CHEAP, memory=memory)
    assert second.survival(3, 0, 0) < cold


def test_replayed_over_copies_it_drafts_and_stays_under_the_lookup_bound():
    rng = random.Random(5)
    prompt = [rng.randrange(50) for _ in range(120)]
    output = []
    while len(output) < 120:  # long copies of the prompt with an edit between them
        start = rng.randrange(len(prompt) - 30)
        output += prompt[start:start + rng.randrange(12, 30)] + [rng.randrange(50, 60)]
    cost = lambda n: CHEAP[n - 1] if n <= len(CHEAP) else 1.0 + 0.1 * (n - 1)  # noqa: E731
    draft = DraftConfig(length=CostAware(rule="learned"))
    learned = replay(prompt, output, cost, draft, seed=CHEAP)
    assert learned.drafted > 0 and learned.speedup > 1.5
    assert learned.speedup <= copy_ceiling(prompt, output, cost) + 1e-9
    assert lookup_bound(prompt, output, cost) <= copy_ceiling(prompt, output, cost) + 1e-9
