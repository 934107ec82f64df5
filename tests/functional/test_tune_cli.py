"""``spectui tune`` end to end on the embedded model: measured curve, plans, the check, the
stored curve later runs start from, ``--from``, ``--write-quant`` and bad input."""

from __future__ import annotations

import json
import os

import pytest

from spectui.models.gguf import read_gguf
from spectui.recording.reader import read_recording
from tests.conftest import run_cli, seed_calibrations

FAST = ("--max-tokens", "24")


@pytest.fixture
def cache_home(tmp_path, monkeypatch, calibrations):
    """A private cache: tune stores its curve there, and runs read it back. The session's
    batch-noise calibrations are in it (tests/conftest.py): tune still measures and reports
    its exactness from them, without measuring them again."""
    home = tmp_path / "cache"
    seed_calibrations(calibrations, home)
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


def tune_json(*args: str) -> dict:
    proc = run_cli("tune", "--json", *args, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_tune_measures_plans_checks_and_seeds_later_runs(cache_home, tmp_path):
    doc = tune_json("--tiers", "short,copy", "--reps", "1", *FAST)
    curve = doc["curve"]["relative"]
    assert len(curve) == 16 and curve[0] == 1.0 and all(c > 0 for c in curve)
    assert doc["long_curve"]["depth"] >= 2048
    tiers = {t["tier"]: t for t in doc["tiers"]}
    assert set(tiers) == {"short", "copy"}
    for t in tiers.values():
        assert t["verdict"].startswith(t["tier"] + ": ")
        assert t["predicted"] > 0 and len(t["predicted_by_setting"]) == 17  # cost-aware + K=1..16
        assert t["best"]["spectui"].startswith("spectui run --mode")
        if t["best"]["drafter"] != "ar":  # checked by real runs, prompt by prompt
            assert t["measured"] > 0 and set(t["measured_per_prompt"]) == set(t["prompts"])
        # what the weights allow: no prompt-lookup setting is predicted past the copying
        # ceiling, and copying never past a drafter that is never wrong
        assert 1.0 <= t["lookup_bound"] <= t["copy_ceiling"] + 1e-9 <= t["perfect_ceiling"] + 2e-9
        assert max(t["predicted_by_setting"].values()) <= t["copy_ceiling"] + 1e-9
    # nothing is advised for a runtime tune did not run: the command that measures it instead
    assert not any("--spec-" in line for line in doc["settings"])
    assert any("spectui tune --runtime llama-server" in line for line in doc["settings"])
    # exactness on this machine: both calibrations, and what --deterministic costs per token
    exact = doc["exactness"]
    assert exact["noise"]["depth"] > 0 and exact["noise"]["by_depth"]
    det = exact["deterministic_noise"]
    assert det["settings"]["n_threads"] == "1" and det["settings"]["flash_attn"] == "on"
    assert max(det["by_depth"]) == 0.0, "one thread with flash attention on is batch-invariant"
    assert exact["deterministic_cost"] > 0 and any(line.startswith("--deterministic") for line in exact["lines"])
    # the curve is stored for this target: a cost-aware run now starts from it
    rec = tmp_path / "seeded.spectui"
    run = run_cli("run", "--headless", "--prompt-name", "short-greeting", *FAST, "--record", str(rec))
    assert run.returncode == 0, run.stderr
    seed = read_recording(str(rec)).header.pricing.seed
    assert list(seed) == pytest.approx(curve)


def test_tune_from_recordings_replays_their_outputs(cache_home, tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    for name, mode in (("copy-quote-paragraph", "ar"), ("short-greeting", "spec")):
        proc = run_cli("run", "--headless", "--prompt-name", name, "--mode", mode, *FAST,
                       "--record", str(folder / f"{name}.spectui"))
        assert proc.returncode == 0, proc.stderr
    # the suffix drafter, replayed over the recorded outputs (the n-gram is the default above);
    # a context too short for the long curve, which the test above checks
    doc = tune_json("--from", str(folder), "--reps", "0", "--draft", "suffix", "--ctx", "1024")
    assert doc["acceptance_from"] == str(folder) and doc["drafter"] == "suffix"
    assert {t["tier"] for t in doc["tiers"]} == {"copy", "short"}
    assert all(t["measured"] is None for t in doc["tiers"])  # --reps 0: predicted only
    for t in doc["tiers"]:
        assert "suffix, cost-aware K" in t["predicted_by_setting"] and "suffix K=16" in t["predicted_by_setting"]
        assert not any(label.startswith("n-gram") for label in t["predicted_by_setting"])
        if t["best"]["drafter"] == "suffix":
            assert t["best"]["spectui"].startswith("spectui run --mode spec --draft suffix")


def test_write_quant_writes_a_requantized_copy_and_never_overwrites(tmp_path):
    out = tmp_path / "model.Q8_0.gguf"
    proc = run_cli("tune", "--write-quant", "q8_0", str(out))
    assert proc.returncode == 0, proc.stderr
    assert read_gguf(str(out)).quant == "Q8_0" and "requantized to Q8_0" in proc.stdout
    again = run_cli("tune", "--write-quant", "Q8_0", str(out))
    assert again.returncode == 2 and "never overwrites" in again.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (("--temperature", "0.7"), "tune measures greedy decoding"),
        (("--tiers", "nope"), "no prompt tier nope"),
        (("--from", "/no/such/folder"), "no such folder"),
        (("--write-quant", "Q9_9", "/tmp/x.gguf"), "unknown weight type"),
        (("--reps", "-1"), "--reps must be >= 0"),
        (("--probe-target",), "--probe-target chooses the model --weights probes"),
        (("--server", "http://127.0.0.1:9"), "tune measures the engines spectui runs"),
    ],
)
def test_bad_input_is_one_line(args, message, tmp_path):
    proc = run_cli("tune", *args)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert not os.path.exists("/tmp/x.gguf")
