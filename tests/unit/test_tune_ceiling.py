"""What the weights allow (``spectui.tune.ceiling``): the copying and perfect-drafter ceilings
against brute force and against the replayed policies they bound."""

from __future__ import annotations

import random

import pytest

from spectui.drafting import CostAware, DraftConfig, Fixed
from spectui.tune.ceiling import copy_ceiling, longest_copies, lookup_bound, lookup_keepable, lookup_sources, perfect_ceiling, planned_speedup
from spectui.tune.replay import replay


def brute_longest(history: list[int], output: list[int], i: int, limit: int) -> int:
    seen = history + output[:i]
    best = 0
    for n in range(1, min(limit, len(output) - i) + 1):
        if not any(seen[j:j + n] == output[i:i + n] for j in range(len(seen) - n + 1)):
            break
        best = n
    return best


def test_longest_copies_by_hand_and_against_brute_force():
    assert longest_copies([1, 2, 3, 4], [1, 2, 3, 9, 4], 16) == [3, 2, 1, 0, 1]
    assert longest_copies([5, 6], [5, 6, 5, 6, 5], 3) == [2, 2, 3, 2, 1]  # earlier output counts; capped at 3
    rng = random.Random(7)
    for _ in range(40):
        history = [rng.randrange(4) for _ in range(rng.randrange(0, 30))]
        output = [rng.randrange(4) for _ in range(rng.randrange(1, 30))]
        limit = rng.randrange(1, 8)
        assert longest_copies(history, output, limit) == [brute_longest(history, output, i, limit) for i in range(len(output))]


def test_ceilings_on_known_curves():
    linear = lambda n: float(n)  # noqa: E731 - a block costs its rows: nothing to gain
    flat = lambda n: 1.0  # noqa: E731 - rows are free
    text = list(range(40))
    assert copy_ceiling(text, text, linear) == pytest.approx(1.0)
    assert perfect_ceiling(40, linear) == pytest.approx(1.0)
    # rows free: 39 decoded tokens in blocks of at most 17 -> 3 evaluations
    assert perfect_ceiling(40, flat) == pytest.approx(39 / 3)
    assert copy_ceiling(text, text, flat) == pytest.approx(39 / 3)
    # nothing copyable: AR speed whatever the curve
    assert copy_ceiling([100, 101], text, flat) == pytest.approx(1.0)
    half = lambda n: 1.0 + 0.5 * (n - 1)  # noqa: E731
    assert perfect_ceiling(18, half) == pytest.approx(17 / 9.0)
    # a curve that dips (measured ones do): a bigger block that keeps fewer rows may be cheaper
    dip = {1: 1.0, 2: 1.9, 3: 1.5}
    assert perfect_ceiling(3, lambda n: dip.get(n, 9.0), k_max=2) == pytest.approx(2 / 1.5)


def test_a_plan_over_what_each_position_could_keep():
    flat = lambda n: 1.0  # noqa: E731
    # position 1 may keep 2 drafted tokens: with the target's own, 3 tokens in one evaluation
    assert planned_speedup([0, 2, 0, 0], flat) == pytest.approx(3.0)
    assert planned_speedup([0, 2, 0, 0], float) == pytest.approx(1.0)  # rows cost what they are
    assert planned_speedup([0, 0, 0], flat) == pytest.approx(1.0)
    assert planned_speedup([5], flat) == 1.0  # the prefill's token alone
    # never more than k_max drafted a block, whatever could be kept
    assert planned_speedup([0, 30, *[0] * 30], flat, k_max=4) == pytest.approx(31 / (1 + 26))
    text = [3, 1, 4, 1, 5, 9, 2, 6]
    assert copy_ceiling(text, text, flat) == planned_speedup(longest_copies(text, text, 16), flat)


@pytest.mark.parametrize("seed", range(6))
def test_no_replayed_policy_beats_the_copying_ceiling(seed):
    """The copying ceiling bounds what prompt lookup can do over the same output and curve, at
    any fixed K and with the cost-aware K."""
    rng = random.Random(seed)
    prompt = [rng.randrange(12) for _ in range(60)]
    output = []
    while len(output) < 80:  # copies of the prompt with edits between them
        start = rng.randrange(len(prompt) - 10)
        output += prompt[start:start + rng.randrange(2, 10)] + [rng.randrange(12, 20)]
    curve = lambda n: 1.0 + 0.45 * (n - 1) + (0.3 if n % 4 else 0.0)  # noqa: E731
    ceiling = copy_ceiling(prompt, output, curve)
    assert ceiling <= perfect_ceiling(len(output), curve) + 1e-9
    configs = [DraftConfig(length=Fixed(k=k)) for k in (1, 2, 4, 8, 16)]
    configs.append(DraftConfig(length=CostAware(k_max=16)))
    seed = tuple(curve(n) for n in range(1, 18))
    for draft in configs:
        assert replay(prompt, output, curve, draft, seed=seed).speedup <= ceiling + 1e-9, draft.label()


def brute_source(text: list[int], n: int, reach: int = 32) -> tuple[int, int]:
    """Prompt lookup's source of ``text[:n]`` by scanning: the latest earlier occurrence of the
    longest suffix, longer suffixes tried while one is found."""
    found = (0, -1)
    for length in range(1, min(reach, n - 1) + 1):
        tail = text[n - length:n]
        start = next((s + length for s in range(n - length - 1, -1, -1) if text[s:s + length] == tail), -1)
        if start < 0:
            break
        found = (length, start)
    return found


def test_lookup_sources_against_a_scan_and_the_bound_under_the_copying_ceiling():
    text = [1, 2, 3, 1, 2, 4, 1, 2]
    assert lookup_sources(text, 3) == [brute_source(text, n) for n in range(3, 8)]
    assert lookup_sources([*text, 9], 8)[0] == (2, 5)  # "1 2": its latest occurrence, followed by 4
    rng = random.Random(11)
    curve = lambda n: 1.0 + 0.45 * (n - 1)  # noqa: E731
    for _ in range(30):
        prompt = [rng.randrange(5) for _ in range(rng.randrange(2, 40))]
        output = [rng.randrange(5) for _ in range(rng.randrange(2, 40))]
        text = prompt + output
        assert lookup_sources(text, len(prompt) + 1) == [brute_source(text, n) for n in range(len(prompt) + 1, len(text))]
        keep = lookup_keepable(prompt, output, 16)
        assert len(keep) == len(output) and keep[0] == 0
        assert all(k <= c for k, c in zip(keep, longest_copies(prompt, output, 16)))
        assert 1.0 - 1e-9 <= lookup_bound(prompt, output, curve) <= copy_ceiling(prompt, output, curve) + 1e-9
