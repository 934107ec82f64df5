"""Draft/target vocabularies pair by llama.cpp's rule (``spectui.models.vocab``): the Qwen2.5
sizes (151,936 for 0.5B/1.5B, 152,064 padded for 7B and up) pair; a changed shared token is
refused with the token named, by the engine and by the catalogue alike. The files are GGUF
headers written with llama.cpp's ``gguf`` writer (no model is loaded)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spectui.config import RunConfig
from spectui.drafting import DraftConfig, Model
from spectui.errors import SpectuiError
from spectui.models.catalogue import discover
from spectui.models.gguf import read_gguf
from spectui.models.vocab import VocabFacts, VocabSignature, draft_incompatibility

SMALL, PADDED = 151_936, 152_064


def _tokens(n: int) -> list[str]:
    return [f"<|ctl{i}|>" if i < 5 else f"tok{i}" for i in range(n)]


def write_header(path: Path, tokens: list[str], *, n_params: int) -> Path:
    """A GGUF with a Qwen2-like tokenizer and one tensor of ``n_params`` values."""
    import gguf

    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_name(path.stem)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([1] * len(tokens))
    w.add_bos_token_id(151643)
    w.add_eos_token_id(151645)
    w.add_add_bos_token(False)
    w.add_tensor("token_embd.weight", np.zeros(n_params, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def qwen_like(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("vocab")
    changed = _tokens(SMALL)
    changed[151_000] = "tok151000-changed"
    return {
        "target": write_header(folder / "qwen-32b-like.gguf", _tokens(PADDED), n_params=64),
        "draft": write_header(folder / "qwen-1.5b-like.gguf", _tokens(SMALL), n_params=8),
        "changed": write_header(folder / "other-1.5b-like.gguf", changed, n_params=8),
    }


def _facts(path: Path) -> VocabFacts:
    return VocabFacts.from_gguf(read_gguf(path).metadata)


def test_padded_vocabulary_pairs_with_the_smaller_one(qwen_like):
    target, draft = _facts(qwen_like["target"]), _facts(qwen_like["draft"])
    assert (len(target.tokens), len(draft.tokens)) == (PADDED, SMALL)
    assert draft_incompatibility(target, draft) is None
    assert draft_incompatibility(draft, target) is None  # either way round
    assert VocabSignature.of(draft).incompatibility(VocabSignature.of(target)) is None


def test_a_changed_shared_token_is_refused_with_the_token_named(qwen_like):
    reason = draft_incompatibility(_facts(qwen_like["target"]), _facts(qwen_like["changed"]))
    assert reason is not None and "token id 151000" in reason and "tok151000-changed" in reason


def test_engine_load_refuses_the_changed_draft_naming_the_token(qwen_like):
    from spectui.engine.embedded import Engine

    config = RunConfig(target=str(qwen_like["target"]), mode="spec", prompt="x", draft=DraftConfig(drafter=Model(path=str(qwen_like["changed"]))))
    with pytest.raises(SpectuiError, match=r"vocabularies differ: token id 151000 is 'tok151000' in qwen-32b-like.gguf but 'tok151000-changed'"):
        Engine.load(config)


@pytest.mark.slow  # it reaches llama.cpp's loader (which refuses a file without weights)
def test_engine_load_passes_the_vocabulary_check_for_the_padded_pair(qwen_like):
    """The pair gets past the vocabulary check; loading then fails only because these files
    carry no weights (llama.cpp's own error, not a vocabulary refusal)."""
    from spectui.engine.embedded import Engine

    config = RunConfig(target=str(qwen_like["target"]), mode="spec", prompt="x", draft=DraftConfig(drafter=Model(path=str(qwen_like["draft"]))))
    with pytest.raises(SpectuiError) as err:
        Engine.load(config)
    assert "vocabular" not in str(err.value) and "could not load" in str(err.value)


def test_catalogue_pairs_by_the_same_rule(qwen_like):
    cat = discover([str(qwen_like["target"].parent)], env={})
    by_path = {m.path: m for m in cat.models}
    target = by_path[str(qwen_like["target"])]
    drafts = [m.path for m in cat.drafts_for(target)]
    assert str(qwen_like["draft"]) in drafts
    assert str(qwen_like["changed"]) not in drafts
