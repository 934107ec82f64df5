"""llama-server's methods: K and p-min land on the flag each --spec-type reads, what a method
ignores is said, and what cannot work is refused in one line from the GGUF headers.

No server starts here (the headers are read, nothing is loaded); the flags are checked against
a real llama-server in test_server.py.
"""

from __future__ import annotations

import shutil

import pytest

from spectui.errors import SpectuiError
from spectui.models.gguf import GGUFInfo, read_gguf
from spectui.runtime.methods import METHODS, RuntimeMethod, no_nextn_reason


def flags(method: RuntimeMethod) -> dict[str, str]:
    args = method.args()
    return dict(zip(args[::2], args[1::2]))


def test_every_spec_type_of_the_vendored_revision_is_a_method():
    assert list(METHODS) == ["none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark",
                             "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache"]


@pytest.mark.parametrize("name, k_flag, lookup_flag", [
    ("ngram-simple", "--spec-ngram-simple-size-m", "--spec-ngram-simple-size-n"),
    ("ngram-map-k", "--spec-ngram-map-k-size-m", "--spec-ngram-map-k-size-n"),
    ("ngram-map-k4v", "--spec-ngram-map-k4v-size-m", "--spec-ngram-map-k4v-size-n"),
    ("ngram-mod", "--spec-ngram-mod-n-max", "--spec-ngram-mod-n-match"),
])
def test_k_lands_on_the_ngram_types_own_flag_not_draft_n_max(name, k_flag, lookup_flag):
    got = flags(RuntimeMethod.parse(f"runtime:{name}", k=8, lookup=3, p_min=0.5))
    assert got["--spec-type"] == name
    assert got[k_flag] == "8" and got[lookup_flag] == "3"
    assert "--spec-draft-n-max" not in got and "--spec-draft-p-min" not in got
    assert f"{name} ignores p-min" in RuntimeMethod.parse(name, k=8, p_min=0.5).ignored()


def test_ngram_mods_n_min_is_its_own_unless_given_and_never_above_k():
    # its own n-min (48) above K: only full blocks of K, as for a person passing that n-max by hand
    m = RuntimeMethod.parse("ngram-mod", k=8)
    assert "--spec-ngram-mod-n-min" not in flags(m) and "its n-min 48: only full blocks of 8" in m.describe()
    assert flags(RuntimeMethod.parse("ngram-mod", k=8, n_min=2))["--spec-ngram-mod-n-min"] == "2"
    assert flags(RuntimeMethod.parse("ngram-mod", k=8, n_min=20))["--spec-ngram-mod-n-min"] == "8"


def test_model_drafters_read_draft_n_max_min_and_p_min(tmp_path):
    got = flags(RuntimeMethod.parse("draft-simple", k=6, n_min=9, p_min=0.75, draft_model="d.gguf"))
    assert got == {"--spec-type": "draft-simple", "--spec-draft-n-max": "6", "--spec-draft-n-min": "6",
                   "--spec-draft-p-min": "0.75", "-md": "d.gguf"}
    assert flags(RuntimeMethod.parse("draft-mtp", k=2))["--spec-draft-n-max"] == "2"
    assert RuntimeMethod.parse("draft-mtp", k=2, lookup=4).ignored() == ["draft-mtp ignores lookup length"]


def test_ngram_cache_has_no_k_and_says_so():
    m = RuntimeMethod.parse("ngram-cache", k=4)
    assert flags(m) == {"--spec-type": "ngram-cache"}
    assert m.ignored() == ["ngram-cache ignores K (it drafts 8 tokens, fixed)"]
    assert "8 tokens, fixed" in m.describe()


def test_a_combination_maps_each_part_and_none_passes_nothing():
    got = flags(RuntimeMethod.parse("ngram-mod,draft-simple", k=5, draft_model="d.gguf"))
    assert got["--spec-type"] == "ngram-mod,draft-simple"
    assert got["--spec-ngram-mod-n-max"] == "5" and got["--spec-draft-n-max"] == "5"
    assert RuntimeMethod.parse("none").args() == []


@pytest.mark.parametrize("text, message", [
    ("runtime:ngram-fancy", "unknown llama-server method 'ngram-fancy'"),
    ("runtime:", "no runtime method"),
    ("none,ngram-mod", "'none' cannot be combined"),
])
def test_bad_names_are_one_line(text, message):
    with pytest.raises(SpectuiError, match=message) as err:
        RuntimeMethod.parse(text)
    assert "\n" not in str(err.value)


def test_bad_settings_are_one_line():
    with pytest.raises(SpectuiError, match="K must be at least 1"):
        RuntimeMethod.parse("ngram-mod", k=0)
    with pytest.raises(SpectuiError, match="p-min must be between 0 and 1"):
        RuntimeMethod.parse("draft-simple", p_min=1.5)
    with pytest.raises(SpectuiError, match="ngram-mod takes no draft model"):
        RuntimeMethod.parse("ngram-mod", draft_model="d.gguf")


# -- refused from the GGUF headers --------------------------------------------------------------


def test_draft_mtp_on_a_target_without_nextn_layers_is_refused_in_one_line(model_path, tiny_no_mtp):
    for target in (model_path, tiny_no_mtp):
        with pytest.raises(SpectuiError, match="draft-mtp needs multi-token-prediction") as err:
            RuntimeMethod.parse("draft-mtp").check(target)
        assert "nextn_predict_layers is absent or 0" in str(err.value) and "\n" not in str(err.value)


def test_draft_mtp_on_the_tiny_mtp_model_passes(tiny_mtp):
    info = read_gguf(tiny_mtp)
    assert no_nextn_reason(info) == ""
    RuntimeMethod.parse("draft-mtp").check(tiny_mtp)


def test_a_declared_nextn_block_without_its_weights_is_refused(tiny_mtp):
    info = read_gguf(tiny_mtp)
    stripped = GGUFInfo(info.path, info.version, info.metadata,
                        {k: v for k, v in info.tensor_shapes.items() if ".nextn." not in k})
    assert "holds no blk.2.nextn.eh_proj.weight" in no_nextn_reason(stripped)


def test_eagle3_and_dflash_need_a_draft_of_their_architecture(model_path, draft_copy_header):
    for name, arch in (("draft-eagle3", "eagle3"), ("draft-dflash", "dflash"), ("draft-dspark", "dflash")):
        with pytest.raises(SpectuiError, match=f"{name} needs a draft of architecture {arch}.*is llama"):
            RuntimeMethod.parse(name, draft_model=draft_copy_header).check(model_path)
        with pytest.raises(SpectuiError, match=f"{name} needs a draft model"):
            RuntimeMethod.parse(name).check(model_path)


def test_draft_simple_checks_the_vocabulary_as_llama_cpp_pairs_them(model_path, draft_copy_header, other_vocab):
    RuntimeMethod.parse("draft-simple", draft_model=draft_copy_header).check(model_path)
    with pytest.raises(SpectuiError, match="cannot draft for .*token id 5 is") as err:
        RuntimeMethod.parse("draft-simple", draft_model=other_vocab).check(model_path)
    assert "\n" not in str(err.value)


def test_a_type_the_binary_does_not_list_is_refused(model_path):
    with pytest.raises(SpectuiError, match="does not accept --spec-type ngram-mod"):
        RuntimeMethod.parse("ngram-mod").check(model_path, accepted=("none", "ngram-simple"))


@pytest.fixture(scope="module")
def draft_copy_header(model_path, tmp_path_factory) -> str:
    """A byte copy of the embedded model: the headers are all these checks read."""
    dst = tmp_path_factory.mktemp("draft") / "draft.gguf"
    shutil.copyfile(model_path, dst)
    return str(dst)


@pytest.fixture(scope="module")
def other_vocab(model_path, tmp_path_factory) -> str:
    """A GGUF whose vocabulary differs from the embedded model's from token id 5 on."""
    import gguf

    meta = read_gguf(model_path).metadata
    tokens = list(meta["tokenizer.ggml.tokens"])
    tokens[5:] = [f"<other {i}>" for i in range(5, len(tokens))]
    path = tmp_path_factory.mktemp("vocab") / "other.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model(meta["tokenizer.ggml.model"])
    w.add_token_list(tokens)
    w.add_token_types(list(meta["tokenizer.ggml.token_type"]))
    for key in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"):
        if key in meta:
            w.add_uint32(key, int(meta[key]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)
