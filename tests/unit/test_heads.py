"""Trained draft heads known before a server starts: a head's GGUF header read (architecture,
extract layers, hidden size, block size), a head that does not fit the target or is given to
another method refused in one line, `spectui models` listing heads beside the targets they fit.

The heads are real GGUF files written for the embedded target (tests/runtime/tiny_heads.py);
no server starts and no model loads here: the llama-server given does not exist, so a refusal
that came after looking for a binary would name the binary instead.
"""

from __future__ import annotations

import json

import msgspec
import pytest

from spectui.errors import SpectuiError
from spectui.models.gguf import read_gguf
from spectui.models.heads import head_of, misfit, read_head, wrong_method
from spectui.recording.schema import Artifacts, Header
from spectui.runtime.methods import RuntimeMethod
from tests.conftest import run_cli


def test_each_heads_header_says_what_it_is(tiny_heads, model_path):
    eagle = read_head(tiny_heads["eagle3"])
    assert eagle is not None and (eagle.kind, eagle.method, eagle.extract_layers) == ("eagle3", "draft-eagle3", (2, 15, 27))
    assert (eagle.target_hidden_size, eagle.block_size, eagle.draft_vocab) == (576, 0, 0)
    d2t = read_head(tiny_heads["eagle3-d2t"])
    assert d2t is not None and d2t.draft_vocab == 2048
    dflash, dspark = read_head(tiny_heads["dflash"]), read_head(tiny_heads["dspark"])
    assert dflash is not None and (dflash.kind, dflash.method, dflash.block_size, dflash.mask_token_id) == ("dflash", "draft-dflash", 4, 0)
    # DSpark is a dflash file with the Markov head, as llama.cpp tells them apart
    assert dspark is not None and (dspark.architecture, dspark.kind, dspark.method) == ("dflash", "dspark", "draft-dspark")
    assert read_head(model_path) is None  # a model, not a head


@pytest.mark.parametrize("name", ["eagle3", "eagle3-d2t", "eagle3-keep", "dflash", "dspark"])
def test_the_heads_made_for_the_embedded_target_fit_it(tiny_heads, model_path, name):
    head = read_head(tiny_heads[name])
    assert head is not None and misfit(head, read_gguf(model_path)) is None


@pytest.mark.parametrize("name, numbers", [
    ("eagle3-hidden-512", ("512", "576")),  # llama-server would start, then abort on the first request
    ("eagle3-layer-31", ("31", "30 layers")),  # llama-server would abort at start-up
    ("dflash-512", ("512", "576")),  # GGML_ASSERT at start-up
])
def test_a_misfit_names_both_numbers(tiny_heads, model_path, name, numbers):
    head = read_head(tiny_heads[name])
    assert head is not None
    why = misfit(head, read_gguf(model_path))
    assert why is not None and all(n in why for n in numbers), why


def test_a_head_given_to_another_method_names_its_own(tiny_heads):
    eagle, dspark = read_head(tiny_heads["eagle3"]), read_head(tiny_heads["dspark"])
    assert eagle is not None and dspark is not None
    assert "--draft runtime:draft-eagle3" in (wrong_method(eagle, "draft-simple") or "")
    assert "--draft runtime:draft-dspark" in (wrong_method(dspark, "draft-dflash") or "")
    assert wrong_method(eagle, "draft-eagle3") is None


@pytest.mark.parametrize("method, name, words", [
    ("draft-eagle3", "eagle3-hidden-512", ("512", "576")),
    ("draft-eagle3", "eagle3-layer-31", ("31", "30 layers")),
    ("draft-dflash", "dflash-512", ("512", "576")),
    ("draft-simple", "eagle3", ("runtime:draft-eagle3",)),
    ("draft-dflash", "eagle3", ("runtime:draft-eagle3",)),
    ("draft-eagle3", "dspark", ("runtime:draft-dspark",)),
])
def test_the_method_check_refuses_in_one_line(tiny_heads, model_path, method, name, words):
    with pytest.raises(SpectuiError) as err:
        RuntimeMethod.parse(method, draft_model=tiny_heads[name]).check(model_path)
    line = str(err.value)
    assert "\n" not in line and all(w in line for w in words), line


def test_run_refuses_a_misfit_before_looking_for_a_server(tiny_heads, tmp_path):
    missing = str(tmp_path / "no-llama-server")
    proc = run_cli("run", "--runtime", "llama-server", "--llama-server", missing, "--draft", "runtime:draft-eagle3",
                   "--draft-model", tiny_heads["eagle3-hidden-512"], "--max-tokens", "8", "--prompt", "hi")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "512" in lines[0] and "576" in lines[0] and "no-llama-server" not in lines[0]


def test_run_names_the_method_a_head_runs_as(tiny_heads, tmp_path):
    proc = run_cli("run", "--runtime", "llama-server", "--llama-server", str(tmp_path / "none"), "--draft", "runtime:draft-simple",
                   "--draft-model", tiny_heads["eagle3"], "--max-tokens", "8", "--prompt", "hi")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "runtime:draft-eagle3" in proc.stderr


def test_models_lists_the_heads_beside_the_target_they_fit(tiny_heads):
    import os

    folder = os.path.dirname(tiny_heads["eagle3"])
    doc = json.loads(run_cli("models", folder, "--json").stdout)
    embedded = next(m for m in doc["models"] if m["source"] == "embedded")
    heads = {h["name"]: h["method"] for h in embedded["heads"]}
    # the misfits (hidden size 512, layer 31, 512 wide) are not listed
    assert heads == {"eagle3": "draft-eagle3", "eagle3-d2t": "draft-eagle3", "eagle3-keep": "draft-eagle3",
                     "dflash": "draft-dflash", "dspark": "draft-dspark"}
    # a head shares the target's vocabulary, but it is no draft model, and no target
    head_names = {m["name"] for m in doc["models"] if m["architecture"] in ("eagle3", "dflash")}
    assert len(head_names) == 8 and not head_names & set(embedded["drafts"])
    assert all(not m["heads"] and not m["drafts"] for m in doc["models"] if m["name"] in head_names)
    text = run_cli("models", folder).stdout
    assert "head (draft-eagle3): eagle3-keep" in text and "head (draft-dspark): dspark" in text
    assert "): eagle3-hidden-512" not in text


def test_the_header_records_the_head_and_older_headers_read_without_one(tiny_heads):
    head = read_head(tiny_heads["dflash"])
    assert head is not None
    header = Header(artifacts=Artifacts(head=head.artifacts()))
    back = msgspec.msgpack.decode(msgspec.msgpack.encode(header), type=Header)
    assert back.artifacts.head is not None
    assert (back.artifacts.head.kind, back.artifacts.head.extract_layers, back.artifacts.head.block_size) == ("dflash", [2, 15, 27], 4)
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(Header()), type=Header).artifacts.head is None


def test_a_model_is_not_a_head(model_path):
    assert head_of(read_gguf(model_path)) is None


def test_mlx_lm_refuses_a_head_and_names_the_runtime_that_runs_it(tiny_heads):
    from spectui.runtime.mlx_lm_server import MlxMethod

    with pytest.raises(SpectuiError, match="--runtime llama-server --draft runtime:draft-dflash"):
        MlxMethod.parse("runtime:draft-model", draft_model=tiny_heads["dflash"])


def test_the_dashboards_switch_keeps_a_head_for_llama_server_only(tiny_heads):
    from spectui.config import BackendConfig, RunConfig
    from spectui.drafting import DraftConfig, Fixed, Runtime
    from spectui.ui.backends import BackendCycle

    on_head = DraftConfig(drafter=Runtime(method="draft-eagle3", draft_model=tiny_heads["eagle3"]), length=Fixed(k=3))
    cycle = BackendCycle(RunConfig(prompt="x", backend=BackendConfig(name="llama-server"), draft=on_head))
    # no embedded backend runs a head: spectui's default drafter there, with the K it had
    assert (cycle.embedded_draft.flag, cycle.embedded_draft.fixed_k) == ("ngram", 3)
    assert cycle.runtime_draft("llama-server", "spec") == on_head  # and the head again on the way back
