"""The suffix drafter and its memory on real data structures (no model): the index against a
brute-force count of substrings, what gets drafted, the memory's bound, its file."""

from __future__ import annotations

import random
import warnings
from collections import Counter
from collections.abc import Sequence

import msgspec
import pytest

from spectui.engine.drafters.suffix import SuffixDrafter, match_bucket
from spectui.engine.drafters.suffix_index import SuffixIndex
from spectui.engine.drafters.suffix_memory import (
    FORMAT,
    FORMAT_VERSION,
    DraftMemoryWarning,
    MemoryIndex,
    SuffixMemory,
    memory_path,
)

VOCAB = "0123abcdef" * 6  # a vocabulary-hash-shaped name


# -- brute force ----------------------------------------------------------------------


def occurrences(seqs: Sequence[Sequence[int]], ctx: Sequence[int]) -> int:
    n = len(ctx)
    return sum(1 for s in seqs for i in range(len(s) - n + 1) if list(s[i:i + n]) == list(ctx))


def followers(seqs: Sequence[Sequence[int]], ctx: Sequence[int]) -> Counter:
    n = len(ctx)
    return Counter(s[i + n] for s in seqs for i in range(len(s) - n) if list(s[i:i + n]) == list(ctx))


def favourite(seqs: Sequence[Sequence[int]], ctx: Sequence[int]) -> tuple[int, int, int]:
    """``SuffixIndex.choices`` by search: the most frequent follower (ties: the one that
    occurred last), its count, and the total."""
    follow = followers(seqs, ctx)
    if not follow:
        return -1, 0, 0
    n, last = len(ctx), {}
    for s in seqs:  # in the order they went in: later ones are more recent
        for i in range(len(s) - n):
            if list(s[i:i + n]) == list(ctx):
                last[s[i + n]] = (id(s), i)
    order = {id(s): j for j, s in enumerate(seqs)}
    top = max(follow.values())
    tok = max((t for t, c in follow.items() if c == top), key=lambda t: (order[last[t][0]], last[t][1]))
    return tok, top, sum(follow.values())


def longest_match(seqs: Sequence[Sequence[int]], history: Sequence[int], depth: int) -> int:
    """The longest suffix of ``history`` (at most ``depth``) that something followed in ``seqs``."""
    for n in range(min(depth, len(history)), 0, -1):
        if followers(seqs, history[-n:]):
            return n
    return 0


def locate(index: SuffixIndex, ctx: Sequence[int]) -> tuple[int, int]:
    v, n = 0, 0
    for t in ctx:
        v, n = index.advance(v, n, t)
    return v, n


def markov(rng: random.Random, n: int, alphabet: int, stick: float = 0.7) -> list[int]:
    """Text with repeats: mostly the successor of the previous token, sometimes a jump."""
    out = [rng.randrange(alphabet)]
    while len(out) < n:
        out.append((out[-1] * 7 + 3) % alphabet if rng.random() < stick else rng.randrange(alphabet))
    return out


def simulate(drafter: SuffixDrafter, prompt: list[int], output: list[int], k: int = 8) -> int:
    """Greedy decoding of a "model" that always answers ``output``: accepted draft tokens."""
    drafter.reset(prompt)
    history = prompt + output[:1]
    accepted = 0
    while len(history) < len(prompt) + len(output):
        done = len(history) - len(prompt)
        draft = drafter.propose(history, k).tokens
        truth = output[done:done + len(draft)]
        a = 0
        while a < len(draft) and a < len(truth) and draft[a] == truth[a]:
            a += 1
        accepted += a
        history = prompt + output[:done + a + 1]  # the accepted tokens and one from the model
    return accepted


# -- the index ------------------------------------------------------------------------


@pytest.mark.parametrize("alphabet,depth", [(2, 3), (3, 5), (6, 4), (50, 6)])
def test_index_counts_equal_brute_force(alphabet, depth):
    rng = random.Random(alphabet * 100 + depth)
    index = SuffixIndex(depth)
    closed: list[list[int]] = []
    for _ in range(4):
        seq: list[int] = []
        for _ in range(rng.randrange(20, 90)):
            t = rng.randrange(alphabet)
            seq.append(t)
            index.append(t)
            # the "active nodes": one state per distinct count among the suffixes, never more
            # than max_depth + 2 of them, each counting how often its suffix occurred
            active = index.active()
            assert len(active) <= depth + 2
            every = [*closed, seq]
            for v, n in active:
                assert index.count(v) == occurrences(every, seq[len(seq) - n:])
            # every context up to max_depth: found, counted, its continuations counted
            for n in range(1, min(depth, len(seq)) + 1):
                ctx = seq[-n:]
                v, m = locate(index, ctx)
                assert m == n
                assert index.count(v) == occurrences(every, ctx)
                assert index.continuations(v) == followers(every, ctx)
                assert index.choices(v) == favourite(every, ctx)
        index.end_sequence()
        closed.append(seq)
    # contexts that never occurred are not found at their full length
    v, m = locate(index, [alphabet + 1])
    assert (v, m) == (0, 0)


def test_removal_equals_brute_force():
    rng = random.Random(7)
    index = MemoryIndex(4)
    seqs = [markov(rng, rng.randrange(10, 60), 5) for _ in range(8)]
    for s in seqs:
        index.extend(s)
        index.end_sequence()
    for gone in (seqs[0], seqs[3]):
        index.remove(gone)
    kept = [s for i, s in enumerate(seqs) if i not in (0, 3)]
    for _ in range(300):
        ctx = [rng.randrange(5) for _ in range(rng.randrange(1, 5))]
        v, m = locate(index, ctx)
        if occurrences(kept, ctx):
            assert m == len(ctx) and index.count(v) == occurrences(kept, ctx)
            assert index.continuations(v) == followers(kept, ctx)
            assert index.choices(v) == favourite(kept, ctx)
        else:
            assert m < len(ctx)  # dead states read as absent


def test_a_bulk_built_index_then_kept_current_equals_brute_force():
    """A memory loads in bulk (each context's favourite found when first asked), then takes
    new answers one token at a time and loses old ones."""
    rng = random.Random(12)
    seqs = [markov(rng, rng.randrange(10, 60), 5) for _ in range(6)]
    index = MemoryIndex.build(seqs[:3], 4)
    contexts = [[rng.randrange(5) for _ in range(rng.randrange(1, 5))] for _ in range(200)]
    for ctx in contexts[:100]:  # some asked before the changes, some only after
        index.choices(locate(index, ctx)[0])
    for s in seqs[3:]:
        index.extend(s)
        index.end_sequence()
    index.remove(seqs[0])
    kept = seqs[1:]
    for ctx in contexts:
        v, m = locate(index, ctx)
        if m == len(ctx):
            assert index.choices(v) == favourite(kept, ctx)
        else:
            assert not occurrences(kept, ctx)


def test_incremental_matching_equals_brute_force():
    """The drafter's two cursors, kept token by token, against a search of the whole text."""
    rng = random.Random(3)
    depth = 5
    memory = SuffixMemory(max_depth=depth)
    stored = [markov(rng, 80, 6) for _ in range(3)]
    for s in stored:
        memory.add(s)
    drafter = SuffixDrafter(memory, max_depth=depth)
    history = markov(rng, 10, 6)
    drafter.reset(history)
    for _ in range(150):
        history = history + markov(rng, rng.randrange(1, 4), 6)
        drafter.propose(history, 4)
        (v, n), (mv, mn) = drafter.contexts()
        assert n == longest_match([history], history, depth)
        if n:
            assert drafter.index.continuations(v) == followers([history], history[-n:])
        assert mn == longest_match(stored, history, depth)
        if mn:
            assert memory.index.continuations(mv) == followers(stored, history[-mn:])


# -- proposals ------------------------------------------------------------------------


def drafter_over_distinct_tokens(seed: int) -> tuple[list[int], SuffixDrafter]:
    """60 distinct tokens (every context occurs once) and a drafter reset on them."""
    text = random.Random(seed).sample(range(1000), 60)
    drafter = SuffixDrafter()
    drafter.reset(text)
    return text, drafter


def test_a_repeated_sequence_drafts_the_copy():
    text, drafter = drafter_over_distinct_tokens(1)
    draft = drafter.propose(text + text[:20], 16)
    assert draft.tokens == text[20:36]
    assert draft.match == match_bucket(20) == 5


def test_a_weak_match_drafts_less_than_a_strong_one():
    text, drafter = drafter_over_distinct_tokens(2)
    strong = drafter.propose(text + text[:3], 16)
    assert strong.tokens == text[3:6] and strong.match == 2  # 3 tokens matched: at most 3 drafted
    drafter.reset(text)
    longer = drafter.propose(text + text[:12], 16)
    assert longer.tokens == text[12:24] and longer.match == 4
    weak = drafter.propose(text + text[:12] + [text[40]], 16)
    assert len(weak.tokens) == 1 and weak.match == 1
    # evidence split many ways: no draft at all (1/12 < min_token_prob)
    split = [t for i in range(12) for t in (5000, 6000 + i)] + [5000]
    drafter.reset(split)
    assert drafter.propose(split, 16).tokens == []
    # split two ways: the first token is worth 0.5, the next ones follow it
    halves = [5000, 1, 2, 3, 5000, 7, 8, 9, 5000]
    drafter = SuffixDrafter(max_spec_factor=8.0)
    drafter.reset(halves)
    assert drafter.propose(halves, 16).tokens == [7, 8, 9, 5000]  # the latest of the tied two


def test_the_longer_match_drafts_and_equal_matches_add_up():
    memory = SuffixMemory()
    memory.add([1, 2, 3, 4, 5, 6])
    drafter = SuffixDrafter(memory, max_spec_factor=4.0)
    # the request saw "3 4" followed by 9; the memory saw "2 3 4" followed by 5: longer wins
    drafter.reset([3, 4, 9, 2, 3, 4])
    assert drafter.propose([3, 4, 9, 2, 3, 4], 8).tokens == [5, 6]
    # equal lengths: "3 4" -> 9 once here, -> 5 twice in the memory: 5, at 2/3
    memory.add([3, 4, 5, 0])
    drafter.reset([3, 4, 9, 7, 3, 4])
    assert drafter.propose([3, 4, 9, 7, 3, 4], 8).tokens[0] == 5
    # one each: a tie, and this request's continuation wins
    drafter = SuffixDrafter(SuffixMemory(), max_spec_factor=4.0)
    drafter.memory.add([3, 4, 5, 0])
    drafter.reset([3, 4, 9, 7, 3, 4])
    assert drafter.propose([3, 4, 9, 7, 3, 4], 8).tokens[0] == 9
    # 0.5 each: p-min 0.6 drafts nothing
    drafter.min_token_prob = 0.6
    assert drafter.propose([3, 4, 9, 7, 3, 4], 8).tokens == []


def test_ties_go_to_the_latest_continuation_and_proposals_are_deterministic():
    memory = SuffixMemory()
    for seq in ([1, 2, 3], [1, 4, 5], [1, 2, 6], [9, 1, 4, 7]):
        memory.add(seq)
    d1, d2 = SuffixDrafter(memory), SuffixDrafter(memory)
    for d in (d1, d2):
        d.reset([8, 1])
    # after 1: 2 twice, 4 twice; 4 came last. Then 4 -> 5 and 4 -> 7: 7 came last.
    assert d1.propose([8, 1], 4).tokens == d2.propose([8, 1], 4).tokens == [4]
    rng = random.Random(5)
    memory = SuffixMemory(max_tokens=3000)
    for _ in range(40):
        memory.add(markov(rng, 200, 30))
    history = markov(rng, 200, 30)
    a, b = SuffixDrafter(memory), SuffixDrafter(memory)
    a.reset(history[:50])
    b.reset(history[:50])
    for n in range(51, 200, 3):
        assert a.propose(history[:n], 8).tokens == b.propose(history[:n], 8).tokens


def test_incremental_proposals_equal_fresh_ones_after_rejections():
    """History grows only by committed tokens, whatever was drafted: keeping state between
    proposals (some drafts partly rejected) changes nothing against indexing from scratch."""
    rng = random.Random(11)
    memory = SuffixMemory()
    memory.add(markov(rng, 300, 12))
    text = markov(rng, 400, 12)
    kept = SuffixDrafter(memory)
    kept.reset(text[:40])
    n = 40
    while n < len(text):
        draft = kept.propose(text[:n], 8)
        fresh = SuffixDrafter(memory)
        fresh.reset(text[:40])
        assert fresh.propose(text[:n], 8).tokens == draft.tokens
        a = 0
        while a < len(draft.tokens) and n + a < len(text) and draft.tokens[a] == text[n + a]:
            a += 1
        n += a + 1
    # a history that does not extend the one seen (no reset): indexed afresh, not an error
    assert kept.propose(text[:30] + [99], 8).tokens == SuffixDrafter(memory).propose(text[:30] + [99], 8).tokens


def test_a_second_identical_request_drafts_more_with_memory():
    rng = random.Random(4)
    prompt = rng.sample(range(5000), 40)
    output = rng.sample(range(5000, 10000), 300)  # no repeats inside: the request alone can't help
    memory = SuffixMemory()
    drafter = SuffixDrafter(memory)
    first = simulate(drafter, prompt, output)
    second = simulate(drafter, prompt, output)  # reset folded the first answer into the memory
    assert first == 0
    assert second >= 0.85 * len(output)  # 8 drafted + 1 from the model a step: at most 8/9
    without = SuffixDrafter(None)
    simulate(without, prompt, output)
    assert simulate(without, prompt, output) == 0
    drafter.close()
    assert memory.sequences == 2  # each answer once (close folded the second)


def test_finish_takes_the_final_tokens():
    memory = SuffixMemory()
    drafter = SuffixDrafter(memory, prompt_tail=2)
    drafter.reset([1, 2, 3])
    drafter.propose([1, 2, 3, 4], 4)
    drafter.finish([1, 2, 3, 4, 5, 6])
    drafter.finish()  # once only
    drafter.reset([7])
    assert memory.contents() == [[2, 3, 4, 5, 6]]


def test_per_step_cost_is_bounded():
    depth = 8
    for text in ([7] * 3000, [i % 7 for i in range(3000)], markov(random.Random(9), 3000, 4)):
        memory = SuffixMemory(max_depth=depth)
        memory.add(text[:1500])
        drafter = SuffixDrafter(memory, max_depth=depth)
        drafter.reset(text[:10])
        local_ops, mem_ops = drafter.index.ops, memory.index.ops
        for n in range(11, len(text)):
            drafter.propose(text[:n], 8)
            assert len(drafter.index.active()) <= depth + 2
        appended = len(text) - 11
        # two chains of at most max_depth + 2 states a token (the suffixes it ends, the
        # contexts it continues), plus the automaton's amortised construction
        assert drafter.index.ops - local_ops <= (2 * depth + 8) * appended
        # matching against the memory: amortised O(1) a token
        assert memory.index.ops - mem_ops <= 2 * appended


# -- the memory -----------------------------------------------------------------------


def test_memory_stays_under_its_cap():
    rng = random.Random(6)
    cap = 5000
    memory = SuffixMemory(max_tokens=cap, max_depth=8)
    fed = 0
    while fed < 200_000:
        seq = markov(rng, rng.randrange(50, 500), 40, stick=0.5)
        memory.add(seq)
        fed += len(seq)
        assert memory.tokens <= cap
        assert memory.nodes <= 4 * cap + 2
    stats = memory.stats()
    assert stats.tokens == memory.tokens and stats.nodes == memory.nodes and 0 < stats.bytes < 500 * cap
    kept = memory.contents()
    assert sum(map(len, kept)) == memory.tokens
    for _ in range(100):  # evictions and rebuilds kept the counts right
        s = rng.choice(kept)
        i = rng.randrange(len(s) - 4)
        ctx = s[i:i + rng.randrange(1, 5)]
        v, m = locate(memory.index, ctx)
        assert m == len(ctx) and memory.index.count(v) == occurrences(kept, ctx)
        assert memory.index.choices(v) == favourite(kept, ctx)
    long = list(range(10_000, 10_000 + 2 * cap))  # one sequence over the cap: its end is kept
    memory.add(long)
    assert memory.contents() == [long[-cap:]]


def test_memory_file_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    rng = random.Random(8)
    memory = SuffixMemory.open(VOCAB, max_tokens=2000)
    assert memory.path == tmp_path / "spectui" / "draft-memory" / f"{VOCAB}.msgpack"
    assert memory.tokens == 0 and memory.note is None and not memory.save()  # nothing to write
    for _ in range(30):  # past the cap: evicted, with dead states in the live index
        memory.add(markov(rng, rng.randrange(20, 200), 25))
    assert memory.save() and not memory.save()  # written once, then unchanged
    again = SuffixMemory.open(VOCAB, max_tokens=2000)
    assert again.contents() == memory.contents() and again.tokens == memory.tokens
    history = markov(rng, 300, 25)
    a, b = SuffixDrafter(memory), SuffixDrafter(again)
    a.reset(history[:20])
    b.reset(history[:20])
    for n in range(21, 300, 2):
        assert a.propose(history[:n], 8).tokens == b.propose(history[:n], 8).tokens
    smaller = SuffixMemory.open(VOCAB, max_tokens=500)  # a lower cap keeps the newest
    assert 0 < smaller.tokens <= 500 and smaller.contents() == memory.contents()[-smaller.sequences:]
    assert memory_path(VOCAB) == memory.path
    assert memory_path("../../etc/passwd").parent == memory.path.parent  # never a path
    with pytest.raises(ValueError):
        SuffixMemory.open("")


def _bad_files(good: bytes) -> dict[str, bytes]:
    enc = msgspec.msgpack.encode
    return {
        "corrupt": b"\xc1 not msgpack at all",
        "truncated": good[: len(good) // 2],
        "foreign": enc({"format": FORMAT, "version": FORMAT_VERSION, "vocab_hash": "f" * 64, "sequences": [[1, 2, 3]]}),
        "version": enc({"format": FORMAT, "version": FORMAT_VERSION + 1, "vocab_hash": VOCAB, "sequences": {"x": 1}}),
        "other": enc({"format": "something else", "version": 1, "vocab_hash": VOCAB, "sequences": []}),
        "negative": enc({"format": FORMAT, "version": FORMAT_VERSION, "vocab_hash": VOCAB, "sequences": [[1, -2]]}),
        "a list": enc([1, 2, 3]),
    }


@pytest.mark.parametrize("kind", ["corrupt", "truncated", "foreign", "version", "other", "negative", "a list"])
def test_unreadable_files_are_ignored_with_one_warning(tmp_path, monkeypatch, kind):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    memory = SuffixMemory.open(VOCAB)
    memory.add(list(range(100)))
    memory.save()
    memory.path.write_bytes(_bad_files(memory.path.read_bytes())[kind])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = SuffixMemory.open(VOCAB)
    assert [w.category for w in caught] == [DraftMemoryWarning]
    message = str(caught[0].message)
    assert "\n" not in message and str(memory.path) in message and loaded.note == message
    if kind == "version":
        assert f"format version {FORMAT_VERSION + 1}" in message
    if kind == "foreign":
        assert "vocabulary" in message
    assert loaded.tokens == 0 and loaded.sequences == 0
    loaded.add([1, 2, 3])  # and the next save replaces the bad file
    assert loaded.save()
    assert SuffixMemory.open(VOCAB).contents() == [[1, 2, 3]]


def test_an_unwritable_cache_is_not_an_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    with pytest.warns(DraftMemoryWarning, match="unreadable"):
        memory = SuffixMemory.open(VOCAB)
    memory.add([1, 2, 3])
    assert memory.save() is False


def test_match_buckets():
    assert [match_bucket(n) for n in (0, 1, 2, 3, 4, 7, 8, 15, 16, 24, 100)] == [0, 1, 2, 2, 3, 3, 4, 4, 5, 5, 5]
