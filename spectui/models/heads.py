"""Trained draft heads (EAGLE-3, DFlash, DSpark): what a head's GGUF header says, and whether it
fits a target, known before any server starts.

A head is not a model of its own: it reads hidden states the target extracts from some of its
layers and drafts through the target's embeddings (and often its output projection). llama.cpp
checks little of that at load time. In the revision llama-cpp-python 0.3.36 vendors, a head made
for another target either aborts llama-server at start-up (an extract layer past the target's
layers, a DFlash head of another width: ``GGML_ASSERT``) or, worse, starts, reports healthy and
aborts on the first request (an EAGLE-3 head for another hidden size: "embedding size
mismatch"). What llama.cpp reads, and therefore what is checked here:

* the architecture: ``eagle3`` runs as ``--spec-type draft-eagle3``; ``dflash`` as draft-dflash,
  or draft-dspark when it carries DSpark's Markov head (``markov_w1.weight``, the tensor
  llama.cpp's ``common_speculative_types_from_gguf`` tells the two apart by);
* the extract layers, ``<arch>.target_layers`` (llama.cpp's messages call them extract_layers):
  EAGLE-3 takes exactly three; each is the input of that target layer, so it must be below the
  target's layer count (the count itself means the target's final hidden state, which only
  architectures with an MTP or similar head export);
* the target's hidden size: EAGLE-3 records it (``eagle3.target_hidden_size``); a DFlash head's
  features are its own width, so its ``dflash.embedding_length`` must equal the target's;
* DFlash's block size (``dflash.block_size``, 16 when absent) and its mask token
  (``tokenizer.ggml.mask_token_id``: the block is the last token and masks);
* the width of a head without its own token embeddings: it drafts through the target's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from spectui.errors import SpectuiError
from spectui.models.gguf import GGUFInfo, read_gguf
from spectui.recording.schema import HeadArtifacts

#: head architecture -> the GGUF architecture name llama.cpp loads it as
HEAD_ARCHITECTURES = ("eagle3", "dflash")
#: what each kind of head runs as (``--spec-type``)
METHOD_OF_KIND = {"eagle3": "draft-eagle3", "dflash": "draft-dflash", "dspark": "draft-dspark"}
#: what each kind is called in a line a person reads
LABEL_OF_KIND = {"eagle3": "EAGLE-3", "dflash": "DFlash", "dspark": "DSpark"}
#: llama.cpp's default when a DFlash head has no ``dflash.block_size`` (common/speculative.cpp)
DEFAULT_BLOCK_SIZE = 16
#: target architectures whose graph exports the final hidden state (the vendored src/models
#: that set ``t_h_nextn``): only these can give an EAGLE-3 head "layer n_layer"
_FINAL_STATE_ARCHS = frozenset({
    "qwen3next", "qwen35", "qwen35moe", "gemma4", "cohere2moe", "deepseek2", "deepseek32", "deepseek4", "glm4moe",
    "glm-dsa", "glm5-next", "nemotron_h", "nemotron_h_moe", "bailingmoe3", "hy_v3", "gpt-oss", "mimo2", "step35",
})


@dataclass(frozen=True)
class HeadInfo:
    """One head's facts, from its GGUF header."""

    path: str
    architecture: str  # "eagle3" or "dflash"
    kind: str  # "eagle3", "dflash" or "dspark"
    extract_layers: tuple[int, ...]
    #: the hidden size of the target it was made for (EAGLE-3's key; DFlash: its own width)
    target_hidden_size: int
    width: int  # the head's own hidden size (``<arch>.embedding_length``)
    block_size: int = 0  # DFlash/DSpark: the trained block; 0 for EAGLE-3
    draft_vocab: int = 0  # the reduced draft vocabulary of a ``d2t`` map; 0 = the target's
    own_embeddings: bool = False  # ``token_embd.weight``: it does not borrow the target's
    mask_token_id: int | None = None

    @property
    def method(self) -> str:
        return METHOD_OF_KIND[self.kind]

    @property
    def label(self) -> str:
        return LABEL_OF_KIND[self.kind]

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def artifacts(self) -> HeadArtifacts:
        """What a recording's header says of the head that ran."""
        return HeadArtifacts(path=self.path, architecture=self.architecture, kind=self.kind, extract_layers=list(self.extract_layers),
                             block_size=self.block_size, target_hidden_size=self.target_hidden_size, draft_vocab=self.draft_vocab)

    def describe(self) -> str:
        """One phrase: ``EAGLE-3 head, extract layers 2, 15, 27, for hidden size 576``."""
        out = f"{self.label} head, extract layers {', '.join(map(str, self.extract_layers)) or 'none'}, for hidden size {self.target_hidden_size}"
        if self.block_size:
            out += f", block size {self.block_size}"
        if self.draft_vocab:
            out += f", draft vocabulary {self.draft_vocab:,}"
        return out


def is_head(info: GGUFInfo) -> bool:
    return info.architecture in HEAD_ARCHITECTURES


def head_of(info: GGUFInfo) -> HeadInfo | None:
    """The head ``info`` describes, or None when it is not a head's GGUF."""
    arch = info.architecture
    if arch not in HEAD_ARCHITECTURES:
        return None
    meta = info.metadata
    layers = meta.get(f"{arch}.target_layers") or []
    extract = tuple(int(x) for x in layers) if isinstance(layers, list) else ()
    width = _int(meta.get(f"{arch}.embedding_length"))
    d2t = info.tensor_shapes.get("d2t")
    mask = meta.get("tokenizer.ggml.mask_token_id")
    if arch == "eagle3":
        return HeadInfo(info.path, arch, "eagle3", extract, _int(meta.get("eagle3.target_hidden_size")), width,
                        draft_vocab=int(d2t[0]) if d2t else 0, own_embeddings="token_embd.weight" in info.tensor_shapes,
                        mask_token_id=_opt_int(mask))
    kind = "dspark" if "markov_w1.weight" in info.tensor_shapes else "dflash"
    return HeadInfo(info.path, arch, kind, extract, width, width, block_size=_int(meta.get("dflash.block_size")) or DEFAULT_BLOCK_SIZE,
                    draft_vocab=int(d2t[0]) if d2t else 0, own_embeddings="token_embd.weight" in info.tensor_shapes,
                    mask_token_id=_opt_int(mask))


def read_head(path: str | os.PathLike[str]) -> HeadInfo | None:
    return head_of(read_gguf(path))


def is_head_file(path: str) -> bool:
    """Whether ``path`` is a head's GGUF (False for anything else, a missing file included)."""
    if not path.lower().endswith(".gguf") or not os.path.isfile(path):
        return False
    try:
        return read_head(path) is not None
    except SpectuiError:
        return False


def target_shape(target: GGUFInfo) -> tuple[int, int]:
    """(hidden size, layers) of a target, from ``<arch>.embedding_length`` / ``block_count``;
    the nextn (MTP) blocks a GGUF counts in its blocks are not layers a head reads."""
    arch = target.architecture
    blocks = _int(target.metadata.get(f"{arch}.block_count"))
    nextn = _int(target.metadata.get(f"{arch}.nextn_predict_layers"))
    return _int(target.metadata.get(f"{arch}.embedding_length")), blocks - nextn


def misfit(head: HeadInfo, target: GGUFInfo) -> str | None:
    """Why ``head`` cannot draft for ``target`` (one clause naming both numbers), or None."""
    tname = os.path.basename(target.path)
    if is_head(target):
        return f"{tname} is itself a head ({target.architecture}), not a target"
    hidden, n_layer = target_shape(target)
    if head.kind == "eagle3" and len(head.extract_layers) != 3:
        return f"an EAGLE-3 head takes exactly 3 extract layers; {head.name} lists {len(head.extract_layers)}"
    if not head.extract_layers:
        return f"{head.name} lists no extract layers ({head.architecture}.target_layers)"
    if hidden and head.target_hidden_size != hidden:
        what = "was made for a target of hidden size" if head.kind == "eagle3" else "is"
        unit = "" if head.kind == "eagle3" else " wide"
        return f"{head.name} {what} {head.target_hidden_size}{unit}; {tname} has hidden size {hidden}"
    if hidden and not head.own_embeddings and head.width != hidden:
        return (f"{head.name} is {head.width} wide and has no token embeddings of its own, so it drafts through "
                f"{tname}'s, which are {hidden} wide")
    if n_layer:
        top = n_layer if head.kind == "eagle3" and target.architecture in _FINAL_STATE_ARCHS else n_layer - 1
        beyond = [i for i in head.extract_layers if i < 0 or i > top]
        if beyond:
            return f"{head.name} extracts layer {beyond[0]}; {tname} has {n_layer} layers (0-{top})"
    if head.kind != "eagle3" and head.mask_token_id is None:
        return f"{head.name} has no mask token (tokenizer.ggml.mask_token_id), which a {head.label} block is made of"
    return None


def wrong_method(head: HeadInfo, method: str) -> str | None:
    """Why ``method`` (a ``--spec-type``) cannot run ``head``, naming the one that does, or None."""
    if method == head.method:
        return None
    return f"{head.name} is a {head.label} head: it drafts with --draft runtime:{head.method}, not {method}"


def _int(value: object) -> int:
    """A header value as an int, 0 for what is not a number (a head made by another tool)."""
    if not isinstance(value, (int, float, str)):
        return 0
    try:
        return int(value)
    except ValueError:
        return 0


def _opt_int(value: object) -> int | None:
    return None if value is None else _int(value)
