"""``spectui diff`` and ``spectui gate`` as a user runs them: output, exit codes 0/1/2, and
one-line errors. Real recordings from recordings/ and hand-edited copies; no model needed."""

from __future__ import annotations

import json

import msgspec

from spectui.recording.reader import read_recording
from tests.conftest import run_cli
from tests.unit.test_diff import cut_in_half, edit_header, rewritten, sample, tokens_of, with_runtime, with_target_sha, write_events


def one_line_error(proc, *fragments: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spectui: error: "), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    for f in fragments:
        assert f in lines[0], lines[0]


def test_identical_pair_text():
    proc = run_cli("diff", str(sample("load-typo-fix")), str(sample("load-typo-fix", "spec")))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    n = len(tokens_of(read_recording(sample("load-typo-fix"))))
    assert f"identical: {n} tokens" in out
    order = ["-- artifacts", "-- configuration", "-- runs", "-- outputs", "-- speed", "-- acceptance", "-- memory"]
    assert [out.index(s) for s in order] == sorted(out.index(s) for s in order)
    assert "decode tok/s" in out and "95% CI" in out


def test_divergent_pair_exits_0_and_names_the_index():
    a = tokens_of(read_recording(sample("medium-reasoning")))
    b = tokens_of(read_recording(sample("medium-reasoning", "spec")))
    index = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    proc = run_cli("diff", str(sample("medium-reasoning")), str(sample("medium-reasoning", "spec")))
    assert proc.returncode == 0, proc.stderr
    assert f"diverge at token {index}: {a[index]} " in proc.stdout

    doc = json.loads(run_cli("diff", "--json", str(sample("medium-reasoning")), str(sample("medium-reasoning", "spec"))).stdout)
    assert doc["outputs"]["first_divergence"]["index"] == index
    assert doc["speedup"]["ci_low"] < doc["speedup"]["ratio"] < doc["speedup"]["ci_high"]

    md = run_cli("diff", "--markdown", str(sample("medium-reasoning")), str(sample("medium-reasoning", "spec")))
    assert md.returncode == 0 and "| decode tok/s |" in md.stdout and "|---|" in md.stdout


def test_artifact_change_listed_first_in_text_and_json(tmp_path):
    src = read_recording(sample("short-control", "spec"))
    cand = write_events(tmp_path / "c.spectui", edit_header(src.events, lambda h: with_runtime(h, **{"llama-cpp-python": "0.4.0"})))
    base = rewritten(sample("short-control"), tmp_path)
    proc = run_cli("diff", str(base), str(cand))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    row = next(i for i, line in enumerate(lines) if "artifacts.runtime.llama-cpp-python" in line)
    assert lines[row].split()[1:3] == ["0.3.36", "0.4.0"]
    assert row < next(i for i, line in enumerate(lines) if line.startswith("-- outputs"))
    assert lines[2].startswith("-- artifacts: 1 difference")
    doc = json.loads(run_cli("diff", "--json", str(base), str(cand)).stdout)
    assert doc["artifacts"] == [{"path": "artifacts.runtime.llama-cpp-python", "baseline": "0.3.36", "candidate": "0.4.0", "note": ""}]


def test_not_comparable_exit_2_unless_forced(tmp_path):
    src = read_recording(sample("short-control"))
    other = write_events(tmp_path / "o.spectui", edit_header(src.events, lambda h: with_target_sha(h, "e" * 64)))
    one_line_error(run_cli("diff", str(sample("short-control")), str(other)), "not comparable", "target models differ", "--force")
    one_line_error(run_cli("diff", str(sample("short-control")), str(sample("load-typo-fix"))), "prompt tokens differ")
    forced = run_cli("diff", "--force", str(sample("short-control")), str(other))
    assert forced.returncode == 0 and "COMPARED BY FORCE: the target models differ" in forced.stdout


def test_unusable_files_exit_2(tmp_path):
    good = str(sample("short-control"))
    one_line_error(run_cli("diff", good, str(tmp_path / "missing.spectui")), "recording not found")
    text = tmp_path / "notes.spectui"
    text.write_text("hello\n")
    one_line_error(run_cli("diff", str(text), good), "not a spectui recording")
    tiny = cut_in_half(sample("load-typo-fix", "spec"), tmp_path / "tiny.spectui")  # cut inside the header
    one_line_error(run_cli("diff", good, str(tiny)), "cut off before its header")
    one_line_error(run_cli("diff", "--json", "--markdown", good, good), "not allowed with")


def test_truncated_recording_is_diffable(tmp_path):
    cut = cut_in_half(sample("medium-reasoning", "spec"), tmp_path / "cut.spectui")
    proc = run_cli("diff", str(sample("medium-reasoning")), str(cut))
    assert proc.returncode == 0, proc.stderr
    status = next(line for line in proc.stdout.splitlines() if line.strip().startswith("status"))
    assert "incomplete (no end record), truncated at byte" in status
    doc = json.loads(run_cli("diff", "--json", str(sample("medium-reasoning")), str(cut)).stdout)
    assert doc["candidate"]["truncated"] is True and doc["baseline"]["truncated"] is False


#: thresholds the sample pairs meet (see tests/unit/test_gate.py: LOOSE), so one flag can fail one check
LOOSE = ["--min-speedup", "0.3", "--max-p95-itl-ratio", "10", "--max-ttft-growth", "2"]


def test_gate_exit_codes(tmp_path):
    base, cand = str(sample("load-typo-fix")), str(sample("load-typo-fix", "spec"))
    ok = run_cli("gate", "--baseline", base, "--candidate", cand, *LOOSE)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("spectui gate: PASS")
    for name in ("outputs", "speedup", "p95 ITL", "acceptance", "TTFT"):
        assert any(line.split()[:2] == ["PASS", name.split()[0]] for line in ok.stdout.splitlines()), name

    strict = run_cli("gate", "--baseline", base, "--candidate", cand, *LOOSE, "--min-speedup", "100", "--json")
    assert strict.returncode == 1, strict.stderr
    doc = json.loads(strict.stdout)
    assert doc["passed"] is False
    assert [c["name"] for c in doc["checks"] if c["passed"] is False] == ["speedup"]

    fail = run_cli("gate", "--baseline", str(sample("medium-reasoning")), "--candidate", str(sample("medium-reasoning", "spec")))
    assert fail.returncode == 1 and "FAIL" in fail.stdout.splitlines()[0]

    several = run_cli("gate", "--baseline", base, base, "--candidate", cand, cand, cand, *LOOSE, "--min-acceptance", "0.5")
    assert several.returncode == 0 and "(3 runs)" in several.stdout

    one_line_error(run_cli("gate", "--baseline", base, "--candidate", str(tmp_path / "none.spectui")), "recording not found")
    one_line_error(run_cli("gate", "--baseline", base, "--candidate", str(sample("short-control", "spec"))), "not comparable")
    one_line_error(run_cli("gate", "--baseline", base, "--candidate", cand, "--min-speedup", "0"), "min-speedup")
    one_line_error(run_cli("gate", "--baseline", base), "--candidate")


def test_gate_json_is_the_verdict():
    proc = run_cli("gate", "--json", "--baseline", str(sample("short-control")), "--candidate", str(sample("short-control", "spec")),
                   *LOOSE, "--min-acceptance", "0.01", "--max-ttft-growth", "0.5")
    assert proc.returncode == 0, proc.stdout
    doc = msgspec.json.decode(proc.stdout)
    assert doc["thresholds"]["min_acceptance"] == 0.01 and doc["thresholds"]["max_ttft_growth"] == 0.5
    assert {c["name"]: c["passed"] for c in doc["checks"]}["acceptance"] is True
