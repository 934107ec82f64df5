"""Token ids for a server session: the streamed text tokenized with a local copy of the
model's vocabulary, so a server recording diffs against an embedded one token by token.

Servers stream text, not ids; llama-server sends ids only with log-probabilities, which a
greedy session asks for (``spectui.server.logprobs``), and those ids are used where they spell
the chunk's text. When the model file is here too (``--target``, or a server whose model id is
a local path, as llama-cpp-python's and mlx-lm's are), each other chunk is tokenized on its
own. A server sends one token's text per chunk, and such a piece tokenizes back to that token,
so the ids are the server's in practice; the recording still says "re-tokenized", because a
piece that a byte-level BPE would merge differently on its own comes out as other ids with
the same text. The same vocabulary names a runner-up that a server lists by its text only.
"""

from __future__ import annotations

import hashlib
import json
import os

import msgspec

from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.models.artifacts import model_artifacts
from spectui.models.chat import apply_chat_template
from spectui.models.gguf import GGUFInfo, read_gguf
from spectui.models.registry import resolve_model
from spectui.models.tokenizer import TextTokenizer
from spectui.recording.schema import ModelArtifacts

#: what was built from a model file read before, by the ``GGUFInfo`` that ``read_gguf`` hands
#: back again while the file is unchanged: a tune starts a server per candidate, and each
#: start built SmolLM2's 49,152-token tokenizer and hashed its vocabulary again (0.25 s)
_BUILT: dict[int, tuple[GGUFInfo, ModelArtifacts, TextTokenizer | None, str]] = {}
_BUILT_MAX = 8


def _built(info: GGUFInfo) -> tuple[ModelArtifacts, TextTokenizer | None, str]:
    """The model's identity, its tokenizer (thread-safe, shared) and why there is none."""
    hit = _BUILT.get(id(info))
    if hit is not None and hit[0] is info:
        return hit[1], hit[2], hit[3]
    try:
        tokenizer, note = TextTokenizer.from_gguf(info.metadata), ""
    except SpectuiError as exc:  # e.g. a SentencePiece vocabulary: identity without ids
        tokenizer, note = None, str(exc)
    artifacts = model_artifacts(info)
    while len(_BUILT) >= _BUILT_MAX:
        _BUILT.pop(next(iter(_BUILT)))
    _BUILT[id(info)] = (info, artifacts, tokenizer, note)
    return artifacts, tokenizer, note


class LocalVocabulary:
    """A model's identity (``artifacts``) and, where it can be rebuilt, its tokenizer."""

    def __init__(self, path: str, source: str, artifacts: ModelArtifacts, tokenizer: TextTokenizer | None, note: str = "") -> None:
        self.path = path
        self.source = source  # why this file is taken to be the server's model
        self.artifacts = artifacts
        self.tokenizer = tokenizer
        self.note = note  # why there is no tokenizer, when there is none

    @classmethod
    def find(cls, target: str, model_id: str) -> LocalVocabulary | None:
        """The local model for a server session: ``--target`` if given (its absence is the
        user's mistake: one line), else the server's model id when it names a local path."""
        if target:
            return cls.open(resolve_model(target), "--target")
        if model_id and os.path.exists(model_id):
            return cls.open(model_id, "the server's model id is this local path")
        return None

    @classmethod
    def open(cls, path: str, source: str) -> LocalVocabulary:
        if os.path.isdir(path):
            return cls._open_dir(path, source)
        artifacts, tokenizer, note = _built(read_gguf(path))
        return cls(os.path.abspath(path), source, msgspec.structs.replace(artifacts), tokenizer, note)

    @classmethod
    def _open_dir(cls, path: str, source: str) -> LocalVocabulary:
        """An mlx-lm / Hugging Face model directory (``config.json`` + ``tokenizer.json``)."""
        try:
            with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
                config = json.load(f)
        except (OSError, ValueError) as exc:
            raise SpectuiError(f"{path} is not a model directory (config.json: {exc})") from None
        tokenizer = TextTokenizer.from_dir(path, config)
        made_from = config.get("spectui", {}) if isinstance(config.get("spectui"), dict) else {}
        template = tokenizer.chat_template or ""
        artifacts = ModelArtifacts(
            path=os.path.abspath(path),
            name=str(made_from.get("gguf_name") or os.path.basename(os.path.abspath(path))),
            architecture=str(config.get("model_type", "")),
            quant=str(made_from.get("gguf_quant", "")),
            vocab_size=tokenizer.n_vocab,
            vocab_sha256=tokenizer.vocab_sha256(),
            chat_template_sha256=hashlib.sha256(template.encode()).hexdigest() if template else "",
        )
        return cls(os.path.abspath(path), source, artifacts, tokenizer)

    def ids(self, text: str) -> tuple[list[int], list[bytes]]:
        """``text``'s token ids and pieces; the pieces always join to ``text`` exactly."""
        assert self.tokenizer is not None
        ids = self.tokenizer.tokenize(text, special=True)
        pieces = [self.tokenizer.piece(t) for t in ids]
        raw = text.encode("utf-8")
        if b"".join(pieces) != raw:  # a normalising vocabulary: keep the server's bytes
            pieces = [raw] + [b""] * (len(ids) - 1)
        return ids, pieces

    def pieces(self, ids: list[int]) -> list[bytes]:
        """Each token's bytes."""
        assert self.tokenizer is not None
        return [self.tokenizer.piece(t) for t in ids]

    def spells(self, ids: list[int], raw: bytes) -> bool:
        """Whether ``ids``' pieces join to exactly ``raw`` (a server's ids cover its text)."""
        return b"".join(self.pieces(ids)) == raw

    def token_of(self, text: str) -> int:
        """The one token whose piece is ``text``, or -1: a runner-up a server names only by its
        text. An empty text (a special token printed as nothing, a lone byte of a character
        dropped by the server's decoding) or one that needs several tokens has no id here."""
        assert self.tokenizer is not None
        ids = self.tokenizer.tokenize(text, special=True) if text else []
        return ids[0] if len(ids) == 1 and self.tokenizer.piece(ids[0]) == text.encode("utf-8") else -1

    def count_prompt(self, config: RunConfig) -> int:
        """Prompt tokens as the embedded engine would make them (the model's own template for
        chat); a count for the prefill rate, not a claim about the server's tokens."""
        tk = self.tokenizer
        assert tk is not None
        if config.chat and tk.chat_template:
            text = apply_chat_template(
                tk.chat_template, config.messages(), bos_token=tk.special_text(tk.bos_id), eos_token=tk.special_text(tk.eos_id)
            )
            return len(tk.tokenize(text, special=True))
        return len(tk.tokenize(config.raw_text(), special=True, add_bos=True))
