"""Can a draft model's tokens be fed to the target? llama.cpp's rule, for both backends.

llama.cpp (``common/speculative.cpp``, ``common_speculative_are_compatible``) pairs a draft
with a target when their vocabularies have the same type, the same BOS and EOS (whether they
are added, and which id), sizes at most ``MAX_SIZE_DIFFERENCE`` apart, and the same token text
at every id both have from ``CHECK_START_TOKEN_ID`` on. The size allowance is what lets
Qwen2.5-7B/14B/32B (152,064 entries, padded) take a 0.5B/1.5B draft (151,936): the ids past the
smaller vocabulary are padding no trained model emits.

``VocabSignature`` is what the model catalogue keeps per model to apply the same rule without
reading the files again: prefix digests at two multiples of 128 and a short digest of each
token past the lower one, enough to compare any two vocabularies whose sizes are within 128.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

#: llama.cpp's SPEC_VOCAB_MAX_SIZE_DIFFERENCE
MAX_SIZE_DIFFERENCE = 128
#: llama.cpp's SPEC_VOCAB_CHECK_START_TOKEN_ID: the first ids (control tokens) may differ
CHECK_START_TOKEN_ID = 5
_BLOCK = MAX_SIZE_DIFFERENCE

#: llama.cpp's defaults for adding BOS / EOS by vocabulary type, where the file does not say
_ADDS_BOS = frozenset({"llama", "bert"})
_ADDS_EOS = frozenset({"t5"})


@dataclass(frozen=True)
class VocabFacts:
    """What the rule compares: the type ("" when unknown), every token's text, BOS and EOS."""

    kind: str
    tokens: Sequence[str]
    bos: int | None
    eos: int | None
    add_bos: bool
    add_eos: bool

    @classmethod
    def from_gguf(cls, metadata: Mapping[str, Any]) -> VocabFacts:
        kind = str(metadata.get("tokenizer.ggml.model", ""))
        return cls(
            kind=kind,
            tokens=metadata.get("tokenizer.ggml.tokens", []),
            bos=metadata.get("tokenizer.ggml.bos_token_id"),
            eos=metadata.get("tokenizer.ggml.eos_token_id"),
            add_bos=bool(metadata.get("tokenizer.ggml.add_bos_token", kind in _ADDS_BOS)),
            add_eos=bool(metadata.get("tokenizer.ggml.add_eos_token", kind in _ADDS_EOS)),
        )

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> VocabFacts:
        """From a ``TextTokenizer`` (an MLX model's): its type is not recorded, so not compared."""
        return cls("", tokenizer.tokens, tokenizer.bos_id, tokenizer.eos_id, bool(tokenizer.add_bos), False)


def draft_incompatibility(target: VocabFacts, draft: VocabFacts, target_name: str = "the target", draft_name: str = "the draft") -> str | None:
    """Why ``draft`` cannot draft for ``target`` under llama.cpp's rule, or None if it can."""
    if target.kind and draft.kind and target.kind != draft.kind:
        return f"vocabulary types differ: {target.kind} in {target_name}, {draft.kind} in {draft_name}"
    for what, t_add, t_id, d_add, d_id in (
        ("BOS", target.add_bos, target.bos, draft.add_bos, draft.bos),
        ("EOS", target.add_eos, target.eos, draft.add_eos, draft.eos),
    ):
        if t_add != d_add or (t_add and t_id != d_id):
            return (
                f"{what} tokens differ: {target_name} {_adds(t_add, t_id)}, {draft_name} {_adds(d_add, d_id)}"
            )
    n_t, n_d = len(target.tokens), len(draft.tokens)
    if abs(n_t - n_d) > MAX_SIZE_DIFFERENCE:
        return (
            f"vocabulary sizes differ by {abs(n_t - n_d)} ({n_t} in {target_name}, {n_d} in {draft_name}); "
            f"llama.cpp allows {MAX_SIZE_DIFFERENCE}"
        )
    for i in range(CHECK_START_TOKEN_ID, min(n_t, n_d)):
        if target.tokens[i] != draft.tokens[i]:
            return f"token id {i} is {target.tokens[i]!r} in {target_name} but {draft.tokens[i]!r} in {draft_name}"
    return None


def _short(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def _adds(add: bool, token: int | None) -> str:
    return f"adds token {token}" if add else "adds none"


# -- the catalogue's signature --------------------------------------------------------------


class VocabSignature(msgspec.Struct, frozen=True, kw_only=True):
    """Enough of a vocabulary to apply ``draft_incompatibility`` without its file: with
    ``top`` the size rounded down to a multiple of 128, the digest of the tokens from
    ``CHECK_START_TOKEN_ID`` to ``top`` and to ``top - 128``, and a digest of each token from
    ``top - 128`` to the end. Two sizes within 128 share a boundary (the smaller's ``top``) that both
    signatures have a digest for, and the tokens past it are in both tails."""

    kind: str
    size: int
    bos: int | None
    eos: int | None
    add_bos: bool
    add_eos: bool
    prefix_sha256: dict[str, str]  # boundary (as text: JSON keys) -> digest of tokens[5:boundary]
    tail: list[str]  # the first 8 hex digits of each token's sha256, from top - 128 on

    @classmethod
    def of(cls, facts: VocabFacts) -> VocabSignature:
        tokens = facts.tokens
        size = len(tokens)
        top = size // _BLOCK * _BLOCK
        low = max(top - _BLOCK, 0)
        digest = hashlib.sha256()
        prefixes: dict[str, str] = {}
        for i in range(CHECK_START_TOKEN_ID, top):
            if i == low:
                prefixes[str(low)] = digest.hexdigest()
            digest.update(tokens[i].encode("utf-8", "surrogatepass") + b"\0")
        prefixes.setdefault(str(low), hashlib.sha256().hexdigest())  # low < 5: nothing below it is compared
        prefixes[str(top)] = digest.hexdigest()
        return cls(
            kind=facts.kind, size=size, bos=facts.bos, eos=facts.eos, add_bos=facts.add_bos, add_eos=facts.add_eos,
            prefix_sha256=prefixes, tail=[_short(t) for t in tokens[low:]],
        )

    def token(self, i: int) -> str:
        """Token ``i``'s short digest, from the tail (``i`` at or past ``size`` rounded down,
        less 128)."""
        return self.tail[i - (self.size - len(self.tail))]

    def incompatibility(self, target: VocabSignature) -> str | None:
        """``draft_incompatibility`` with this signature as the draft's, from signatures alone."""
        t, d = target, self
        head = draft_incompatibility(
            VocabFacts(t.kind, (), t.bos, t.eos, t.add_bos, t.add_eos),
            VocabFacts(d.kind, (), d.bos, d.eos, d.add_bos, d.add_eos),
        )
        if head is not None:
            return head
        if abs(t.size - d.size) > MAX_SIZE_DIFFERENCE:
            return f"vocabulary sizes differ by {abs(t.size - d.size)}; llama.cpp allows {MAX_SIZE_DIFFERENCE}"
        shared = min(t.size, d.size)
        boundary = str(shared // _BLOCK * _BLOCK)
        if t.prefix_sha256.get(boundary) != d.prefix_sha256.get(boundary) or boundary not in t.prefix_sha256:
            return f"the tokens below id {boundary} differ"
        for i in range(max(int(boundary), CHECK_START_TOKEN_ID), shared):
            if t.token(i) != d.token(i):
                return f"token id {i} differs"
        return None
