"""The headless command on the real model: clean stdout, JSON, and one-line errors."""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import subprocess
import sys

import pytest

from spectui.models.gguf import read_gguf
from spectui.recording.output import output_text
from spectui.recording.reader import read_recording
from tests.conftest import REPO, run_cli


def assert_one_line_error(proc, *fragments: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("spectui: error: ")
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert proc.stdout == ""


def test_headless_text_on_stdout_summary_on_stderr(model_path, tmp_path):
    path = tmp_path / "run.spectui"
    proc = run_cli("run", "--headless", "--mode", "spec", "--max-tokens", "24", "--prompt", "Say hello.", "--record", str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip(), "no text on stdout"
    assert "spectui:" not in proc.stdout
    assert "tok/s" in proc.stderr and "acceptance" in proc.stderr and "TTFT" in proc.stderr
    assert "n-gram K=" in proc.stderr  # the drafter, as RunConfig labels it
    # the streamed text is the recording's text (end-of-generation piece held back), plus a newline
    assert proc.stdout == output_text(read_recording(path).events) + "\n"


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


def test_prompt_longer_than_context_is_refused_before_a_recording_exists(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTUI_RECORDINGS", str(tmp_path))  # the CLI subprocess inherits it
    proc = run_cli("run", "--headless", "--ctx", "64", "--prompt", "word " * 200)
    assert_one_line_error(proc, "context")
    assert list(tmp_path.iterdir()) == []  # once, an 8-byte .spectui file was left behind


def test_no_subcommand_means_run():
    # a leading run flag starts `spectui run`; the bad K is refused before any model loads
    assert_one_line_error(run_cli("--headless", "--k", "0"), "draft length")
    version = run_cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("spectui ")


def test_every_subcommand_registers_a_function_and_help_stays_light():
    from spectui.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == {
        "run", "report", "diff", "gate", "export", "replay", "compare", "sweep", "soak", "quality", "models", "history",
        "tune", "chat", "node", "runtime", "watch", "config", "workload",
    }  # fmt: skip
    for name, parser in sub.choices.items():
        nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for leaf_name, leaf in nested[0].choices.items() if nested else [(name, parser)]:  # `node serve|hello`
            assert callable(leaf.get_default("func")), leaf_name
    code = (
        "import sys\n"
        "from spectui.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('llama_cpp', 'numpy', 'textual', 'rich', 'opentelemetry')]\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr


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
