"""Each proposal priced on its own (``engine/loop/pricing.py``, ``DraftLength.k_for``): what a
drafter knows about a proposal, calibrated per class and position, decides whether it is
verified and how much of it; a run of losing blocks backs off to AR with bounded probes; the
calibration is kept between runs. No model: the engine-level test is
tests/backends/test_do_no_harm.py."""

from __future__ import annotations

import multiprocessing
import random

import msgspec
import pytest

from spectui.drafting import CostAware, Pricing
from spectui.engine.drafters.ngram import NgramDrafter
from spectui.engine.host.proposal_prices import load_prices, merge, save_prices
from spectui.engine.loop.draft_length import LOSING_RUN, MARGIN, PROBE_EVERY, PROBE_MAX_WAIT, DraftLength
from spectui.engine.loop.pricing import GROUPS, Calibration, best_prefix, cell
from spectui.engine.protocol import SUPPORT_AGREED, SUPPORT_ONCE, SUPPORT_SPLIT, Draft
from spectui.metrics.predict import seeded_cost

#: the embedded model (Q8_0) on this 2-core CPU, measured: a block of 4 is cheaper than one of 3
Q8_2_CORES = (1.00, 1.68, 2.30, 2.19, 2.80, 2.59, 3.31, 3.11, 3.72)
#: a K-quant whose rows are not batched (the Qwen2.5-Coder 1.5B here): every token costs 0.8 more
UNBATCHED = tuple(1 + 0.8 * (n - 1) for n in range(1, 18))


def length(seed=Q8_2_CORES, prices=None, k_max: int = 16) -> DraftLength:
    return DraftLength(CostAware(k_max=k_max, learn=False), Pricing(seed=seed), prices)


def calibrate(d: DraftLength, cls: int, rate: float, n: int = 60) -> None:
    """``n`` observations per position group of ``cls`` at ``rate`` (interleaved, deterministic)."""
    for i in range(n):
        hit = (i * rate) % 1.0 + rate >= 1.0  # a Bresenham spread: exactly rate on average
        for grp in range(GROUPS):
            d.calibration.observe(cls * GROUPS + grp, hit)


def proposal(cls_match: int, n: int = 16, support: int = SUPPORT_ONCE, start: int = 1000) -> Draft:
    return Draft(list(range(start, start + n)), match=cls_match, support=support)


def brute(chances, cost, k_min=1):  # noqa: ANN001
    best = (0, 1.0)
    for n in range(k_min, len(chances) + 1):
        expected, reach = 1.0, 1.0
        for q in chances[:n]:
            reach *= q
            expected += reach
        if expected / cost(n + 1) > best[1]:
            best = (n, expected / cost(n + 1))
    return best


def test_best_prefix_is_the_argmax_of_expected_tokens_per_cost():
    rng = random.Random(7)
    for seed in (Q8_2_CORES, UNBATCHED, ()):
        cost = seeded_cost(seed)
        for _ in range(200):
            chances = [rng.choice((0.05, 0.3, 0.6, 0.9, 0.99, 1.0)) for _ in range(rng.randint(1, 16))]
            k_min = rng.randint(1, 3)
            n, value, _ = best_prefix(chances, cost, k_min)
            want = brute(chances, cost, k_min)
            assert n == want[0] or value == pytest.approx(want[1]), (chances, k_min)


@pytest.mark.parametrize("seed", [Q8_2_CORES, UNBATCHED])
@pytest.mark.parametrize("rate", [0.0, 0.2, 0.4, 0.6])
def test_never_drafts_where_calibrated_acceptance_is_low_for_the_curve(seed, rate):
    """A class calibrated at ``rate`` everywhere drafts only where some prefix beats AR by the
    margin at that rate on this curve: never on either curve at these rates."""
    d = length(seed)
    calibrate(d, 3, rate)
    k = d.k_for(proposal(3))
    n, value = brute([d.calibration.rates(3)[0]] * 16, seeded_cost(seed))
    assert k == (n if value >= 1 + MARGIN else 0) == 0
    assert d.decided.low_confidence == 1 and d.decided.proposals == 1


def test_drafts_long_blocks_for_high_confidence_copies():
    d = length()
    calibrate(d, 6, 0.99)
    assert d.k_for(proposal(5, support=SUPPORT_AGREED)) >= 7  # 8 tokens cost 3.11 here: the curve's sweet spot
    e = length(UNBATCHED)
    calibrate(e, 6, 0.99)
    # even where every row costs 0.8 (a near-certain token is priced a little below certain,
    # so the fourth row, which repays 0.8 by less than the third, may be left out)
    assert e.k_for(proposal(5, support=SUPPORT_AGREED)) >= 3
    # a proposal shorter than k_max is verified whole when it pays
    assert d.k_for(proposal(5, n=5, support=SUPPORT_AGREED)) == 5


def test_a_block_that_pays_is_as_long_as_its_later_positions_are_worth():
    """Late positions are observed only where blocks reach them: on a few observations they
    are priced low and would cap every block at the measured positions. Whether to draft is
    priced as measured; how long, with no later position below an earlier one."""
    steep = tuple(1 + 0.5 * (n - 1) for n in range(1, 18))  # each row costs half a token
    d = length(steep, prices={"4.2": (1.0, 1.0), "4.3": (1.0, 1.0)})
    for _ in range(60):  # the first two positions measured near certain in this run
        d.calibration.observe(cell(4, 0), True)
        d.calibration.observe(cell(4, 1), True)
    measured = best_prefix(d.calibration.chances(4, 16), d.cost)[0]
    assert measured <= 3  # positions 2-3 seen once: priced near a coin
    k = d.k_for(proposal(4))
    assert k > measured + 2
    # a proposal that does not pay as measured is not drafted, however long it could be
    e = length(steep, prices={"4.0": (30.0, 100.0), "4.1": (95.0, 100.0)})
    assert e.k_for(proposal(4)) == 0


def test_the_tail_that_stops_paying_is_cut():
    d = length(UNBATCHED)
    cls = 4
    for _ in range(80):  # certain for the first 4 tokens, then a coin
        for grp in range(GROUPS):
            d.calibration.observe(cell(cls, 0) + grp, grp <= 2 or random.Random(grp).random() < 0.0)
    k = d.k_for(proposal(4))
    # positions 0-3 (groups 0, 1, 2) at most: the rest never pays for its row. Priced a little
    # below certain, the fourth row repays its 0.8 by a hair, so 3 and 4 are both right
    assert k in (3, 4)
    assert d.decided.tail_cut == 1 and d.decided.tokens_cut == 16 - k


def test_signals_separate_proposals_of_one_match_length():
    """Agreed earlier occurrences lift a proposal a class, a split one drops it: the same match
    length drafts or not by what its context did before."""
    d = length()
    for cls, rate in ((1, 0.15), (2, 0.55), (3, 0.75), (4, 0.9)):
        calibrate(d, cls, rate)
    assert d.k_for(proposal(3, support=SUPPORT_AGREED)) > 0
    assert d.k_for(proposal(3, support=SUPPORT_SPLIT)) == 0


def test_a_run_of_losing_blocks_backs_off_and_probes_a_bounded_share():
    """A drafter whose proposals look strong (its stored calibration says so) and are always
    wrong: after ``LOSING_RUN`` losing blocks it waits, probes with short blocks, and the wait
    doubles while probes fail, so over a long run it drafts a small, bounded share of steps."""
    stored = {f"6.{g}": (95.0, 100.0) for g in range(GROUPS)}
    d = length(prices=stored)
    drafted_at, tokens = [], 0
    wrong = proposal(5, support=SUPPORT_AGREED, start=50_000)
    for _ in range(600):
        k = d.k_for(wrong)
        if k:
            drafted_at.append(tokens)
        d.update(k, k, 0, emitted=[tokens % 97])  # the target's own token, never the draft's
        tokens += 1
    # its calibration learns too (held-back proposals are followed, and what the text did
    # moves the prior: ``text_odds``), so the first losing block may be its last
    assert d.decided.backoff + d.decided.low_confidence > 590
    assert len(drafted_at) <= LOSING_RUN + 5
    waits = [b - a for a, b in zip(drafted_at[LOSING_RUN:], drafted_at[LOSING_RUN + 1:])]
    assert all(w >= PROBE_EVERY for w in waits) and all(w2 >= w1 for w1, w2 in zip(waits, waits[1:]))


def test_probes_double_their_wait_and_a_followed_guess_ends_the_backoff():
    d = length()
    d._hold_until, d._tokens = 0, 0  # backing off, the wait over: the next block is a probe
    calibrate(d, 5, 0.97)
    waits = []
    for _ in range(6):
        d._hold_until = d._tokens
        k = d.k_for(proposal(5, start=70_000))
        assert 0 < k <= 2  # a probe is short
        d.update(k, k, 0, emitted=[1])
        waits.append(d._hold_until - d._tokens)
    assert waits == [min(PROBE_EVERY * 2 ** (i + 1), PROBE_MAX_WAIT) for i in range(6)]
    # the output follows a held-back proposal for a few tokens: the text is copyable again
    copy = list(range(200, 220))
    k = d.k_for(Draft(copy, match=5, support=SUPPORT_ONCE))
    assert k == 0 and d.decided.backoff >= 1
    d.update(0, 0, 0, emitted=copy[:1])
    for i in range(1, 5):
        d.k_for(Draft(copy[i:], match=5, support=SUPPORT_ONCE))
        d.update(0, 0, 0, emitted=copy[i:i + 1])
    assert d.k_for(Draft(copy[5:], match=5, support=SUPPORT_ONCE)) > 2  # not a probe: drafting again


def test_the_same_stored_numbers_give_the_same_blocks():
    """With verify costs from the seed alone (``--deterministic``), K is a function of the
    tokens and the stored calibration: two runs over one text choose the same K every step."""
    rng = random.Random(3)
    chunks = [[rng.randrange(1000) for _ in range(rng.randint(3, 12))] for _ in range(12)]
    text = [t for _ in range(40) for t in rng.choice(chunks)]  # phrases repeated in any order
    stored = {"3.0": (30.0, 40.0), "4.0": (9.0, 10.0)}

    def ks() -> list[int]:
        d, drafter = length(prices=stored), NgramDrafter()
        drafter.reset(text[:50])
        out, i = [], 50
        while i < len(text) - 17:
            p = drafter.propose(text[:i], 16)
            k = d.k_for(p) if p.tokens else 0
            got = 0
            while got < k and p.tokens[got] == text[i + got]:
                got += 1
            d.update(k, k, got, emitted=text[i:i + got + 1])
            out.append(k)
            i += got + 1
        return out

    first = ks()
    assert any(first) and first == ks()


def test_the_ngram_drafter_says_how_long_its_match_runs_and_how_its_context_went_on():
    d = NgramDrafter(1, 4)
    quote = list(range(10, 40))
    d.reset([1, 2, *quote, 3])
    p = d.propose([1, 2, *quote, 3, *quote[:20]], 8)  # a copy 20 tokens in: matched far past the 4-gram
    assert p.tokens == quote[20:28] and p.match == 5 and p.support == SUPPORT_ONCE
    agreed = [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3, 4]  # "1 2 3 4" went on with 5 twice
    d.reset(agreed)
    assert d.propose(agreed, 1).support == SUPPORT_AGREED
    split = [1, 2, 3, 4, 5, 1, 2, 3, 4, 6, 1, 2, 3, 4]  # ... with 5, then 6: split
    d.reset(split)
    p = d.propose(split, 1)
    assert p.tokens == [6] and p.support == SUPPORT_SPLIT


def test_calibration_starts_from_what_was_stored_and_counts_this_run():
    fresh = Calibration()
    stored = Calibration({"3.0": (95.0, 100.0), "bad": (1, 2), "3.9": (1.0, 1.0)})
    assert stored.rates(3)[0] == pytest.approx(0.95)
    assert stored.rates(3)[0] > fresh.rates(3)[0]
    for _ in range(40):  # the run's own evidence soon outweighs it (8 observations at most)
        stored.observe(cell(3, 0), False)
    assert stored.rates(3)[0] < 0.35
    assert stored.run_counts() == {"3.0": (0.0, 40.0)}


def test_what_this_text_did_moves_the_prior_of_classes_it_has_not_reached():
    """A run whose short matches keep hitting is copying more than the stored runs' texts did:
    a longer match it has not seen yet is priced up from the stored prior, and one whose short
    matches miss prices it down. A class's own evidence still counts as it is."""
    stored = {"2.0": (50.0, 100.0), "4.0": (60.0, 100.0)}
    copying, editing, unmoved = Calibration(stored), Calibration(stored), Calibration(stored)
    for _ in range(12):
        copying.observe(cell(2, 0), True)
        editing.observe(cell(2, 0), False)
    assert copying.text_odds() > 3.0 > 1.0 / 3.0 > editing.text_odds()
    assert unmoved.text_odds() == 1.0
    assert copying.prudent(4)[0] > unmoved.prudent(4)[0] + 0.1 > editing.prudent(4)[0] + 0.2
    # hits where the prior expected them say nothing of the text
    expected = Calibration({"5.0": (999.0, 1000.0)})
    for _ in range(12):
        expected.observe(cell(5, 0), True)
    assert expected.text_odds() == pytest.approx(1.0, abs=0.05)


def test_stored_prices_merge_decay_and_cap():
    merged = merge({"1.0": (10.0, 100.0)}, {"1.0": (50.0, 50.0), "2.0": (1.0, 2.0)})
    assert merged["1.0"] == (58.0, 130.0) and merged["2.0"] == (1.0, 2.0)
    capped = merge({}, {"1.0": (900.0, 1000.0)})
    assert capped["1.0"] == (360.0, 400.0)


def _save_many(args: tuple[str, int]) -> None:
    folder, n = args
    from pathlib import Path

    for _ in range(n):
        save_prices("m|ngram", {"1.0": (1.0, 1.0)}, cache=Path(folder))


def test_prices_are_kept_between_runs_and_concurrent_runs_both_count(tmp_path):
    assert load_prices("m|ngram", cache=tmp_path) == {}
    assert not save_prices("m|ngram", {}, cache=tmp_path)  # nothing observed: nothing written
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        pool.map(_save_many, [(str(tmp_path), 10), (str(tmp_path), 10)])
    from spectui.engine.host.proposal_prices import CACHE_NAME, ProposalPrices
    from spectui.models.json_cache import read_entry

    entry = read_entry(CACHE_NAME, "m|ngram", ProposalPrices, tmp_path)
    assert entry is not None and entry.runs == 20  # no run's evidence lost to the other
    assert load_prices("m|ngram", cache=tmp_path)["1.0"][0] > 0


def test_the_report_says_what_was_held_back_and_only_when_recorded():
    import dataclasses

    from spectui.recording.reader import read_recording
    from spectui.recording.schema import DraftDecisions, End
    from spectui.report import format_report
    from tests.conftest import REPO

    rec = read_recording(f"{REPO}/tests/data/fixed-session.spectui")
    assert "proposals held back" not in format_report(rec)  # an older recording: no line, no change
    decisions = DraftDecisions(proposals=40, blocks=12, low_confidence=25, backoff=3, probes=1, tail_cut=7, tokens_cut=30,
                               expected_tokens=33.5)
    events = [msgspec.structs.replace(e, decisions=decisions) if type(e) is End else e for e in rec.events]
    text = format_report(dataclasses.replace(rec, events=events))
    line = next(x for x in text.splitlines() if "proposals held back" in x)
    assert "28 of 40: 25 low confidence, 3 backoff (1 probe); 7 tails cut (30 tokens); blocks priced at 33.5 tokens" in line
