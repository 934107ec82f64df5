"""Reading a workload: the shipped ones, every form, and bad input refused in one line (no model)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spectui.errors import SpectuiError
from spectui.prompts import prompts_dir
from spectui.workload.clients import arrivals
from spectui.workload.result import knee_line
from spectui.workload.source import MAX_TOKENS_CAP, read_workload

SHIPPED = sorted((prompts_dir() / "workloads").glob("*.jsonl"))


def write_lines(path: Path, lines: list[object]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_workload_reads(path: Path) -> None:
    w = read_workload(path)
    assert w.requests and all(r.max_tokens > 0 for r in w.requests)
    # a conversation is one unit, its turns in order
    for unit in w.units():
        assert [r.turn for r in unit] == list(range(len(unit)))


def test_the_test_workload_has_twelve_requests_of_every_kind() -> None:
    w = read_workload(prompts_dir() / "workloads" / "mixed-12.jsonl")
    assert len(w.requests) == 12
    assert {r.chat for r in w.requests} == {True, False}
    assert any(len(u) > 1 for u in w.units())


def test_the_batch_form_and_content_parts(tmp_path: Path) -> None:
    f = write_lines(tmp_path / "w.jsonl", [
        {"custom_id": "a", "method": "POST", "body": {"model": "x", "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
                                                      "max_completion_tokens": 7}},
        {"prompt": ["Once upon a time"], "max_tokens": 5, "temperature": 0.7, "stream": True},
    ])
    w = read_workload(f)
    assert (w.requests[0].prompt, w.requests[0].max_tokens, w.requests[0].sampling) == ("Hi", 7, None)
    assert (w.requests[1].chat, w.requests[1].sampling.temperature) == (False, 0.7)


def test_a_folder_of_prompt_files(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("# max_tokens: 9\nSecond")
    (tmp_path / "a.txt").write_text("First")
    (tmp_path / "notes.md").write_text("not a request")
    w = read_workload(tmp_path, default_max_tokens=33)
    assert [(r.prompt, r.max_tokens) for r in w.requests] == [("First", 33), ("Second", 9)]


def test_a_recording_is_a_request() -> None:
    w = read_workload(Path(__file__).parents[1] / "data" / "fixed-session.spectui")
    assert w.requests[0].prompt


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        ([], "no requests"),
        (['{"messages": [{"role": "user", "content": "hi"}]}', "{not json"], "w.jsonl:2: not JSON"),
        ([{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}], "w.jsonl:1: max_tokens 0"),
        ([{"messages": [{"role": "user", "content": "hi"}], "max_tokens": MAX_TOKENS_CAP + 1}], "max_tokens"),
        ([{"max_tokens": 3}], "either messages (chat) or prompt"),
        ([{"messages": []}], "0 messages"),
        ([{"messages": [{"role": "tool", "content": "x"}]}], "role 'tool'"),
        ([{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}], "must be the user's"),
        ([{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}], "only text"),
        ([{"messages": "hi"}], "not a chat or completions request"),
        ([{"prompt": "x", "temperature": float("nan")}], "not JSON"),  # JSON has no NaN
        ([{"prompt": "x", "top_p": 0}], "out of range"),
        # a follow-up that does not carry its turn before: out of order
        ([{"conversation": "c", "messages": [{"role": "user", "content": "first"}, {"role": "assistant", "content": "one"},
                                             {"role": "user", "content": "second"}]},
          {"conversation": "c", "messages": [{"role": "user", "content": "first"}]}], "w.jsonl:2: conversation 'c' out of order"),
        ([{"conversation": 1, "turn": 2, "prompt": "a"}, {"conversation": 1, "turn": 1, "prompt": "ab"}], "turn 1 after turn 2"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, lines: list[object], said: str) -> None:
    f = write_lines(tmp_path / "w.jsonl", lines)
    with pytest.raises(SpectuiError) as err:
        read_workload(f)
    assert said in str(err.value)
    assert "\n" not in str(err.value)


@settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=2000) | st.lists(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                                                             lambda c: st.lists(c, max_size=4) | st.dictionaries(st.sampled_from(
                                                                 ["messages", "prompt", "role", "content", "max_tokens", "conversation",
                                                                  "turn", "body", "temperature", "type", "text"]), c, max_size=5),
                                                             max_leaves=20), max_size=5).map(
    lambda xs: "\n".join(json.dumps(x) for x in xs).encode()))
def test_any_bytes_read_or_are_refused_in_one_line(tmp_path: Path, data: bytes) -> None:
    f = tmp_path / "any.jsonl"
    f.write_bytes(data)
    try:
        w = read_workload(f)
    except SpectuiError as exc:
        assert "\n" not in str(exc)
    else:
        assert all(1 <= r.max_tokens <= MAX_TOKENS_CAP for r in w.requests)


def test_deep_nesting_is_refused_not_a_traceback(tmp_path: Path) -> None:
    f = tmp_path / "deep.jsonl"
    f.write_text('{"messages": [{"role": "user", "content": "x"}], "extra": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    try:
        read_workload(f)
    except SpectuiError as exc:
        assert "deep.jsonl:1" in str(exc)


def test_arrivals_are_seeded_poisson() -> None:
    a = arrivals(2000, 4.0, seed=3)
    assert a == arrivals(2000, 4.0, seed=3) and a[0] == 0.0
    gaps = [y - x for x, y in zip(a, a[1:])]
    assert abs(sum(gaps) / len(gaps) - 0.25) < 0.03  # a mean gap of 1 / rate


def test_the_knee_line() -> None:
    assert knee_line("ngram-mod", [("1", 1.4), ("2", 1.1), ("4", 0.9)]) == (
        "ngram-mod pays up to 2 clients here: 1.40x at 1, 1.10x at 2, 0.90x at 4")
    assert knee_line("m", [("1", 0.9)]).startswith("m does not pay here")
    assert knee_line("m", [("1", 1.2), ("2", 1.1)]).startswith("m pays at every load")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--clients", "0"], "--clients 0"),
        (["--clients", "1,x"], "whole numbers"),
        (["--rate", "0"], "above 0"),
        (["--warmup", "99"], "--warmup 99"),
    ],
)
def test_the_command_refuses_bad_flags_in_one_line_and_records_nothing(tmp_path: Path, argv: list[str], said: str) -> None:
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "spectui", "workload", "mixed-12", "--out", str(out), *argv],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not out.exists()


def test_a_bad_line_names_its_file_and_line_from_the_command(tmp_path: Path) -> None:
    f = write_lines(tmp_path / "traffic.jsonl", [{"prompt": "a"}, "oops"])
    proc = subprocess.run([sys.executable, "-m", "spectui", "workload", str(f), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and f"{f}:2: not JSON" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_a_result_with_missing_figures_reads_back(tmp_path: Path) -> None:
    import math

    import msgspec

    from spectui.workload.gate import gate_workload
    from spectui.workload.result import RESULT_NAME, LevelResult, RequestOutcome, WorkloadResult, load_result

    level = LevelResult(setting="llama-server ngram-mod", family="llama-server", ar=False, clients=2,
                        requests=[RequestOutcome(index=0, exact="defect")], counts={"defect": 1})
    result = WorkloadResult(workload="w", path="w.jsonl", n_requests=1, settings=["llama-server AR", "llama-server ngram-mod"],
                            levels=[level], complete=True)
    (tmp_path / RESULT_NAME).write_bytes(msgspec.json.encode(result))  # NaN is written as null
    again = load_result(tmp_path)
    assert math.isnan(again.levels[0].speedup) and math.isnan(again.levels[0].requests[0].ttft_ms)
    verdict = gate_workload(again, setting="ngram-mod", clients=2, min_speedup=1.1)
    assert not verdict.passed and [line[:4] for line in verdict.lines] == ["FAIL", "FAIL"]
    with pytest.raises(SpectuiError, match="ran at no level of 4 clients"):
        gate_workload(again, setting="ngram-mod", clients=4)
    (tmp_path / RESULT_NAME).write_text('{"workload": 3}')
    with pytest.raises(SpectuiError, match="not a workload result"):
        load_result(tmp_path)
