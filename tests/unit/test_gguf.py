"""spectui's GGUF metadata reader against llama.cpp's own (``gguf.GGUFReader``), its one-line
errors, and the vocabulary digest both backends share."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from spectui.errors import SpectuiError
from spectui.models.gguf import file_type_name, first_token_difference, first_vocab_difference, read_gguf, vocab_digest


def reference(path) -> tuple[int, dict, dict]:
    """(version, metadata, tensor shapes) as llama.cpp's Python reader sees the file."""
    r = gguf.GGUFReader(path)
    meta = {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}
    shapes = {t.name: tuple(int(d) for d in t.shape) for t in r.tensors}
    return int(r.fields["GGUF.version"].contents()), meta, shapes


def same_values(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return np.float32(a) == np.float32(b)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same_values(x, y) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


@pytest.fixture(scope="module")
def every_type(tmp_path_factory) -> str:
    """A small GGUF with a value of every type, arrays of several, and a few tensors."""
    path = str(tmp_path_factory.mktemp("gguf") / "types.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("every type")
    w.add_file_type(15)
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4_000_000_000)
    w.add_int32("t.i32", -2_000_000_000)
    w.add_float32("t.f32", 0.1)
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -(2**62))
    w.add_float64("t.f64", 1e-300)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo\nwörld ✓")
    w.add_array("t.ints", [1, 2, 3, 2**31 - 1])
    w.add_array("t.floats", [0.5, -1.25])
    w.add_array("t.strs", ["a", "", "ünï"])
    w.add_array("t.empty", [])
    w.add_token_list(["<s>", "Ġthe", "ĠĠ"])
    w.add_token_types([3, 1, 1])
    w.add_tensor("token_embd.weight", np.zeros((3, 8), dtype=np.float32))
    w.add_tensor("blk.0.attn_q.weight", np.zeros((8, 8, 2), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_every_value_type_reads_as_llama_cpp_reads_it(every_type):
    info = read_gguf(every_type)
    version, meta, shapes = reference(every_type)
    assert info.version == version
    assert info.metadata.keys() == meta.keys()
    for key, value in meta.items():
        assert same_values(info.metadata[key], value), (key, info.metadata[key], value)
    assert info.tensor_shapes == shapes
    assert info.n_params == 3 * 8 + 8 * 8 * 2
    assert info.quant == "Q4_K_M" and info.name == "every type" and info.architecture == "llama"


def test_the_embedded_model_reads_as_llama_cpp_reads_it(model_path):
    info = read_gguf(model_path)
    version, meta, shapes = reference(model_path)
    assert info.version == version and info.tensor_shapes == shapes
    assert info.metadata.keys() == meta.keys()
    for key, value in meta.items():
        assert same_values(info.metadata[key], value), key
    assert info.quant == "Q4_1" and len(info.tokens) == 49152 and info.chat_template


def test_file_type_names_come_from_llama_cpp():
    assert [file_type_name(t) for t in (0, 1, 2, 3, 7, 15, 32)] == ["F32", "F16", "Q4_0", "Q4_1", "Q8_0", "Q4_K_M", "BF16"]
    assert file_type_name(9999) == "ftype 9999"


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "not a GGUF file"),
        (b"not a model\n" * 10, "not a GGUF file"),
        (b"GGUF", "corrupt GGUF file"),
        (b"GGUF\x63\x00\x00\x00" + bytes(16), "unsupported GGUF version 99"),
        (b"GGUF\x03\x00\x00\x00" + (1).to_bytes(8, "little") + (1).to_bytes(8, "little") + (2**40).to_bytes(8, "little"), "corrupt GGUF file"),
    ],
)
def test_bad_files_give_one_line(tmp_path, content, message):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(content)
    with pytest.raises(SpectuiError, match=message) as err:
        read_gguf(bad)
    assert "\n" not in str(err.value)


def test_truncated_files_and_other_paths_give_one_line(tmp_path, every_type):
    data = open(every_type, "rb").read()
    for cut in (8, 30, 100, 200, 400, len(data) // 2):
        part = tmp_path / f"cut{cut}.gguf"
        part.write_bytes(data[:cut])
        try:
            read_gguf(part)
        except SpectuiError as exc:
            assert "\n" not in str(exc) and "GGUF" in str(exc)
        else:  # cut inside the tensor data: the metadata is whole, and only the metadata is read
            assert cut >= 400
    with pytest.raises(SpectuiError, match="not found"):
        read_gguf(tmp_path / "missing.gguf")
    with pytest.raises(SpectuiError, match="directory"):
        read_gguf(tmp_path)


def test_vocabulary_digest_and_differences(every_type):
    info = read_gguf(every_type)
    assert info.vocab_sha256() == vocab_digest(["<s>", "Ġthe", "ĠĠ"], [3, 1, 1])
    assert vocab_digest(["a", "b"], [1, 1]) != vocab_digest(["ab"], [1])  # texts are NUL-terminated
    assert first_vocab_difference(info, info) is None
    assert first_token_difference(["a", "b"], ["a", "c"]) == "token id 1 is 'b' in the target but 'c' in the draft"
    assert first_token_difference(["a"], ["a", "b"], "x.gguf", "y.gguf") == (
        "vocabulary sizes differ (1 vs 2): token id 1 exists in only one"
    )


def test_an_unchanged_file_is_parsed_once_a_changed_or_new_one_again(every_type, tmp_path):
    import os
    import shutil

    from spectui.models.gguf import RACY_NS

    copy = str(tmp_path / "copy.gguf")
    shutil.copy(every_type, copy)
    old = os.stat(copy).st_mtime_ns - 2 * RACY_NS
    os.utime(copy, ns=(old, old))  # not modified a moment ago: the cache may keep it
    first = read_gguf(copy)
    assert read_gguf(copy) is first  # unchanged: the same parse, shared
    with open(copy, "r+b") as f:  # a new value of the same size, the time set back as a tool could
        data = f.read()
        at = data.index(b"every type")
        f.seek(at)
        f.write(b"EVERY TYPE")
    os.utime(copy, ns=(old + 1, old + 1))
    assert read_gguf(copy).name == "EVERY TYPE"  # the modification time moved: parsed again
    fresh = str(tmp_path / "fresh.gguf")
    shutil.copy(copy, fresh)  # written just now: inside the clock's grain, never taken from the cache
    assert read_gguf(fresh) is not read_gguf(fresh)


def test_a_vocabulary_opened_again_shares_its_tokenizer_not_its_record(model_path):
    from spectui.server.vocabulary import LocalVocabulary

    a, b = LocalVocabulary.open(model_path, "--target"), LocalVocabulary.open(model_path, "the server's model id")
    assert a.tokenizer is not None and a.tokenizer is b.tokenizer  # built once: a tune opens one per server
    assert a.artifacts == b.artifacts and a.artifacts is not b.artifacts  # a header's copy is its own to change
    assert (a.source, b.source) == ("--target", "the server's model id")
