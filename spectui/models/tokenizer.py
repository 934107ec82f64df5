"""A tokenizer rebuilt from GGUF metadata (or read from an mlx-lm / Hugging Face directory).

The MLX backend has no llama.cpp to tokenize with, yet speculative exactness across backends
starts with identical token ids. A GGUF carries everything a byte-level BPE needs: the
vocabulary, the merges, the token types (control / user-defined) and the name of the
pre-tokenizer. Here they become a ``tokenizers`` BPE whose splitting follows llama.cpp's own
pre-tokenizer table (``llama-vocab.cpp``), whose added tokens are parsed the way
``llama_tokenize`` parses them, and whose end-of-generation set follows llama.cpp's rules,
so that ids, pieces and stop tokens match the llama.cpp backend (tested on the prompts in
``tests/backends/test_mlx.py``).

Only GPT-2 style byte-level BPE vocabularies (``tokenizer.ggml.model == "gpt2"``) are
rebuilt from GGUF; a SentencePiece GGUF is refused with one line rather than tokenized
approximately. A directory's ``tokenizer.json`` is used as it is, whatever its kind.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from spectui.errors import SpectuiError
from spectui.models.gguf import vocab_digest

# llama.cpp's token types (``tokenizer.ggml.token_type``)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_LLAMA3 = (
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2 = (
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_DEFAULT = [r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"]

#: ``tokenizer.ggml.pre`` -> (regexes applied in turn, ignore_merges), as in llama-vocab.cpp
PRE_TOKENIZERS: dict[str, tuple[list[str], bool]] = {}
for _names, _rule in (
    (("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"), ([r"\p{N}", _GPT2], False)),
    (("gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais", "trillion"), ([_GPT2], False)),
    (("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "dbrx", "smaug-bpe"), ([_LLAMA3], True)),
    (("chatglm-bpe",), ([_LLAMA3], False)),
    (("qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan"), ([_QWEN2], False)),
    (("default",), (_DEFAULT, False)),
):
    for _name in _names:
        PRE_TOKENIZERS[_name] = _rule

# Token texts llama.cpp treats as end of generation, and the fill-in-the-middle tokens it adds
# to that set (llama-vocab.cpp, "maintain a list of tokens that cause end-of-generation").
EOG_TEXTS = frozenset({
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>",
    "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
})
FIM_EOG_TEXTS = (
    ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"),  # FIM pad
    ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),  # FIM repo
    ("<|file_sep|>",),  # FIM separator
)


@lru_cache(maxsize=1)
def byte_decoder() -> dict[str, int]:
    """GPT-2's printable stand-ins for bytes, reversed: the character ``Ġ`` is byte 0x20."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars)}


class TextTokenizer:
    """Token ids, raw token bytes and special tokens for one vocabulary.

    ``tokenize`` follows ``llama_tokenize``: ``special=True`` parses control tokens such as
    ``<|im_start|>`` out of the text, ``special=False`` spells them out as text; user-defined
    tokens are always parsed. ``add_bos`` adds BOS only where the vocabulary asks for it.
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        tokens: list[str],
        types: list[int],
        bos_id: int | None,
        eos_id: int | None,
        add_bos: bool,
        extra_eog: Iterable[int] = (),
        chat_template: str | None,
        byte_level: bool,
        hash_types: list[int] | None = None,
    ) -> None:
        self._tk = tokenizer
        self.tokens = tokens
        self.types = types
        self.n_vocab = len(tokens)
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.add_bos = add_bos
        self.chat_template = chat_template
        self.byte_level = byte_level
        self.eog_tokens = self._eog(extra_eog)
        # the vocabulary digest uses the types as the file stores them (GGUFInfo.vocab_sha256)
        self._hash_types = hash_types if hash_types is not None else types
        # encode_special_tokens is a switch on the shared Rust tokenizer: flip it under a lock
        self._lock = threading.Lock()
        self._pieces: dict[int, bytes] = {}

    def _eog(self, extra: Iterable[int]) -> frozenset[int]:
        ids = {t: i for i, t in enumerate(self.tokens)}
        eog = {ids[t] for t in EOG_TEXTS if t in ids}
        for names in FIM_EOG_TEXTS:
            for name in names:
                if name in ids:
                    eog.add(ids[name])
                    break
        eog.update(i for i in (self.eos_id, *extra) if i is not None and 0 <= i < self.n_vocab)
        return frozenset(eog)

    # -- protocol-facing ---------------------------------------------------------------

    def tokenize(self, text: str, *, special: bool = True, add_bos: bool = False) -> list[int]:
        with self._lock:
            self._tk.encode_special_tokens = not special
            ids = self._tk.encode(text, add_special_tokens=False).ids
        if add_bos and self.add_bos and self.bos_id is not None:
            ids.insert(0, self.bos_id)
        return ids

    def piece(self, token: int) -> bytes:
        """The token's bytes as llama.cpp renders them (control tokens as their text)."""
        cached = self._pieces.get(token)
        if cached is not None:
            return cached
        if not 0 <= token < self.n_vocab:
            return b""
        text = self.tokens[token]
        kind = self.types[token]
        if kind in (CONTROL, USER_DEFINED, UNKNOWN):
            out = text.encode("utf-8", "surrogatepass")
        elif self.byte_level:
            table = byte_decoder()
            try:
                out = bytes(table[c] for c in text)
            except KeyError:  # a character outside GPT-2's byte alphabet: keep it as UTF-8
                out = text.encode("utf-8", "surrogatepass")
        elif kind == BYTE or (len(text) == 6 and text.startswith("<0x") and text.endswith(">")):
            out = bytes([int(text[3:5], 16)])
        else:  # SentencePiece: U+2581 stands for a space
            out = text.replace("\u2581", " ").encode("utf-8", "surrogatepass")
        self._pieces[token] = out
        return out

    def special_text(self, token: int | None) -> str:
        return self.tokens[token] if token is not None and 0 <= token < self.n_vocab else ""

    def vocab_sha256(self) -> str:
        return vocab_digest(self.tokens, self._hash_types)

    # -- constructors --------------------------------------------------------------------

    @classmethod
    def from_gguf(cls, metadata: Mapping[str, Any]) -> TextTokenizer:
        from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

        kind = metadata.get("tokenizer.ggml.model")
        if kind != "gpt2":
            raise SpectuiError(
                f"the MLX backend rebuilds only byte-level BPE (gpt2) tokenizers from GGUF; this file's is {kind!r}. "
                "Use an mlx-lm model directory, or --backend llamacpp"
            )
        pre = str(metadata.get("tokenizer.ggml.pre", "default"))
        if pre not in PRE_TOKENIZERS:
            raise SpectuiError(f"the GGUF pre-tokenizer {pre!r} is not supported by the MLX backend yet; use --backend llamacpp")
        regexes, ignore_merges = PRE_TOKENIZERS[pre]
        tokens = [str(t) for t in metadata["tokenizer.ggml.tokens"]]
        stored = [int(t) for t in metadata.get("tokenizer.ggml.token_type", [NORMAL] * len(tokens))]
        # llama.cpp forces the texts it treats as end-of-generation to control tokens
        forced = EOG_TEXTS.union(*FIM_EOG_TEXTS)
        types = [CONTROL if t in forced else kind_ for t, kind_ in zip(tokens, stored)]
        merges = [tuple(m.split(" ", 1)) for m in metadata.get("tokenizer.ggml.merges", [])]
        model = models.BPE(
            vocab={t: i for i, t in enumerate(tokens)},
            merges=merges,
            fuse_unk=False,
            byte_fallback=False,
            ignore_merges=ignore_merges,
        )
        tk = Tokenizer(model)
        # llama.cpp applies its regexes in turn, each splitting the previous pieces; the last
        # step maps bytes to GPT-2's printable alphabet without a regex of its own
        tk.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in regexes]
            + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        )
        tk.decoder = decoders.ByteLevel()
        tk.add_tokens([AddedToken(t, special=False, normalized=False) for t, k in zip(tokens, types) if k == USER_DEFINED])
        tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, k in zip(tokens, types) if k == CONTROL])
        bos = metadata.get("tokenizer.ggml.bos_token_id")
        eos = metadata.get("tokenizer.ggml.eos_token_id")
        extra = [metadata.get(k) for k in ("tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")]
        return cls(
            tk,
            tokens=tokens,
            types=types,
            bos_id=None if bos is None else int(bos),
            eos_id=None if eos is None else int(eos),
            add_bos=bool(metadata.get("tokenizer.ggml.add_bos_token", pre in ("llama3", "llama-v3", "llama-bpe"))),
            extra_eog=[int(x) for x in extra if x is not None],
            chat_template=metadata.get("tokenizer.chat_template"),
            byte_level=True,
            hash_types=stored,
        )

    @classmethod
    def from_dir(cls, path: str, config: Mapping[str, Any] | None = None) -> TextTokenizer:
        """A Hugging Face ``tokenizer.json`` (+ ``tokenizer_config.json``) in ``path``."""
        from tokenizers import Tokenizer

        tj = os.path.join(path, "tokenizer.json")
        if not os.path.isfile(tj):
            raise SpectuiError(f"no tokenizer.json in {path}: spectui needs a fast (tokenizers) tokenizer")
        tk = Tokenizer.from_file(tj)
        tcfg = _read_json(os.path.join(path, "tokenizer_config.json"))
        vocab = tk.get_vocab(with_added_tokens=True)
        n = max(vocab.values()) + 1
        if config and int(config.get("vocab_size") or 0) > n:
            n = int(config["vocab_size"])  # padded embedding rows: ids no text maps to
        tokens = [""] * n
        for text, i in vocab.items():
            tokens[i] = text
        types = [NORMAL] * n
        for i, added in tk.get_added_tokens_decoder().items():
            types[i] = CONTROL if added.special else USER_DEFINED
        byte_level = _decoder_is_byte_level(tj)
        if not byte_level:
            for i, t in enumerate(tokens):
                if types[i] == NORMAL and len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
                    types[i] = BYTE

        def token_id(name: str) -> int | None:
            value = tcfg.get(name)
            if isinstance(value, dict):
                value = value.get("content")
            return vocab.get(value) if isinstance(value, str) else None

        eos_ids = (config or {}).get("eos_token_id")
        eos_ids = [eos_ids] if isinstance(eos_ids, int) else list(eos_ids or [])
        eos = token_id("eos_token")
        template = tcfg.get("chat_template")
        jinja = os.path.join(path, "chat_template.jinja")
        if template is None and os.path.isfile(jinja):
            with open(jinja, encoding="utf-8") as f:
                template = f.read()
        if isinstance(template, list):  # several named templates: take the default one
            template = next((t.get("template") for t in template if t.get("name") == "default"), None)
        bos = token_id("bos_token")
        add_bos = tcfg.get("add_bos_token")
        if add_bos is None:  # no flag: ask the tokenizer's own post-processor whether it adds BOS
            add_bos = bos is not None and tk.encode("a", add_special_tokens=True).ids[:1] == [bos]
        return cls(
            tk,
            tokens=tokens,
            types=types,
            bos_id=bos,
            eos_id=eos if eos is not None else (eos_ids[0] if eos_ids else None),
            add_bos=bool(add_bos),
            extra_eog=eos_ids,
            chat_template=template,
            byte_level=byte_level,
        )

    # -- export --------------------------------------------------------------------------

    def save(self, out_dir: str) -> None:
        """Write ``tokenizer.json`` and ``tokenizer_config.json`` (with the chat template)."""
        self._tk.encode_special_tokens = False
        self._tk.save(os.path.join(out_dir, "tokenizer.json"))
        added = {}
        for i, kind in enumerate(self.types):
            if kind in (CONTROL, USER_DEFINED):
                added[str(i)] = {
                    "content": self.tokens[i], "lstrip": False, "normalized": False, "rstrip": False,
                    "single_word": False, "special": kind == CONTROL,
                }
        config = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "added_tokens_decoder": added,
            "bos_token": self.special_text(self.bos_id) or None,
            "eos_token": self.special_text(self.eos_id) or None,
            "add_bos_token": self.add_bos,
            "add_eos_token": False,
            "clean_up_tokenization_spaces": False,
            "model_max_length": 1 << 30,
        }
        if self.chat_template:
            config["chat_template"] = self.chat_template
        with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2, ensure_ascii=False)


def _read_json(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise SpectuiError(f"cannot read {path}: {exc}") from None


def _decoder_is_byte_level(tokenizer_json: str) -> bool:
    decoder = (_read_json(tokenizer_json) or {}).get("decoder") or {}
    if decoder.get("type") == "Sequence":
        return any(d.get("type") == "ByteLevel" for d in decoder.get("decoders", []))
    return decoder.get("type") == "ByteLevel"
