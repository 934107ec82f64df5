"""``spectui tune --workload`` on real llama-servers spectui starts: a tiny space (ngram-cache,
ngram-simple's knobs and their chain) on a tiny workload of four short requests at two clients,
searched on two of them and checked on the other two, then printed again by --analyze and saved
as a profile in the user's own config file. One run serves every test here (about two minutes)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.server]

PROMPTS = [
    "List the numbers from 1 to 12, one per line.",
    "Repeat this sentence twice: the quick brown fox jumps over the lazy dog.",
    "Write the alphabet in capital letters, separated by commas.",
    "Say the days of the week, one per line.",
]


@pytest.fixture(scope="module")
def tuned(llama_server_binary, tmp_path_factory) -> tuple[dict, Path, Path]:
    root = tmp_path_factory.mktemp("tune-traffic")
    workload = root / "tiny.jsonl"
    workload.write_text("".join(json.dumps({"messages": [{"role": "user", "content": p}], "max_tokens": 32}) + "\n" for p in PROMPTS))
    out = root / "run"
    config_home = root / "config"
    env_before = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(config_home)
    try:
        proc = run_cli("tune", "--workload", str(workload), "--llama-server", llama_server_binary.path,
                       "--draft", "runtime:ngram-cache,runtime:ngram-simple", "--threads", "1", "--budget", "10", "--clients", "2",
                       "--out", str(out), "--save-profile", "tuned", "--json", timeout=600)
    finally:
        if env_before is None:
            os.environ.pop("XDG_CONFIG_HOME", None)
        else:
            os.environ["XDG_CONFIG_HOME"] = env_before
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the headless progress lines: the space priced, then the race
    assert "14 settings priced on the tuning half" in proc.stderr and "spectui tune: race round 1: " in proc.stderr
    return json.loads(proc.stdout), out, config_home


def test_the_space_is_priced_then_raced_and_checked_on_the_other_half(tuned) -> None:
    doc, out, _ = tuned
    from spectui.tune.traffic_search import FINALISTS, RACE_ROUNDS

    assert doc["space"] == 14  # ngram-cache 1, ngram-simple 3 x 4, their chain
    assert doc["split"] == {"tuning": [0, 2], "check": [1, 3]}
    # every setting priced from its replayed drafter; only the best priced run, on the whole tuning half
    assert doc["tried"] == 14 and doc["trials"] <= 14 + FINALISTS * RACE_ROUNDS
    prices = json.loads((out / "search" / "prices" / "prices.json").read_text())
    assert prices["requests"] == [0, 2] and len(prices["counts"]) == 14
    best = doc["best"]
    assert best["speedup"] is not None and best["speedup"] > 0
    assert sum(best["requests"][k] for k in ("identical", "near_tie", "batched", "defect", "unjudged")) == 2
    assert [d["setting"] for d in doc["defaults"]] == [s for s in ("ngram-cache as shipped", "ngram-simple as shipped")
                                                      if s != best["setting"]]
    if doc["advised"] is None:
        assert "run AR" in doc["advice"]
    else:
        assert doc["command"].split()[0].endswith("llama-server") and "--spec-type" in doc["command"]
        assert "--port" not in doc["command"]


def test_the_check_requests_are_unseen_by_every_server_measured_on_them(tuned) -> None:
    """At 2 clients the reference (AR at one client) runs on a server of its own: no measured
    server answered a check request before its own level (as a first level of every server, it
    let ngram-mod copy its own earlier answers: document-qa 2.14x in the check, 1.01x unseen)."""
    doc, out, _ = tuned
    from spectui.recording.reader import read_header

    references = sorted(p.parent.parent.parent.name for p in (out / "check").rglob("c1/pass0/*.spectui"))
    assert references and all("reference" in name for name in references), references  # one client: the reference alone
    measured = [p for p in (out / "check").rglob("c2/pass0/*.spectui")]
    assert len(measured) == 2 * (2 + len(doc["defaults"]))  # AR, the tuned and each default, on both check requests
    for path in measured:
        load = read_header(path).load
        assert load is not None and load.clients == 2
        # warm with the tuning half (2 requests), and never after answering the check half itself
        assert 2 <= load.served_before < 2 + 2, (path, load.served_before)


def test_the_check_judged_again_from_its_folder_keeps_every_verdict(tuned) -> None:
    """The reference apart is kept in the check's result: judged again from the recordings (``spectui
    workload --analyze``), every request meets the same reference and keeps its verdict (without
    it, every request read identical)."""
    from spectui.workload.result import load_result

    _, out, _ = tuned
    before = load_result(out / "check")
    assert [lv.setting for lv in before.references] == ["llama-server AR (reference)"]
    assert all(r.exact == "reference" for r in before.references[0].requests)
    proc = run_cli("workload", "--analyze", str(out / "check"))
    assert proc.returncode == 0, proc.stderr
    assert "not judged again" not in proc.stderr and "verdict(s) changed" not in proc.stderr, proc.stderr


def test_every_setting_runs_twice_in_mirrored_order_and_each_time_is_the_two_runs_mean(tuned) -> None:
    """The check runs AR, the tuned setting and the defaults, then each once more the other way
    round (the defaults backwards, the tuned one, AR) on servers of their own warmed alike; a
    request's time is its two runs' mean, a setting's speedup the summed AR times over its own,
    and the runs' differences are the host's spread the interval holds."""
    from spectui.tune.traffic_report import load
    from spectui.workload.result import load_result, time_to

    doc, out, _ = tuned
    first = [lv for lv in load_result(out / "check").levels if lv.clients == 2]
    again = [lv for lv in load_result(out / "check-again").levels if lv.clients == 2]
    (ar_again,) = [lv for lv in load_result(out / "check-AR-again").levels if lv.clients == 2]
    result = load(out)
    order = [f"llama-server {r.label}" for r in result.rows if r.role != "AR"]
    assert [lv.setting for lv in first] == ["llama-server AR", *order]
    assert [lv.setting for lv in again] == [f"{label} again" for label in reversed(order)]
    assert ar_again.setting == "llama-server AR again" and sorted(r.index for r in ar_again.requests) == doc["split"]["check"]
    for folder in ("check-again", "check-AR-again"):
        warmed = {int(p.stem) for p in (out / folder).rglob("warmup/*.spectui")}
        assert warmed == set(doc["split"]["tuning"]), folder
    ar_first = next(lv for lv in first if lv.setting == "llama-server AR")
    tuned_row = next(r for r in result.rows if r.role == "tuned")
    one = next(lv for lv in first if lv.setting == f"llama-server {tuned_row.label}")
    two = next(lv for lv in again if lv.setting == f"llama-server {tuned_row.label} again")
    timed = 0
    for row in tuned_row.requests:
        n = next(r.common for r in one.requests if r.index == row.index)
        if not n or row.ms is None:
            continue
        runs = [time_to(next(r for r in lv.requests if r.index == row.index), n) for lv in (one, two)]
        ar_runs = [time_to(next(r for r in lv.requests if r.index == row.index), n) for lv in (ar_first, ar_again)]
        assert row.runs_ms == pytest.approx(runs) and row.ms == pytest.approx(sum(runs) / 2)
        assert row.ar_runs_ms == pytest.approx(ar_runs) and row.ar_ms == pytest.approx(sum(ar_runs) / 2)
        timed += 1
    assert timed
    known = [(r.ar_ms, r.ms) for r in tuned_row.requests if r.ar_ms and r.ms]
    assert doc["best"]["speedup"] == pytest.approx(sum(a for a, _ in known) / sum(m for _, m in known))
    assert doc["run_spread"]["settings"] == len(result.rows) and doc["run_spread"]["sd"] > 0


def test_everything_is_recorded_in_one_folder_and_analyze_prints_it_again(tuned) -> None:
    doc, out, _ = tuned
    assert (out / "tune-traffic.json").is_file()
    assert list((out / "search").rglob("*.spectui")) and list((out / "check").rglob("*.spectui"))
    # the search's servers start cold, its AR's too: one AR run a round of the race, every setting of it paired with it
    assert not list((out / "search").rglob("warmup/*.spectui"))
    # the check's servers were warm: each answered the tuning half first, in no figure
    warmed = {p.parent.parent.name: sorted(int(q.stem) for q in p.parent.glob("*.spectui")) for p in (out / "check").rglob("warmup/*.spectui")}
    assert warmed and all(indices == doc["split"]["tuning"] for indices in warmed.values()), warmed
    proc = run_cli("tune", "--analyze", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    again = json.loads(proc.stdout)
    assert again == doc
    text = run_cli("tune", "--analyze", str(out)).stdout
    assert doc["advice"] in text and "every check-half request" in text


def test_the_profile_goes_into_the_users_own_file(tuned) -> None:
    doc, _, config_home = tuned
    text = (config_home / "spectui" / "config.toml").read_text()
    assert "[profile.tuned]" in text and 'runtime = "llama-server"' in text
    if doc["advised"] is None:
        assert 'mode = "ar"' in text
    else:
        assert 'draft = "runtime:' in text
