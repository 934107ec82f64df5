"""The two small protocols the decoding loops are written against.

A ``Backend`` is one model with one KV cache. It evaluates a list of tokens at the end of its
cache and hands back the logits of the rows asked for, and it truncates its cache to ``n``
tokens. That is all the AR and speculative loops need, so they are written once for every
backend (llama.cpp, MLX).

A ``Drafter`` proposes up to ``k`` tokens that continue a history; ``DrafterBase`` gives the
defaults of the members most drafters leave as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeGuard, runtime_checkable

import numpy as np

from spectui.recording.schema import ModelArtifacts

if TYPE_CHECKING:
    from spectui.config import BackendConfig


@runtime_checkable
class Backend(Protocol):
    #: number of tokens in the KV cache (the position the next evaluated token gets)
    n_past: int
    #: the tokens in the KV cache, in order (``len(cached) == n_past``): a conversation's next
    #: turn keeps the prefix it shares with them
    cached: list[int]
    n_ctx: int
    n_vocab: int
    #: end-of-generation token ids (EOS, EOT, <|im_end|>, ...)
    eog_tokens: frozenset[int]
    chat_template: str | None
    bos_token: str
    eos_token: str

    def tokenize(self, text: str, *, special: bool = True, add_bos: bool = False) -> list[int]:
        """Token ids for ``text``, as ``llama_tokenize`` makes them.

        ``special`` parses control tokens such as ``<|im_start|>`` out of the text (otherwise
        they are spelled out as text). ``add_bos`` prepends the BOS token, but only where the
        vocabulary asks for one (its ``add_bos_token`` flag): a prompt rendered from a chat
        template already carries whatever BOS the template writes, so the session asks for it
        only around a raw prompt.
        """

    def piece(self, token: int) -> bytes:
        """The raw bytes of one token (may be part of a UTF-8 character)."""

    def eval(self, tokens: Sequence[int], *, all_logits: bool) -> np.ndarray:
        """Append ``tokens`` to the cache and return logits, shape ``(rows, n_vocab)``.

        ``all_logits`` asks for one row per token, otherwise only the last row. The array
        may be a view into engine memory, valid until the next ``eval`` or ``truncate``:
        copy what must outlive that.
        """

    def truncate(self, n: int) -> None:
        """Drop every cached token from position ``n`` on (rollback).

        Exact or an exception, never a cache that still holds dropped tokens. A cache that
        cannot roll back in place (a recurrent state past its checkpoint, a full sliding
        window) is rebuilt from the kept tokens and ``CacheRebuilt`` is raised: the cache is
        then right, only slower to have got there, and a fallback policy may step down.
        """

    def checkpoint(self) -> None:
        """Mark the current position as one a later ``truncate`` returns to cheaply.

        A cache that rolls back anywhere ignores it. A recurrent state remembers this one
        position; a verification block (``eval`` with ``all_logits``) marks its own start, and
        a draft model marks where its proposal starts.
        """

    def artifacts(self) -> ModelArtifacts:
        """What identifies the loaded model."""

    def runtime_info(self) -> dict[str, str]:
        """Runtime versions and offload settings, for the recording header."""

    def second_context(self, settings: BackendConfig) -> Backend:
        """Another context (KV cache) over the same weights with ``settings``, for a
        measurement that must not touch this one's cache; the caller closes it."""

    def batch_invariant_settings(self) -> BackendConfig | None:
        """Settings under which evaluating a block gives bit-identical logits to evaluating
        its tokens one at a time (``--deterministic``), or None where none is known."""

    def close(self) -> None:
        """Free the model and its context."""


class CacheRebuilt(RuntimeError):
    """A rollback that could not be done in place: the backend emptied its cache and
    re-evaluated the kept tokens, so the cache is exact and the backend usable."""


#: ``Draft.support``: how the earlier occurrences of the context a lookup draft was found by
#: went on. Unknown (the drafter does not say), split (some went on with another token than
#: the one drafted), once (one earlier occurrence) or agreed (two or more, all with the token
#: drafted). On this project's greedy outputs a context seen twice and always followed by the
#: same token was right at 0.74-0.98 where one seen once was right at 0.23-0.75 for the same
#: match length, and a split one at 0.08-0.40: as telling as the match length itself. The
#: n-gram drafter also says split right after the output left the copy it was making
#: (``CopyTrack.departed``): the record was made in other text.
SUPPORT_UNKNOWN, SUPPORT_SPLIT, SUPPORT_ONCE, SUPPORT_AGREED = 0, 1, 2, 3
#: the continuation of the copy the output is making, where it differs from the n-gram's
#: latest occurrence and the output agreed with the copy at least as far back
#: (``drafters/copy_track.py``); its match is how far back. Replayed over Qwen2.5-Coder 1.5B's
#: greedy outputs, such first tokens were right at 1.00 in copy edits (12) and summaries (4),
#: 0.2-0.33 in prose and code, where the n-gram's occurrence was right at 0-0.2
SUPPORT_RESUMED = 4
#: the classes of lookup proposals ``proposal_class`` returns: 0 (no signal) to 6
TOP_CLASS = 6
#: the class of a copy's own continuation (``SUPPORT_RESUMED``), priced apart from the n-gram
#: ladder (``TOP_CLASS + 1`` is a draft model's, ``loop/pricing.py``): where the output is
#: copying, its hits would otherwise raise the classes of every short n-gram match with it
COPY_CLASS = TOP_CLASS + 2


def match_bucket(n: int) -> int:
    """``Draft.match`` of a draft found by a context of ``n`` tokens: 0 none, 1 one token,
    2 two or three, 3 four to seven, 4 eight to fifteen, 5 sixteen or more.

    Acceptance rises with the match length and flattens out, so doubling buckets keep the
    classes few (each gathers evidence fast).
    """
    return min(n.bit_length(), 5)


def proposal_class(match: int, support: int) -> int:
    """The confidence class of a lookup proposal (0 to ``TOP_CLASS``, or ``COPY_CLASS``) from its match bucket and
    its support: agreed earlier occurrences lift it a class, a split context of a short match
    drops to the lowest (what followed was as often something else), a long one a class."""
    if support == SUPPORT_AGREED:
        return min(match + 1, TOP_CLASS)
    if support == SUPPORT_SPLIT:
        return 1 if match <= 3 else match - 1
    if support == SUPPORT_RESUMED:
        return COPY_CLASS
    return max(0, min(match, TOP_CLASS))


class Draft:
    """A proposal: tokens, and for a sampling model drafter the distributions they came from."""

    __slots__ = ("tokens", "probs", "forwards", "confidence", "match", "support")

    def __init__(
        self,
        tokens: list[int],
        probs: list[np.ndarray] | None = None,
        forwards: int = 0,
        confidence: list[float] | None = None,
        match: int = 0,
        support: int = SUPPORT_UNKNOWN,
    ) -> None:
        self.tokens = tokens
        #: ``probs[i]`` is the distribution ``tokens[i]`` was drawn from; None = deterministic.
        self.probs = probs
        #: forward passes of a draft model spent on this proposal
        self.forwards = forwards
        #: a draft model's probability of each token it drafted (None: not computed); with
        #: p-min on, one more entry than ``tokens``: the token it stopped before
        self.confidence = confidence
        #: a lookup draft: how long a context it was found by (``match_bucket`` of its length)
        self.match = match
        #: a lookup draft: how that context went on before (``SUPPORT_*``)
        self.support = support


@runtime_checkable
class Drafter(Protocol):
    """What the decode loop asks of a drafter, every member of it. ``DrafterBase`` gives the
    members most drafters leave as they are their defaults (``free``, ``chained``, ``reset``,
    ``finish``, ``close``); a drafter then writes ``name`` and ``propose`` (docs/internals/drafters.md).

    Any drafter is exact: the target verifies every token proposed and keeps only what it
    would have produced itself, so a drafter decides how fast a run is, never what it says.
    """

    #: as recordings and calibrations name it (``ngram``, a draft model's file name)
    name: str
    #: proposing costs nothing (no model): an adaptive K may ask for guesses it won't verify
    free: bool
    #: a lookup in front of a draft model (``drafters/chain.py``): under a cost-aware K the
    #: loop asks each part itself (``Chain``); False for every other drafter
    chained: bool

    def reset(self, prompt: Sequence[int]) -> None:
        """Start a new session whose history begins with ``prompt``."""

    def propose(self, history: Sequence[int], k: int) -> Draft:
        """Up to ``k`` tokens continuing ``history`` (the committed tokens so far).

        ``history`` only ever grows by committed tokens, so a drafter may keep state between
        calls; it must cope with its previous proposal having been partly rejected.
        """

    def finish(self, history: Sequence[int]) -> None:
        """The run is over: called once with its whole history (prompt and output), for a
        drafter that learns from outputs (suffix decoding's memory). Default: nothing."""

    def close(self) -> None:
        """Free what the drafter holds (a draft model's context). Default: nothing."""


class Chain(Drafter, Protocol):
    """A drafter that is a free lookup in front of a draft model (``chained`` is True)."""

    @property
    def lookup(self) -> Drafter:
        """The free drafter asked first."""

    @property
    def model(self) -> Drafter:
        """The draft model, asked where the lookup's proposal does not pay."""


def is_chain(drafter: Drafter) -> TypeGuard[Chain]:
    """``drafter`` is a ``Chain``: its ``chained`` says so (no structural check per step)."""
    return drafter.chained


class DrafterBase:
    """The defaults of ``Drafter``'s members, for a drafter to subclass: a free drafter that is
    no chain, keeps no state between sessions, learns nothing from outputs and holds nothing
    to free. A subclass sets ``name`` and writes ``propose``; it overrides the rest as needed."""

    free: bool = True
    chained: bool = False

    def reset(self, prompt: Sequence[int]) -> None:
        """No state to start over."""

    def finish(self, history: Sequence[int]) -> None:
        """Nothing to learn from the run's output."""

    def close(self) -> None:
        """Nothing to free."""
