"""The headless command on the real model: clean stdout, JSON, and one-line errors."""

from __future__ import annotations

import json
import shutil
import struct

import pytest

from spectui.engine.gguf import read_gguf
from tests.conftest import run_cli


def assert_one_line_error(proc, *fragments: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("spectui: error: ")
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert proc.stdout == ""


def test_headless_text_on_stdout_summary_on_stderr(model_path):
    proc = run_cli("run", "--headless", "--mode", "spec", "--max-tokens", "24", "--prompt", "Say hello.")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip(), "no text on stdout"
    assert "spectui:" not in proc.stdout
    assert "tok/s" in proc.stderr and "acceptance" in proc.stderr and "TTFT" in proc.stderr


def test_json_output_has_text_tokens_and_summary(model_path):
    proc = run_cli("run", "--headless", "--json", "--mode", "ar", "--max-tokens", "16", "--prompt", "Say hello.")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert isinstance(doc["text"], str) and doc["text"]
    assert 1 <= len(doc["tokens"]) <= 16
    summary = doc["summary"]
    assert summary["n_tokens"] == len(doc["tokens"])
    assert summary["decode_tok_s"] > 0 and summary["ttft_ms"] > 0


def test_prompt_file_and_stdin(tmp_path):
    f = tmp_path / "p.txt"
    f.write_text("Say hi.")
    a = run_cli("run", "--headless", "--json", "--mode", "ar", "--max-tokens", "8", "--prompt-file", str(f))
    b = run_cli("run", "--headless", "--json", "--mode", "ar", "--max-tokens", "8", "--prompt-file", "-", stdin="Say hi.")
    assert a.returncode == b.returncode == 0
    assert json.loads(a.stdout)["tokens"] == json.loads(b.stdout)["tokens"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--target", "/nonexistent/model.gguf"], "not found"),
        (["--k", "0"], "draft length"),
        (["--k", "100000"], "draft length"),
        (["--max-tokens", "0"], "max-tokens"),
        (["--temperature", "-0.5"], "temperature"),
        (["--top-p", "0"], "top-p"),
        (["--mode", "fast"], "invalid choice"),
        (["--k", "four"], "invalid int"),
        (["--target", "HuggingFaceTB/SmolLM2-135M-Instruct"], "never downloads"),
        (["--prompt-file", "/nonexistent/prompt.txt"], "cannot read prompt file"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, fragment):
    assert_one_line_error(run_cli("run", "--headless", *args), fragment)


def test_not_a_gguf_file(tmp_path):
    bogus = tmp_path / "model.gguf"
    bogus.write_text("this is not a model\n" * 10)
    assert_one_line_error(run_cli("run", "--headless", "--target", str(bogus)), "not a GGUF file")


def test_truncated_gguf_file(tmp_path, model_path):
    cut = tmp_path / "cut.gguf"
    with open(model_path, "rb") as src:
        cut.write_bytes(src.read(4096))
    assert_one_line_error(run_cli("run", "--headless", "--target", str(cut)), "GGUF")


def test_prompt_longer_than_context():
    proc = run_cli("run", "--headless", "--ctx", "64", "--prompt", "word " * 200)
    assert_one_line_error(proc, "context")


def _patched_vocab_copy(model_path: str, dest) -> tuple[int, str]:
    """Copy the model and change the text of one token (same length keeps the file valid)."""
    info = read_gguf(model_path)
    token_id = 40000
    old = info.tokens[token_id].encode()
    new = bytes(b if i else (b ^ 0x01) for i, b in enumerate(old))  # flip one bit of the first byte
    assert new != old and new.decode()  # still valid UTF-8
    shutil.copyfile(model_path, dest)
    needle = struct.pack("<Q", len(old)) + old
    with open(dest, "r+b") as f:
        data = f.read(64 << 20)  # metadata lives at the front
        offset = data.index(needle, data.index(b"tokenizer.ggml.tokens"))
        f.seek(offset + 8)
        f.write(new)
    assert read_gguf(str(dest)).tokens[token_id] == new.decode()
    return token_id, new.decode()


def test_mismatched_draft_vocabulary(tmp_path, model_path):
    draft = tmp_path / "draft.gguf"
    token_id, _ = _patched_vocab_copy(model_path, draft)
    proc = run_cli("run", "--headless", "--draft", str(draft))
    assert_one_line_error(proc, "vocabularies differ", f"token id {token_id}")
