"""The decoding loop, written once for AR and speculative decoding against ``Backend``.

Cache discipline: after each step the target's KV cache holds every committed token except
the newest one (``pending``), whose logits are not computed yet. A step evaluates
``[pending, d1, ..., dk]`` in one forward pass, reads k+1 rows of logits, keeps the accepted
prefix and truncates the rest. With no drafter (AR) the same step evaluates ``[pending]``.
Every step yields one ``Step`` event; nothing else is done per token.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence

import numpy as np

from spectui.config import MAX_DRAFT_LENGTH
from spectui.engine.draft_length import DraftLength
from spectui.engine.policy import FallbackPolicy
from spectui.engine.protocol import Backend, CacheRebuilt, Draft, Drafter
from spectui.engine.sampling import Sampler, verify_greedy, verify_sampled
from spectui.recording.schema import End, PolicyChange, Prefill, Step, TokenOrigin

_AR, _DRAFT, _CORRECTION, _BONUS = (int(o) for o in TokenOrigin)
_NO_DRAFT = Draft([])


def top_two(row: np.ndarray, best: int) -> tuple[int, int]:
    """The margin of ``row``'s best token ``best`` over its runner-up, in thousandths of a
    logit, and the runner-up's id. Two scans of the row's halves around ``best``: no copy,
    no sort (about 6 us for a 49k vocabulary: 0.07% of an AR token here)."""
    n = row.shape[0]
    below = int(row[:best].argmax()) if best > 0 else -1
    above = best + 1 + int(row[best + 1 :].argmax()) if best + 1 < n else -1
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


def decode(
    target: Backend,
    prompt: Sequence[int],
    *,
    sampler: Sampler,
    max_tokens: int,
    drafter: Drafter | None = None,
    draft_length: DraftLength | None = None,
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
    """
    clock = time.perf_counter_ns
    t0 = clock() if t0_ns is None else t0_ns
    if (drafter is not None or policy is not None) and draft_length is None:
        raise ValueError("a drafter needs a DraftLength")
    greedy = sampler.greedy
    with_margins = greedy and margins
    eog = target.eog_tokens
    piece = target.piece

    t_start = clock()
    kept = shared_prefix(target.cached, prompt, len(prompt) - 1) if reuse else 0
    try:
        target.truncate(kept)
    except CacheRebuilt:
        pass  # the kept prefix was evaluated again: exact, only slower
    if policy is not None:
        policy.reset(prompt)
    elif drafter is not None:
        drafter.reset(prompt)
    logits = target.eval(prompt[kept:], all_logits=False)
    first = sampler.choose(logits[-1])
    t_end = clock()
    yield Prefill(n_tokens=len(prompt), t_start_us=(t_start - t0) // 1000, t_end_us=(t_end - t0) // 1000, n_cached=kept)
    t_us = (t_end - t0) // 1000
    # the first token costs the prefill, which Prefill records; the step itself is free
    first_step = Step([first], [_AR], [piece(first)], [t_us])
    if with_margins:
        first_step.margins_milli, first_step.runner_up = _margins(logits[-1:], [first], 1)
    yield first_step

    history = list(prompt)
    history.append(first)
    emitted = 1
    pending = first
    if first in eog:
        yield End(t_us=t_us, reason="stop", n_tokens=emitted)
        return

    n_ctx = target.n_ctx
    while True:
        if emitted >= max_tokens:
            yield End(t_us=t_us, reason="length", n_tokens=emitted)
            return
        if stop is not None and stop.is_set():
            yield End(t_us=t_us, reason="interrupted", n_tokens=emitted)
            return
        room = n_ctx - target.n_past  # slots for pending + drafts
        if room < 1:
            yield End(t_us=t_us, reason="context", n_tokens=emitted)
            return

        # -- policy ------------------------------------------------------------------
        active, k_cap = drafter, MAX_DRAFT_LENGTH
        if policy is not None:
            change = policy.decide((clock() - t0) // 1000)
            if change is not None:
                yield change
            active, k_cap = policy.drafter, policy.k

        # -- draft -------------------------------------------------------------------
        t_a = clock()
        k = 0
        draft = _NO_DRAFT
        guess = None
        if active is not None:
            limit = min(k_cap, max_tokens - emitted - 1, room - 1)  # the budget, the context
            try:
                if active.free and draft_length.adaptive:
                    # asking costs nothing: look first, then verify as much of the proposal as
                    # its match is worth; K = 0 (no block pays now) scores its first token
                    # against what AR produces instead, so acceptance keeps being measured
                    proposal = active.propose(history, min(draft_length.k_max, limit)) if limit > 0 else _NO_DRAFT
                    k = min(draft_length.k_for(proposal.match), limit) if proposal.tokens else 0
                    if k > 0:
                        draft = Draft(proposal.tokens[:k], match=proposal.match)
                    elif proposal.tokens:
                        guess = proposal
                else:  # a draft model: K first (an adaptive 0 probes it now and then)
                    k = min(draft_length.next_k(), limit)
                    if k > 0:
                        draft = active.propose(history, k)
            except Exception as exc:
                if policy is None:
                    raise
                policy.part_failed("drafter", exc)  # this step goes on without a draft
        drafted = draft.tokens
        n_drafted = len(drafted)
        t_b = clock()

        # -- verify ------------------------------------------------------------------
        base = target.n_past
        logits = None
        if n_drafted:
            try:
                logits = target.eval([pending, *drafted], all_logits=True)
            except Exception as exc:
                if policy is None:
                    raise
                policy.part_failed("verifier", exc)
                target.truncate(base)  # whatever the failed block wrote; this step goes AR
                draft, drafted, n_drafted = _NO_DRAFT, [], 0
        if logits is not None:
            if greedy:
                best = logits.argmax(axis=1).tolist()
                accepted, nxt = verify_greedy(drafted, best)
                if with_margins:  # the emitted tokens are the best of the first rows
                    top2 = _margins(logits, best, accepted + 1)
            else:
                accepted, nxt = verify_sampled(drafted, lambda i: sampler.probs(logits[i]), draft.probs, sampler.rng)
            if accepted < n_drafted:
                try:
                    target.truncate(base + 1 + accepted)
                except CacheRebuilt as exc:  # exact again, but each block now costs a rebuild
                    if policy is not None:
                        policy.part_failed("verifier", exc)
            tokens = drafted[:accepted]
            tokens.append(nxt)
            origins = [_DRAFT] * accepted
            origins.append(_BONUS if accepted == n_drafted else _CORRECTION)
        else:
            logits = target.eval((pending,), all_logits=False)
            accepted, nxt = 0, sampler.choose(logits[-1])
            tokens = [nxt]
            origins = [_AR]
            if with_margins:
                top2 = _margins(logits, [nxt], 1)
        t_c = clock()
        t_us = (t_c - t0) // 1000

        # -- stop inside the block: budget or end-of-generation ----------------------
        finish = None
        for i, tok in enumerate(tokens):
            if tok in eog:
                finish = "stop"
                del tokens[i + 1:], origins[i + 1:]
                break
        budget = max_tokens - emitted
        if len(tokens) > budget:
            del tokens[budget:], origins[budget:]
        emitted += len(tokens)

        step = Step(
            tokens,
            origins,
            [piece(t) for t in tokens],
            [t_us] * len(tokens),
            k,
            n_drafted,
            accepted,
            (t_b - t_a) // 1000,
            (t_c - t_b) // 1000,
            draft.forwards,
        )
        if with_margins:
            step.margins_milli, step.runner_up = top2[0][: len(tokens)], top2[1][: len(tokens)]
        yield step
        if finish is not None:
            yield End(t_us=t_us, reason=finish, n_tokens=emitted)
            return
        history.extend(tokens)
        pending = nxt
        if draft_length is not None:
            if guess is not None:
                draft_length.shadow(guess.tokens[0] == nxt, guess.match)
            draft_length.update(k, n_drafted, accepted, (t_c - t_b) / 1000, draft.match)
        if policy is not None:
            policy.observe_block(n_drafted, accepted)
