"""``spectui sweep`` on the real model: the table matches the recordings it wrote (one row is
re-derived here from the raw events, without ``summarize``), ``--analyze`` rebuilds the same
table, floors come out of it and ``diff --floors`` checks a run against them, an interrupted
sweep keeps what it finished, and bad input is one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from spectui.recording.reader import read_recording
from spectui.recording.schema import Step
from tests.conftest import REPO, run_cli

PROMPTS = "load-typo-fix,short-control"  # two tiers: copy and short


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    r = run_cli(
        "sweep", "--headless", "--json", "--prompts", PROMPTS, "--k-values", "2,4", "--repeats", "2",
        "--max-tokens", "24", "--out", str(out), timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "[12/12] 100%" in r.stderr  # the progress line, one per run
    return out, json.loads(r.stdout)


def _raw_rate_and_acceptance(path) -> tuple[float, float]:
    steps = [e for e in read_recording(path).events if type(e) is Step]
    times = [t for s in steps for t in s.t_us]
    rate = (len(times) - 1) / ((times[-1] - times[0]) / 1e6)
    drafted = sum(s.drafted for s in steps)
    return rate, (sum(s.accepted for s in steps) / drafted if drafted else float("nan"))


def _tokens_and_times(path) -> tuple[list[int], list[int]]:
    steps = [e for e in read_recording(path).events if type(e) is Step]
    return [t for s in steps for t in s.tokens], [t for s in steps for t in s.t_us]


def _same_text_ratio(path, ar_path) -> float:
    """The run's decode rate over its AR's on the tokens both wrote before they part (greedy)."""
    (tokens, times), (ar_tokens, ar_times) = _tokens_and_times(path), _tokens_and_times(ar_path)
    n = next((i for i, (x, y) in enumerate(zip(tokens, ar_tokens)) if x != y), min(len(tokens), len(ar_tokens)))
    return ((n - 1) / (times[n - 1] - times[0])) / ((n - 1) / (ar_times[n - 1] - ar_times[0]))


def test_a_row_is_rederived_from_its_recordings(sweep):
    out, doc = sweep
    assert doc["complete"] and len(doc["runs"]) == 12
    row = next(r for r in doc["rows"] if r["tier"] == "copy" and r["label"] == "K=4")
    runs = [r for r in doc["runs"] if r["tier"] == "copy" and r["knob"] == "k" and r["value"] == "4"]
    assert row["runs"] == len(runs) == 2
    ar = {r["round"]: out / r["file"] for r in doc["runs"] if r["tier"] == "copy" and r["knob"] == "ar"}
    rates, accs, ratios = [], [], []
    for r in runs:
        rate, acc = _raw_rate_and_acceptance(out / r["file"])
        rates.append(rate)
        accs.append(acc)
        ratios.append(_same_text_ratio(out / r["file"], ar[r["round"]]))  # over the same text: where they part
    assert row["tok_s_p50"] == pytest.approx(np.median(rates), rel=1e-6)
    assert row["tok_s_p95"] == pytest.approx(np.percentile(rates, 95), rel=1e-6)
    assert row["acceptance_p50"] == pytest.approx(np.median(accs), rel=1e-9)
    assert row["speedup"] == pytest.approx(np.median(ratios), rel=1e-6)
    assert row["speedup_ci_low"] <= row["speedup"] <= row["speedup_ci_high"]
    # every run is a complete recording of its configuration
    for r in doc["runs"]:
        rec = read_recording(out / r["file"])
        c = rec.header.config
        assert rec.complete and c.prompt_name == r["prompt"] and c.prompt_tier == r["tier"]
        assert c.mode == ("ar" if r["knob"] == "ar" else "spec") and not c.policy.enabled
        if r["knob"] == "k":
            assert c.draft.fixed_k == int(r["value"])


def test_analyze_rebuilds_the_same_table(sweep):
    out, doc = sweep
    r = run_cli("sweep", "--analyze", str(out), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rows"] == doc["rows"]
    text = run_cli("sweep", "--analyze", str(out), "--charts")  # charts off a terminal only when asked
    assert "== tier copy (load-typo-fix) ==" in text.stdout and "== tier short (short-control) ==" in text.stdout
    assert "knee:" in text.stdout and "speedup vs AR" in text.stdout  # the chart
    csv = run_cli("sweep", "--analyze", str(out), "--csv").stdout.splitlines()
    assert csv[0].startswith("tier,knob,value,label,runs,acceptance_p50") and len(csv) == 1 + len(doc["rows"])


def test_floors_and_diff_against_them(sweep, tmp_path):
    out, doc = sweep
    r = run_cli("report", "--floors", str(out), "--json")
    assert r.returncode == 0, r.stderr
    floors = json.loads(r.stdout)
    copy = next(f for f in floors["floors"] if f["tier"] == "copy")
    knee = next((k for k in doc["knees"] if k["tier"] == "copy"), None)
    # the knee's K, or where no K beat AR on this host, the best K's (floors are never none)
    assert copy["k"] == (knee["knee_k"] or knee["best_k"] if knee else 4)
    path = tmp_path / "floors.json"
    path.write_text(r.stdout)
    run = next(x for x in doc["runs"] if x["tier"] == "copy" and x["knob"] == "k" and x["value"] == str(copy["k"]))
    ar = next(x for x in doc["runs"] if x["tier"] == "copy" and x["knob"] == "ar")
    ok = run_cli("diff", str(out / ar["file"]), str(out / run["file"]), "--floors", str(path))
    assert ok.returncode == 0, ok.stdout + ok.stderr  # a run of the sweep meets the sweep's own floors
    assert "pass  acceptance" in ok.stdout
    copy["acceptance_floor"] = 1.01
    path.write_text(json.dumps(floors))
    broken = run_cli("diff", str(out / ar["file"]), str(out / run["file"]), "--floors", str(path))
    assert broken.returncode == 1 and "FAIL  acceptance" in broken.stdout


def test_interrupted_sweep_keeps_finished_runs(tmp_path):
    out = tmp_path / "cut"
    proc = subprocess.Popen(
        [sys.executable, "-m", "spectui", "sweep", "--headless", "--prompts", "short-control", "--k-values", "2",
         "--repeats", "20", "--max-tokens", "16", "--out", str(out)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (out / "sweep.json").exists():
        time.sleep(0.5)
    assert (out / "sweep.json").exists(), "the sweep never finished a run"
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "(incomplete)" in stdout
    again = run_cli("sweep", "--analyze", str(out), "--json")
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert 1 <= len(doc["runs"]) < 40 and not doc["complete"]
    files = {f for f in os.listdir(out) if f.endswith(".spectui")}
    assert {r["file"] for r in doc["runs"]} <= files


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tiers", "nosuch"], "no prompts in tier nosuch"),
        (["--prompts", "nosuch"], "no prompt named nosuch"),
        (["--k-values", "2,x"], "sweep value 'x' is not a valid int"),
        (["--k-values", ""], "the sweep has no points"),
        (["--reps", "0"], "--reps must be >= 1"),
        (["--prompt", "hello"], "a sweep runs prompts from prompts/"),
        (["--analyze", "/nonexistent"], "is not a sweep folder"),
    ],
)
def test_bad_input_is_one_line(args, message):
    r = run_cli("sweep", "--headless", *args)
    assert r.returncode == 2
    assert r.stderr.strip().startswith("spectui: error:") and message in r.stderr and len(r.stderr.strip().splitlines()) == 1
