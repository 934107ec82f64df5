"""A fresh pair of runs on the embedded model, redacted together: nothing of the prompt, the
system prompt or the answer left in the copies, and report, diff and gate working on them
(the sample recordings' checks are tests/unit/test_redact.py)."""

from __future__ import annotations

import json

import pytest

from spectui.recording.output import output_text
from spectui.recording.reader import read_recording
from tests.conftest import run_cli
from tests.unit.test_redact import assert_nothing_left, redact


@pytest.mark.slow
def test_a_fresh_pair_of_runs_redacted(model_path, tmp_path):
    prompt = "Repeat this sentence exactly: Ravenclaw astronauts sprinkle paprika over turquoise glaciers on Thursdays."
    system = "You are Bartholomew, a meticulous archivist."
    runs = []
    for mode in ("ar", "spec"):
        path = tmp_path / f"{mode}.spectui"
        proc = run_cli(
            "run", "--headless", "--mode", mode, "--max-tokens", "40", "--threads", "1",
            "--prompt", prompt, "--system", system, "--record", str(path),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        runs.append(path)
    copies = redact(*runs, out=tmp_path / "redacted")
    for original, copy in zip(runs, copies):
        rec = read_recording(original)
        assert rec.header.config.system == system and output_text(rec.events)
        assert_nothing_left(rec, copy)
        for secret in ("Ravenclaw", "paprika", "turquoise", "Bartholomew", "archivist"):
            assert secret.encode() not in copy.read_bytes()
        assert run_cli("report", str(copy)).returncode == 0
        diff = run_cli("diff", str(original), str(copy))
        assert diff.returncode == 0 and sum("outputs not compared" in x for x in diff.stdout.splitlines()) == 1
    before = json.loads(run_cli("diff", "--json", *map(str, runs)).stdout)["outputs"]
    after = json.loads(run_cli("diff", "--json", *map(str, copies)).stdout)["outputs"]
    assert (after["identical"], after["n_differing"]) == (before["identical"], before["n_differing"])
    g_before = run_cli("gate", "--json", "--baseline", str(runs[0]), "--candidate", str(runs[1]))
    g_after = run_cli("gate", "--json", "--baseline", str(copies[0]), "--candidate", str(copies[1]))
    outputs = lambda out: [c["passed"] for c in json.loads(out.stdout)["checks"] if c["name"] == "outputs"]  # noqa: E731
    assert g_after.returncode == g_before.returncode and outputs(g_after) == outputs(g_before)
