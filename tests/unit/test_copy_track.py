"""The n-gram drafter follows the copy the output is making: after an edit it proposes the
copy's own continuation rather than a coincidental n-gram elsewhere, and an edit made once is
applied to the copy's later occurrences. Token ids stand for words; the drafter sees only ids."""

from __future__ import annotations

from spectui.engine.drafters.copy_track import DEPARTURE_REACH, EDIT_CONTEXT, CopyTrack
from spectui.engine.drafters.ngram import NgramDrafter
from spectui.engine.loop.pricing import draft_class
from spectui.engine.protocol import COPY_CLASS, SUPPORT_AGREED, SUPPORT_RESUMED, SUPPORT_SPLIT

#: a source text of distinct ids, long enough that copying it establishes a copy
SOURCE = list(range(100, 100 + 2 * EDIT_CONTEXT))


def _emit(drafter: NgramDrafter, history: list[int], tokens: list[int]) -> None:
    """Append ``tokens`` one at a time, the drafter proposing before each (as a run does)."""
    for tok in tokens:
        drafter.propose(history, 8)
        history.append(tok)


def test_an_edit_made_once_is_applied_where_the_copy_meets_its_source_again():
    # the source says "old" (7) twice; the output renames it to "new" (8) at the first
    old, new = 7, 8
    source = [*SOURCE, old, 50, 51, 52, *range(200, 210), old, 60, 61]
    history = [1, 2, *source, 3]  # an instruction, the text, the turn marker
    drafter = NgramDrafter(1, 4)
    drafter.reset(history)
    i = source.index(old)
    _emit(drafter, history, [*source[:i], new, *source[i + 1:i + 13]])
    # the copy now stands before "... 209 old 60 61": the proposal renames it as the output did
    proposal = drafter.propose(history, 4)
    assert proposal.tokens == [209, new, 60, 61]


def test_after_an_edit_the_copy_continues_where_a_later_coincidence_would_lead_elsewhere():
    # "50" occurs right after the edited word and again later in the text; after the edit
    # the n-gram index's latest "50" continues with 90, the copy with 51
    source = [*SOURCE, 7, 50, 51, 52, 53, 54, 55, 80, 81, 50, 90, 91]
    history = [*source, 3]
    drafter = NgramDrafter(1, 4)
    drafter.reset(history)
    i = source.index(7)
    _emit(drafter, history, [*source[:i], 8, 50])
    proposal = drafter.propose(history, 3)
    assert proposal.tokens == [51, 52, 53]
    assert proposal.support == SUPPORT_RESUMED and draft_class(proposal) == COPY_CLASS


def test_a_departure_from_a_short_copy_is_not_taken_for_an_edit():
    # a summary quotes three tokens, then paraphrases: nothing is learned from it
    history = [*SOURCE, 3]
    track = CopyTrack()
    track.proposed(0, len(history))
    quoted = SOURCE[:3]
    history += [*quoted, 999, SOURCE[4]]
    track.follow(history, len(SOURCE) + 1)
    assert track.edits == {}
    assert track.proposal(history, 2) == [SOURCE[5], SOURCE[6]] and track.agreed == 1  # it follows the copy on


def test_a_deletion_is_learned_and_rewritten():
    history = [*SOURCE, 7, 50, 51, 52, 3]
    track = CopyTrack()
    track.proposed(0, len(history))
    start = len(history)
    # the output copies the source and drops 7
    history += [*SOURCE, 50]
    track.follow(history, start)
    assert track.edits == {(7,): ()}
    assert track.rewrite(history, SOURCE.index(SOURCE[-1]), 3) == [SOURCE[-1], 50, 51]


def test_with_nothing_copied_the_drafter_proposes_as_before():
    history = [5, 6, 7, 5, 6]
    drafter = NgramDrafter(1, 4)
    drafter.reset([])
    proposal = drafter.propose(history, 3)
    assert proposal.tokens == [7, 5, 6]
    assert proposal.support != SUPPORT_RESUMED


def test_a_match_just_off_the_copy_is_priced_as_a_split_context_until_the_output_follows_it():
    # "40 41 42 43" occurs twice in the prompt, away from the text being copied: on its own
    # record a "40" is followed by 41 (agreed); right after the output leaves its copy for it,
    # that record was made in other text
    pattern = [40, 41, 42, 43]
    history = [1, *pattern, 2, *pattern, 4, *SOURCE, 3]
    fresh = NgramDrafter(1, 4)
    fresh.reset([*history, 40])
    alone = fresh.propose([*history, 40], 3)
    assert alone.tokens == [41, 42, 43] and alone.support == SUPPORT_AGREED

    drafter = NgramDrafter(1, 4)
    drafter.reset(history)
    _emit(drafter, history, [*SOURCE[:12], 40])  # copying, then off the copy
    proposal = drafter.propose(history, 3)
    assert proposal.tokens == [41, 42, 43] and proposal.support == SUPPORT_SPLIT
    # the output follows the new proposal: the split price holds DEPARTURE_REACH tokens from the
    # departure, then the match's own record prices it again
    for step in range(1, 3):
        history.append(pattern[step])
        again = drafter.propose(history, 2)
        assert again.support == (SUPPORT_SPLIT if step + 1 <= DEPARTURE_REACH else SUPPORT_AGREED), step
