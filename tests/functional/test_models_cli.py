"""``spectui models`` on a temporary home laid out as LM Studio, Ollama and the Hugging Face cache
hold them, with real GGUF files (the embedded model and requantisations of it made here with
llama.cpp's quantize API) and an MLX directory exported from one: listed, named, paired with
compatible drafts, broken entries noted, and runnable by name."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from spectui.recording.reader import read_recording
from tests.conftest import REPO

LMS = "lmstudio-community/SmolLM2-135M-Instruct-GGUF"
HF_GGUF = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
HF_MLX = "mlx-community/SmolLM2-135M-Instruct-4bit"


def quantize(src: str, dst: str, ftype: int) -> str:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    assert llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params)) == 0
    return dst


@pytest.fixture(scope="session")
def variants(model_path, tmp_path_factory):
    """Q8_0 and Q4_0 requantisations of the embedded Q4_1 model, and an MLX export of Q4_0."""
    import llama_cpp

    from spectui.engine.backends.mlx_gguf import export_mlx_model

    out = tmp_path_factory.mktemp("variants")
    q8 = quantize(model_path, str(out / "q8_0.gguf"), llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0)
    q4 = quantize(model_path, str(out / "q4_0.gguf"), llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0)
    mlx_dir = export_mlx_model(q4, out / "mlx")
    return {"Q8_0": q8, "Q4_0": q4, "mlx": mlx_dir}


@pytest.fixture
def home(variants, model_path, tmp_path):
    h = tmp_path / "home"
    lms = h / ".lmstudio/models" / LMS
    lms.mkdir(parents=True)
    shutil.copy(variants["Q8_0"], lms / "SmolLM2-135M-Instruct-Q8_0.gguf")
    shutil.copy(variants["Q4_0"], lms / "SmolLM2-135M-Instruct-Q4_0.gguf")
    (h / ".lmstudio/models/someone/broken").mkdir(parents=True)
    (h / ".lmstudio/models/someone/broken/model.gguf").write_bytes(b"<html>404 not found</html>")
    # Ollama: a manifest per name:tag, weights in a content-addressed blob
    ollama = h / ".ollama/models"
    (ollama / "blobs").mkdir(parents=True)
    digest = hashlib.sha256(open(model_path, "rb").read()).hexdigest()
    shutil.copy(model_path, ollama / f"blobs/sha256-{digest}")
    lib = ollama / "manifests/registry.ollama.ai/library"
    (lib / "smollm2").mkdir(parents=True)
    (lib / "smollm2/135m").write_text(json.dumps({
        "schemaVersion": 2,
        "layers": [
            {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}", "size": os.path.getsize(model_path)},
            {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:00", "size": 1},
        ],
    }))
    (lib / "broken").mkdir()
    (lib / "broken/latest").write_text("{not json")
    # the Hugging Face cache: blobs, and snapshots of symlinks to them
    for repo, rev, files in (
        (HF_GGUF, "aaaa", {"smollm2-135m-instruct-q4_0.gguf": variants["Q4_0"]}),
        (HF_MLX, "bbbb", {f: os.path.join(variants["mlx"], f) for f in os.listdir(variants["mlx"])}),
    ):
        top = h / ".cache/huggingface/hub" / ("models--" + repo.replace("/", "--"))
        (top / "blobs").mkdir(parents=True)
        (top / "snapshots" / rev).mkdir(parents=True)
        (top / "refs").mkdir()
        (top / "refs/main").write_text(rev)
        for name, src in files.items():
            blob = top / "blobs" / hashlib.sha256(name.encode()).hexdigest()
            shutil.copy(src, blob)
            os.symlink(os.path.relpath(blob, top / "snapshots" / rev), top / "snapshots" / rev / name)
    return h


def spectui(home, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HOME", "HF_HUB_CACHE", "LLAMA_CACHE", "OLLAMA_MODELS", "SPECTUI_MODELS")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "spectui", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=timeout)


def catalogue(home, *args: str) -> dict:
    proc = spectui(home, "models", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    return doc


def test_listed_named_and_paired(home, model_path):
    doc = catalogue(home)
    by_name = {m["name"]: m for m in doc["models"]}
    q8, q4_lms = f"{LMS}/SmolLM2-135M-Instruct-Q8_0", f"{LMS}/SmolLM2-135M-Instruct-Q4_0"
    q4_hf = f"{HF_GGUF}/smollm2-135m-instruct-q4_0"
    assert set(by_name) == {"smollm2", q8, q4_lms, "smollm2:135m", q4_hf, HF_MLX}
    assert by_name["smollm2"]["source"] == "embedded" and by_name["smollm2"]["path"] == model_path
    assert by_name["smollm2:135m"]["source"] == "ollama" and "/blobs/sha256-" in by_name["smollm2:135m"]["path"]
    assert {by_name[n]["quant"] for n in (q8, q4_lms, "smollm2")} == {"Q8_0", "Q4_0", "Q4_1"}
    mlx = by_name[HF_MLX]
    assert mlx["format"] == "mlx" and mlx["architecture"] == "llama" and mlx["quant"].startswith("mlx 4-bit")
    for m in doc["models"]:  # metadata read, not guessed
        assert m["n_ctx_train"] == 8192 and m["vocab_size"] == 49152 and m["size_bytes"] > 50e6
        assert m["vocab_sha256"] == by_name["smollm2"]["vocab_sha256"]  # one vocabulary, GGUF or MLX
        assert m["n_params"] == pytest.approx(by_name["smollm2"]["n_params"], rel=0.01)
    # drafts: same vocabulary and smaller; a GGUF target takes GGUF drafts only
    assert set(by_name[q8]["drafts"]) == {"smollm2", "smollm2:135m", q4_lms, q4_hf}
    assert set(by_name["smollm2"]["drafts"]) == {q4_lms, q4_hf}
    assert by_name[q4_lms]["drafts"] == []
    # bad input: one note each, everything else listed
    assert len(doc["notes"]) == 2, doc["notes"]
    assert any("not a GGUF file" in n and "broken/model.gguf" in n for n in doc["notes"])
    assert any("Ollama model broken:latest" in n and "broken manifest" in n for n in doc["notes"])


def test_text_groups_targets_with_drafts_and_caches_metadata(home):
    proc = spectui(home, "models")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "spectui models: 6 found"
    q8 = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{LMS}/SmolLM2-135M-Instruct-Q8_0"))
    assert lines[q8 + 1].strip().startswith("draft: ")  # its drafts follow it
    cache = json.loads((home / ".cache/spectui/catalogue.json").read_text())
    assert len(cache["facts"]) == 6  # one entry per file (path, size, mtime)
    again = spectui(home, "models")
    assert again.stdout == proc.stdout


def test_given_folders_and_env(home, variants, tmp_path):
    extra = tmp_path / "mine"
    extra.mkdir()
    shutil.copy(variants["Q8_0"], extra / "big.gguf")
    env_dir = tmp_path / "env"
    proc = spectui(home, "models", "--json", str(extra), str(tmp_path / "missing"))
    doc = json.loads(proc.stdout)
    assert "big" in {m["name"] for m in doc["models"]}
    assert any("no such folder" in n and "missing" in n for n in doc["notes"])
    del env_dir


def test_runnable_by_name(home, tmp_path):
    rec = tmp_path / "run.spectui"
    proc = spectui(
        home, "run", "--headless", "--target", "smollm2:135m", "--mode", "spec", "--k", "2",
        "--draft", f"{HF_GGUF}/smollm2-135m-instruct-q4_0", "--max-tokens", "8", "--prompt", "Say hi.", "--record", str(rec),
    )
    assert proc.returncode == 0, proc.stderr
    h = read_recording(rec).header
    assert "/.ollama/models/blobs/sha256-" in h.config.target
    assert h.config.draft.flag.endswith("snapshots/aaaa/smollm2-135m-instruct-q4_0.gguf")
    assert h.artifacts.draft is not None and h.artifacts.draft.quant == "Q4_0"


def test_ambiguous_and_unknown_names_are_one_line(home):
    proc = spectui(home, "run", "--headless", "--target", "SmolLM2-135M-Instruct-Q4_0", "--max-tokens", "4", "--no-record")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "matches several models" in proc.stderr
    proc = spectui(home, "run", "--headless", "--target", "no-such-model", "--max-tokens", "4", "--no-record")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "not found" in proc.stderr
