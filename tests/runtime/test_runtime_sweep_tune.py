"""llama-server's methods side by side through ``sweep``, ``gate`` and ``tune``, on real servers.

A sweep over two methods (one at a K, one that fixes its own) runs each on a server of its own
against the runtime's AR server and tabulates them as embedded settings are; ``gate`` on its
recordings says in one line that the runtime's speculative output is AR's; ``tune --runtime``
measures methods at a K and prints the command each ran as. One thread with flash attention on,
as in test_runtime_cli.py: there speculative output must equal AR's token for token. Small
budgets: each test starts three servers and decodes 32 tokens a run."""

from __future__ import annotations

import json

import psutil
import pytest

from spectui.recording.reader import read_recording
from spectui.recording.schema import Step
from tests.conftest import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.server]

PROMPT = "copy-quote-paragraph"
EXACT = ("--threads", "1", "--flash-attn", "on", "--ctx", "1024", "--max-tokens", "32", "--lookup", "2")


def tokens(path) -> list[int]:
    return [t for e in read_recording(path).events if type(e) is Step for t in e.tokens]


def no_orphans() -> bool:
    return not [p for p in psutil.process_iter(["name"]) if p.info["name"] == "llama-server" and p.ppid() == 1]


def test_a_sweep_runs_each_method_on_its_own_server_against_the_runtimes_ar_and_gate_says_exact(llama_server_binary, tmp_path):
    out = tmp_path / "sweep"
    proc = run_cli("sweep", "--headless", "--json", "--runtime", "llama-server", "--llama-server", llama_server_binary.path,
                   "--draft", "runtime:ngram-simple,runtime:ngram-cache", "--k-values", "4", "--prompts", PROMPT,
                   "--reps", "1", "--out", str(out), *EXACT)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["complete"] and [r["label"] for r in doc["rows"]] == ["AR", "ngram-simple K=4", "ngram-cache"]
    runs = {r["knob"] + r["drafter"]: out / r["file"] for r in doc["runs"]}
    ar, simple, cache = runs["ar"], runs["kruntime:ngram-simple"], runs["drafter"]

    lines = {name: read_recording(path).header.artifacts.server.props["runtime.command_line"] for name, path in runs.items()}
    assert "--spec-type" not in lines["ar"]  # AR: the runtime's own AR server
    assert "--spec-type ngram-simple --spec-ngram-simple-size-m 4 --spec-ngram-simple-size-n 2" in lines["kruntime:ngram-simple"]
    assert "--spec-type ngram-cache" in lines["drafter"] and "size-m" not in lines["drafter"]  # it fixes its own K
    assert len({line.split("--port ")[1].split()[0] for line in lines.values()}) == 3  # a server per setting
    for path in (simple, cache):
        assert tokens(path) == tokens(ar)
    row = next(r for r in doc["rows"] if r["label"] == "ngram-simple K=4")
    assert row["speedup"] > 0 and row["acceptance_p50"] > 0 and row["drafter"] == "runtime:ngram-simple"
    assert [k["drafter"] for k in doc["knees"]] == ["runtime:ngram-simple"]  # a K curve per method that reads K

    again = run_cli("sweep", "--analyze", str(out), "--json")  # no server: the table from the recordings
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["rows"] == doc["rows"]

    gate = run_cli("gate", "--baseline", str(ar), "--candidate", str(simple))
    assert gate.returncode in (0, 1), gate.stderr  # pass or fail on speed; the outputs are what this test reads
    (outputs,) = [line for line in gate.stdout.splitlines() if line.split()[1:2] == ["outputs"]]
    assert outputs.split()[0] == "PASS" and "greedy: 1 run token-identical to" in outputs, gate.stdout
    assert no_orphans()


def test_tune_measures_the_runtimes_methods_and_prints_the_command_each_ran_as(llama_server_binary):
    proc = run_cli("tune", "--json", "--runtime", "llama-server", "--llama-server", llama_server_binary.path,
                   "--draft", "runtime:ngram-simple,runtime:ngram-mod", "--k", "4", "--tiers", "copy", "--reps", "1", *EXACT)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["runtime"] == "llama-server" and doc["prompts"] == {PROMPT: "copy"} and doc["max_tokens"] == 32
    assert "1 prompt (one per tier) x 2 settings x 1 round, at most 32 tokens each" in doc["measured"]
    by_label = {s["label"]: s for s in doc["settings"]}
    assert list(by_label) == ["AR", "ngram-simple K=4", "ngram-mod K=4"]
    simple, mod = by_label["ngram-simple K=4"], by_label["ngram-mod K=4"]
    # the launcher's flags for each method, as it ran, without the host and port it picked
    assert "--spec-type ngram-simple --spec-ngram-simple-size-m 4 --spec-ngram-simple-size-n 2" in simple["command"]
    assert "--spec-type ngram-mod --spec-ngram-mod-n-max 4 --spec-ngram-mod-n-match 2" in mod["command"]
    for s in doc["settings"]:
        assert "--port" not in s["command"] and "--spec-draft-n-max" not in s["command"]
        assert s["command"].startswith(llama_server_binary.path)
    assert simple["drafted"] > 0 and simple["speedup"] > 0
    assert simple["same_output_as_ar"] == simple["runs"] == 1  # one thread: exact
    best = doc["best"]["copy"]
    assert best["command"] == by_label[best["label"]]["command"]
    assert no_orphans()


def test_what_sweep_and_tune_cannot_run_is_one_line_before_a_server_starts(llama_server_binary, tmp_path):
    runtime = ("--runtime", "llama-server", "--llama-server", llama_server_binary.path)
    for command, args, says in (
        ("tune", ("--draft", "runtime:ngram-nope"), "unknown llama-server method 'ngram-nope'"),
        ("tune", ("--weights",), "--weights is the embedded engine's"),
        ("sweep", ("--drafters", "runtime:ngram-simple,runtime:ngram-nope"), "unknown llama-server method 'ngram-nope'"),
        ("sweep", ("--grid", "--k-values", "4"), "a grid runs every drafter at every K"),
        ("sweep", ("--draft", "runtime:ngram-mod,runtime:ngram-simple", "--drafters", "runtime:ngram-cache"), "name the methods"),
    ):
        extra = ("--headless", "--out", str(tmp_path / "never")) if command == "sweep" else ()
        proc = run_cli(command, *runtime, *extra, *args)
        assert proc.returncode == 2 and says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "never").exists()
