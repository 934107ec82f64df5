"""The catalogue on a real model family, from the real files' headers.

``tests/data/headers`` holds the metadata and tensor tables of Qwen2.5-Coder-1.5B-Instruct
(Q4_K_M), Qwen2.5-Coder-0.5B-Instruct (the pair of benchmarks/real_pair.py) and the embedded
SmolLM2-135M, cut from the files themselves (``tests/data/make_pair_headers.py``): the real
vocabularies (151,936 and 49,152 tokens), special tokens, architectures and tensor shapes,
without the weights. Laid out as LM Studio and the Hugging Face cache keep them, the 0.5B is
proposed as the 1.5B's draft, and a model of another family is refused with llama.cpp's reason.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

HEADERS = Path(REPO) / "tests" / "data" / "headers"
TARGET = "qwen2.5-coder-1.5b-instruct-q4_k_m"
DRAFT = "qwen2.5-coder-0.5b-instruct"
SMOL = "SmolLM2-135M-Instruct.Q4_1"
LMS_TARGET = f"Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/{TARGET}"
HF_REPO = "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"


def unpack(name: str, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(gzip.decompress((HEADERS / f"{name}.header.gguf.gz").read_bytes()))
    return dest


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """The 1.5B and SmolLM2 in LM Studio's tree, the 0.5B in the Hugging Face cache."""
    h = tmp_path_factory.mktemp("home")
    unpack(TARGET, h / ".lmstudio/models" / f"{LMS_TARGET}.gguf")
    unpack(SMOL, h / ".lmstudio/models/HuggingFaceTB/SmolLM2-135M-Instruct-GGUF" / f"{SMOL}.gguf")
    top = h / ".cache/huggingface/hub" / ("models--" + HF_REPO.replace("/", "--"))
    blob = unpack(DRAFT, top / "blobs" / hashlib.sha256(DRAFT.encode()).hexdigest())
    (top / "snapshots/cccc").mkdir(parents=True)
    (top / "refs").mkdir()
    (top / "refs/main").write_text("cccc")
    os.symlink(os.path.relpath(blob, top / "snapshots/cccc"), top / "snapshots/cccc" / f"{DRAFT}.gguf")
    return h


def spectui_models(home: Path, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HOME", "HF_HUB_CACHE", "LLAMA_CACHE", "OLLAMA_MODELS", "SPECTUI_MODELS")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-m", "spectui", "models", "--json", *args],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def test_the_small_qwen_drafts_for_the_large_one(home):
    doc = spectui_models(home)
    by_name = {m["name"]: m for m in doc["models"]}
    draft_name = f"{HF_REPO}/{DRAFT}"
    target, draft = by_name[LMS_TARGET], by_name[draft_name]
    # the real metadata, read from the headers
    assert (target["architecture"], draft["architecture"]) == ("qwen2", "qwen2")
    assert target["vocab_size"] == draft["vocab_size"] == 151936
    assert target["vocab_sha256"] == draft["vocab_sha256"]
    assert target["n_ctx_train"] == draft["n_ctx_train"] == 32768
    assert target["n_params"] == pytest.approx(1.78e9, rel=0.01) and draft["n_params"] == pytest.approx(0.63e9, rel=0.01)
    # the pairing: the 0.5B drafts for the 1.5B, never the other way round; SmolLM2 for neither
    assert target["drafts"] == [draft_name]
    assert draft["drafts"] == []
    assert by_name["smollm2"]["drafts"] == [f"HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/{SMOL}"] or by_name["smollm2"]["drafts"] == []
    assert not doc["notes"], doc["notes"]


def test_another_family_is_refused_with_the_reason(home):
    doc = spectui_models(home, "--drafts-for", TARGET)
    assert doc["target"] == LMS_TARGET and doc["drafts"] == [f"{HF_REPO}/{DRAFT}"]
    reasons = {r["name"]: r["reason"] for r in doc["refused"]}
    assert "vocabulary sizes differ by 102784" in reasons["smollm2"] and "llama.cpp" in reasons["smollm2"]
    assert "vocabulary sizes differ" in reasons[f"HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/{SMOL}"]
    # and the other way: the larger Qwen cannot draft for the smaller one
    back = spectui_models(home, "--drafts-for", DRAFT)
    assert {r["name"]: r["reason"] for r in back["refused"]}[LMS_TARGET].startswith("not smaller than the target")
