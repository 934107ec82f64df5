"""``spectui workload`` on real llama-servers spectui starts: the shipped 12-request workload at
1 and 4 clients (2 clients runs in the Ctrl-C test below), AR and ngram-mod on the embedded
model, two passes a level.

One run of the command serves every test here (about a minute and a half): what each test reads
is a different fact of the same run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spectui.recording.reader import read_header, read_recording
from spectui.workload.result import load_result
from tests.conftest import REPO, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.server]

SETTINGS = {"llama-server AR", "llama-server ngram-mod"}


@pytest.fixture(scope="module")
def workload(llama_server_binary, tmp_path_factory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("workload") / "run"
    proc = run_cli("workload", "mixed-12", "--llama-server", llama_server_binary.path, "--clients", "1,4", "--passes", "2",
                   "--threads", "2", "--out", str(out), "--json", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout), out


def test_every_level_of_every_setting_ran(workload) -> None:
    doc, _ = workload
    levels = {(lv["setting"], lv["clients"], lv["pass_no"]) for lv in doc["levels"]}
    assert levels == {(s, c, p) for s in SETTINGS for c in (1, 4) for p in (0, 1)}
    for lv in doc["levels"]:
        assert len(lv["per_request"]) == 12 and all(r["n_tokens"] > 0 for r in lv["per_request"]), lv["setting"]
        assert lv["output_tok_s"] > 0 and lv["itl_ms_p50"] is not None and lv["server_cpu_s"] > 0


def test_every_request_is_identical_to_its_ar_output_or_classified(workload) -> None:
    doc, _ = workload
    for lv in doc["levels"]:
        counts = lv["requests"]
        assert counts["identical"] + counts["near_tie"] + counts["batched"] + counts["defect"] + counts["unjudged"] + (
            12 if lv["ar"] and lv["clients"] == 1 and lv["pass_no"] == 0 else 0) == 12
        for r in lv["per_request"]:
            if r["exact"] not in ("identical", "reference"):
                # a parting says where, and why in words (margins and the bound, or what is missing)
                assert r["parted_at"] >= 0 and r["why"], r


def test_acceptance_per_level_comes_from_the_servers_metrics(workload) -> None:
    doc, _ = workload
    for lv in doc["levels"]:
        if lv["setting"] == "llama-server ngram-mod":
            assert lv["drafted"] > 0 and 0 < lv["acceptance"] <= 1, lv
            assert "/metrics" in lv["acceptance_source"]
            assert lv["per_position"] and lv["per_position"][0] >= lv["per_position"][-1]
        else:
            assert lv["drafted"] in (-1, 0)


def test_the_speedup_is_over_the_same_text_and_the_knee_is_said(workload) -> None:
    doc, _ = workload
    for lv in doc["levels"]:
        if not lv["ar"]:
            assert lv["speedup"] > 0 and "tokens compared" in lv["same_text"]
    knee = doc["knees"]["llama-server ngram-mod"]
    assert knee.startswith("llama-server ngram-mod ") and "x at 1" in knee and "x at 4" in knee


def test_a_second_pass_meets_a_warm_server_and_ngram_mod_drafts_more(workload) -> None:
    doc, out = workload
    first, second = (next(lv for lv in doc["levels"] if (lv["setting"], lv["clients"], lv["pass_no"]) == ("llama-server ngram-mod", 1, p))
                     for p in (0, 1))
    assert second["drafted"] > first["drafted"], (first["drafted"], second["drafted"])
    # the header says how warm the server was when each request was sent
    cold = read_header(out / first["per_request"][0]["recording"]).load
    warm = read_header(out / second["per_request"][0]["recording"]).load
    assert cold is not None and warm is not None
    assert (cold.index, cold.clients, cold.pass_no, cold.warm) == (0, 1, 0, False)
    assert warm.warm and warm.served_before >= 12 and warm.pass_no == 1


def test_the_recordings_replay_and_the_folder_reads_again(workload) -> None:
    doc, out = workload
    r = doc["levels"][-1]["per_request"][3]
    rec = read_recording(out / r["recording"])
    assert rec.complete and rec.header.load is not None and rec.header.load.setting
    proc = run_cli("replay", str(out / r["recording"]), "--json")
    assert proc.returncode == 0, proc.stderr
    again = run_cli("workload", "--analyze", str(out))
    assert again.returncode == 0 and ("pays" in again.stdout or "does not pay" in again.stdout)
    assert run_cli("report", str(out)).stdout == again.stdout  # report reads a workload folder the same
    assert load_result(out).complete
    gate = run_cli("gate", "--workload", str(out), "--setting", "ngram-mod", "--clients", "1", "--min-speedup", "0.5",
                   "--max-defects", "12")
    assert gate.returncode == 0 and gate.stdout.startswith("gate: PASS"), gate.stdout + gate.stderr
    strict = run_cli("gate", "--workload", str(out), "--setting", "ngram-mod", "--clients", "1", "--min-speedup", "50")
    assert strict.returncode == 1 and "FAIL  speedup" in strict.stdout


def test_a_server_that_dies_mid_level_stops_the_run_in_one_line_and_keeps_what_finished(llama_server_binary, tmp_path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "spectui", "workload", "mixed-12", "--llama-server", llama_server_binary.path,
                             "--draft", "runtime:ngram-mod", "--clients", "1", "--threads", "2", "--out", str(out)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = out / "llama-server-ngram-mod" / "server.llama-server.log"
    deadline = time.monotonic() + 300
    # kill the speculative server once it has answered a few requests
    while time.monotonic() < deadline and len(list((out / "llama-server-ngram-mod").glob("c1/pass0/*.spectui"))) < 3:
        time.sleep(0.2)
    import psutil

    victims = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] and "llama-server" in p.info["cmdline"][0]
               and "ngram-mod" in " ".join(p.info["cmdline"])]
    assert victims, log.read_text()[-2000:] if log.exists() else "no server"
    for v in victims:
        os.kill(v.pid, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 2, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("spectui: error: workload stopped: llama-server ngram-mod") and "Traceback" not in stderr
    result = load_result(out)
    assert not result.complete and result.stopped
    kept = [r for lv in result.levels for r in lv.requests if r.n_tokens]
    assert kept and all(read_recording(out / r.recording).complete for r in kept)


def test_ctrl_c_mid_level_keeps_every_recording_complete(llama_server_binary, tmp_path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "spectui", "workload", "mixed-12", "--llama-server", llama_server_binary.path,
                             "--draft", "runtime:ngram-mod", "--clients", "2", "--threads", "2", "--headless", "--out", str(out)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list(out.glob("llama-server-AR/c2/pass0/*.spectui"))) < 3:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)  # mid-level: the AR setting at 2 clients has requests in flight
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert "incomplete: interrupted" in stdout and "Traceback" not in stderr
    files = sorted(out.rglob("*.spectui"))
    assert files and all(read_recording(f).complete for f in files)
    result = load_result(out)
    assert not result.complete and result.stopped == "interrupted"
    kept = {r.recording for lv in result.levels for r in lv.requests}
    assert kept and all((out / k).is_file() for k in kept)


def _serve(binary: str, model: str, *extra: str) -> tuple[subprocess.Popen, str]:
    """A llama-server started here, as a person would, without spectui: no key, loopback."""
    from spectui.runtime.server import free_port
    from spectui.server.client import ServerClient, ServerError, parse_server_url

    port = free_port()
    proc = subprocess.Popen([binary, "-m", model, "-t", "2", "-np", "2", "-c", "8192", "--metrics", "--host", "127.0.0.1",
                             "--port", str(port), *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    client = ServerClient(parse_server_url(url))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if client.get("/health", timeout_s=2).ok:
                return proc, url
        except ServerError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("llama-server did not start")


def test_a_server_spectui_did_not_start_is_measured_beside_its_ar(llama_server_binary, model_path, tmp_path) -> None:
    spec, spec_url = _serve(llama_server_binary.path, model_path, "--spec-type", "ngram-simple")
    ar, ar_url = _serve(llama_server_binary.path, model_path)
    try:
        out = tmp_path / "run"
        proc = run_cli("workload", "summaries", "--server", spec_url, "--ar-server", ar_url, "--target", model_path,
                       "--clients", "1,2", "--max-tokens", "24", "--out", str(out), "--json", timeout=600)
    finally:
        for p in (spec, ar):
            p.terminate()
            p.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    spec_levels = [lv for lv in doc["levels"] if not lv["ar"]]
    assert {lv["clients"] for lv in spec_levels} == {1, 2} and all(lv["family"] == "server" for lv in doc["levels"])
    # its counters read around each level from its /metrics, its requests paired with the AR server's
    assert all(lv["drafted"] >= 0 and "/metrics" in lv["acceptance_source"] for lv in spec_levels)
    assert all(lv["speedup"] is not None for lv in spec_levels)
    assert all(r["exact"] in ("identical", "near-tie", "batched", "defect", "unjudged") for lv in spec_levels for r in lv["per_request"])
    assert all(lv["server_cpu_s"] > 0 for lv in spec_levels)  # the process behind the port, found as the watch finds it
