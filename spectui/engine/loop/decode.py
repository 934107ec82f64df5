"""The decoding loop, written once for AR and speculative decoding against ``Backend``.

Cache discipline: after each step the target's KV cache holds every committed token except
the newest one (``pending``), whose logits are not computed yet. A step evaluates
``[pending, d1, ..., dk]`` in one forward pass, reads k+1 rows of logits, keeps the accepted
prefix and truncates the rest. With no drafter (AR) the same step evaluates ``[pending]``.
Every step yields one ``Step`` event; nothing else is done per token.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator, Sequence

import numpy as np

from spectui.drafting import MAX_DRAFT_LENGTH
from spectui.engine.loop.length import LengthPolicy, Outcome
from spectui.engine.loop.policy import FallbackPolicy
from spectui.engine.loop.propose import NO_DRAFT, propose_step
from spectui.engine.loop.sampling import Sampler, verify_greedy, verify_sampled
from spectui.engine.protocol import Backend, CacheRebuilt, Draft, Drafter
from spectui.recording.schema import End, FinishReason, PolicyChange, Prefill, Step, TokenOrigin

_AR, _DRAFT, _CORRECTION, _BONUS = (int(o) for o in TokenOrigin)


def top_two(row: np.ndarray, best: int) -> tuple[int, int]:
    """The margin of ``row``'s best token ``best`` over its runner-up, in thousandths of a
    logit, and the runner-up's id. Two scans of the row's halves around ``best``: no copy,
    no sort (about 6 us for a 49k vocabulary: 0.07% of an AR token here)."""
    n = row.shape[0]
    below = int(np.argmax(row[:best])) if best > 0 else -1
    above = best + 1 + int(np.argmax(row[best + 1 :])) if best + 1 < n else -1
    runner = below if above < 0 or (below >= 0 and row[below] >= row[above]) else above
    if runner < 0:  # a vocabulary of one
        return 0, best
    return round(1000.0 * float(row[best] - row[runner])), runner


def shared_prefix(cached: Sequence[int], tokens: Sequence[int], limit: int) -> int:
    """How many leading tokens ``cached`` and ``tokens`` share, at most ``limit``."""
    n = min(len(cached), len(tokens), limit)
    i = 0
    while i < n and cached[i] == tokens[i]:
        i += 1
    return i


def _margins(logits: np.ndarray, best: Sequence[int], n: int) -> tuple[list[int], list[int]]:
    """``top_two`` of the first ``n`` rows: (margins, runner-up ids)."""
    pairs = [top_two(logits[i], best[i]) for i in range(n)]
    return [m for m, _ in pairs], [r for _, r in pairs]


class _Block:
    """One verified step: the tokens it emits and where each came from, what was drafted and
    kept, and the emitted tokens' margins (greedy runs that record them)."""

    __slots__ = ("accepted", "draft", "k", "margins", "next", "origins", "tokens")

    def __init__(self, k: int, draft: Draft, tokens: list[int], origins: list[int], accepted: int,
                 margins: tuple[list[int], list[int]] | None) -> None:
        self.k, self.draft, self.tokens, self.origins = k, draft, tokens, origins
        self.accepted, self.margins = accepted, margins
        self.next = tokens[-1]  # the target's own token after the kept drafts: the next pending


def _prefill(target: Backend, prompt: Sequence[int], sampler: Sampler, reuse: bool) -> tuple[int, np.ndarray, int]:
    """Evaluate the prompt (what the cache does not hold already, when ``reuse``); returns
    (tokens kept from the cache, the last row of logits, the first token)."""
    kept = shared_prefix(target.cached, prompt, len(prompt) - 1) if reuse else 0
    try:
        target.truncate(kept)
    except CacheRebuilt:
        pass  # the kept prefix was evaluated again: exact, only slower
    logits = target.eval(prompt[kept:], all_logits=False)
    return kept, logits, sampler.choose(logits[-1])


def _verify(target: Backend, pending: int, k: int, draft: Draft, sampler: Sampler, with_margins: bool,
            policy: FallbackPolicy | None) -> _Block:
    """Evaluate ``[pending, *draft]`` in one pass, keep the accepted prefix and the target's
    token after it, and roll the cache back past the rejected rest. With nothing drafted (or
    a verification block that failed under the fallback policy) it is one AR step."""
    base = target.n_past
    drafted = draft.tokens
    if drafted:
        try:
            logits = target.eval([pending, *drafted], all_logits=True)
        except Exception as exc:
            if policy is None:
                raise
            policy.part_failed("verifier", exc)
            target.truncate(base)  # whatever the failed block wrote; this step goes AR
            return _ar_step(target, pending, k, sampler, with_margins)
        margins = None
        if sampler.greedy:
            best = logits.argmax(axis=1).tolist()
            accepted, nxt = verify_greedy(drafted, best)
            if with_margins:  # the emitted tokens are the best of the first rows
                margins = _margins(logits, best, accepted + 1)
        else:
            accepted, nxt = verify_sampled(drafted, lambda i: sampler.probs(logits[i]), draft.probs, sampler.rng)
        if accepted < len(drafted):
            _rollback(target, base + 1 + accepted, policy)
        origins = [_DRAFT] * accepted
        origins.append(_BONUS if accepted == len(drafted) else _CORRECTION)
        return _Block(k, draft, [*drafted[:accepted], nxt], origins, accepted, margins)
    return _ar_step(target, pending, k, sampler, with_margins)


def _ar_step(target: Backend, pending: int, k: int, sampler: Sampler, with_margins: bool) -> _Block:
    logits = target.eval((pending,), all_logits=False)
    nxt = sampler.choose(logits[-1])
    return _Block(k, NO_DRAFT, [nxt], [_AR], 0, _margins(logits, [nxt], 1) if with_margins else None)


def _rollback(target: Backend, n_past: int, policy: FallbackPolicy | None) -> None:
    """Truncate the target's cache to ``n_past``. A cache that cannot drop the rejected tokens
    in place is rebuilt by the backend (exact again, but every block now costs a rebuild), and
    the fallback policy hears of it."""
    try:
        target.truncate(n_past)
    except CacheRebuilt as exc:
        if policy is not None:
            policy.part_failed("verifier", exc)


def _clip(block: _Block, eog: frozenset[int] | set[int], budget: int) -> FinishReason | None:
    """Cut the block at the first end-of-generation token and at the token budget; returns
    "stop" when generation ended inside it."""
    tokens, origins = block.tokens, block.origins
    finish: FinishReason | None = None
    for i, tok in enumerate(tokens):
        if tok in eog:
            finish = "stop"
            del tokens[i + 1:], origins[i + 1:]
            break
    if len(tokens) > budget:
        del tokens[budget:], origins[budget:]
    return finish


def _end(t_us: int, reason: FinishReason, emitted: int, draft_length: LengthPolicy | None) -> End:
    return End(t_us=t_us, reason=reason, n_tokens=emitted, decisions=draft_length.learned().decisions if draft_length is not None else None)


def decode(
    target: Backend,
    prompt: Sequence[int],
    *,
    sampler: Sampler,
    max_tokens: int,
    drafter: Drafter | None = None,
    draft_length: LengthPolicy | None = None,
    t0_ns: int | None = None,
    stop: threading.Event | None = None,
    policy: FallbackPolicy | None = None,
    margins: bool = True,
    reuse: bool = False,
) -> Iterator[Prefill | Step | PolicyChange | End]:
    """Yield ``Prefill``, one ``Step`` per decode step, then ``End``.

    ``t0_ns`` is the session's ``time.perf_counter_ns()`` origin; event times are
    microseconds since it. ``stop`` ends the run after the current step (reason
    ``interrupted``). With a ``policy`` the drafter and K come from its current rung (K
    capped by ``draft_length``), its transitions are yielded as ``PolicyChange`` before the
    step they apply to, and a failing drafter or verification block becomes a step down
    instead of the end of the session. A greedy run records each emitted token's margin over
    its runner-up (``top_two``) unless ``margins`` is False (for measuring what that costs).

    ``reuse`` (a conversation's next turn) keeps the longest prefix of ``prompt`` already in
    the target's cache and evaluates only the rest (at least the last token, whose logits
    the first step needs); ``Prefill.n_cached`` records how many were kept. Otherwise the
    cache is emptied first, so every run's prefill does the same work.

    Each step: ask the policy for the drafter and a cap on K, draft (``propose.propose_step``), verify
    and roll back (``_verify``), cut at the end of generation or the budget (``_clip``),
    yield the step, then let the draft length and the policy learn from the block.
    """
    clock = time.perf_counter_ns
    t0 = clock() if t0_ns is None else t0_ns
    if (drafter is not None or policy is not None) and draft_length is None:
        raise ValueError("a drafter needs a DraftLength")
    with_margins = sampler.greedy and margins
    eog = target.eog_tokens
    piece = target.piece

    # -- prefill: the prompt, and the first token from its last row ----------------------
    t_start = clock()
    drafter_failed = None  # under the fallback policy a failing drafter leaves its step without a draft
    if policy is not None:
        policy.reset(prompt)
        drafter_failed = functools.partial(policy.part_failed, "drafter")
    elif drafter is not None:
        drafter.reset(prompt)
    kept, logits, first = _prefill(target, prompt, sampler, reuse)
    t_end = clock()
    yield Prefill(n_tokens=len(prompt), t_start_us=(t_start - t0) // 1000, t_end_us=(t_end - t0) // 1000, n_cached=kept)
    t_us = (t_end - t0) // 1000
    # the first token costs the prefill, which Prefill records; the step itself is free
    first_step = Step([first], [_AR], [piece(first)], [t_us])
    if with_margins:
        first_step.margins_milli, first_step.runner_up = _margins(logits[-1:], [first], 1)
    yield first_step

    history = [*prompt, first]
    emitted = 1
    pending = first
    if first in eog:
        yield End(t_us=t_us, reason="stop", n_tokens=emitted)
        return

    n_ctx = target.n_ctx
    while True:
        room = n_ctx - target.n_past  # slots for pending + drafts
        reason: FinishReason | None = "length" if emitted >= max_tokens else "interrupted" if stop is not None and stop.is_set() else (
            "context" if room < 1 else None)
        if reason is not None:
            yield _end(t_us, reason, emitted, draft_length)
            return

        # -- policy: which drafter, and a cap on K -------------------------------------
        active, k_cap = drafter, MAX_DRAFT_LENGTH
        if policy is not None:
            change = policy.decide((clock() - t0) // 1000)
            if change is not None:
                yield change
            active, k_cap = policy.drafter, policy.k

        # -- draft ---------------------------------------------------------------------
        t_a = clock()
        k, draft = 0, NO_DRAFT
        if active is not None:  # the budget and the context limit K too
            assert draft_length is not None  # refused on entry: a drafter needs a DraftLength
            k, draft = propose_step(active, draft_length, history, min(k_cap, max_tokens - emitted - 1, room - 1), eog,
                                    drafter_failed)
        t_b = clock()

        # -- verify, accept or roll back -----------------------------------------------
        block = _verify(target, pending, k, draft, sampler, with_margins, policy)
        t_c = clock()
        t_us = (t_c - t0) // 1000
        finish = _clip(block, eog, max_tokens - emitted)
        tokens = block.tokens
        emitted += len(tokens)
        n_drafted = len(block.draft.tokens)
        step = Step(tokens, block.origins, [piece(t) for t in tokens], [t_us] * len(tokens), k, n_drafted,
                    block.accepted, (t_b - t_a) // 1000, (t_c - t_b) // 1000, block.draft.forwards)
        if block.margins is not None:
            step.margins_milli, step.runner_up = block.margins[0][: len(tokens)], block.margins[1][: len(tokens)]
        yield step

        # -- learn from the block (the last one too: the end record counts it) ------------
        history.extend(tokens)
        pending = block.next
        if draft_length is not None:  # it follows every proposal it priced, held back or not, on the tokens
            draft_length.observe(Outcome(k, n_drafted, block.accepted, (t_c - t_b) / 1000, block.draft.match,
                                         (t_b - t_a) / 1000, block.draft.forwards, tokens))
        if policy is not None:
            policy.observe_block(n_drafted, block.accepted)
        if finish is not None:
            yield _end(t_us, finish, emitted, draft_length)
            return
