"""``spectui tune --workload`` without a model: the split, the space, the flags each candidate
passes, successive halving on recorded figures, the report and its JSON, --analyze, and every
bad input refused in one line with nothing written."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from spectui.errors import SpectuiError
from spectui.prompts import prompts_dir
from spectui.runtime.methods import METHODS
from spectui.runtime.session import method_of
from spectui.tune.traffic_report import (
    AR,
    DEFAULT,
    TUNED,
    CheckRow,
    RequestRow,
    TrafficResult,
    advice,
    format_text,
    load,
    ratio_ci,
    ratio_of_sums,
    run_spread,
    save,
    to_json,
    widened,
)
from spectui.tune.traffic_search import ETA, Search, Status, Trial, check_budget, min_budget_s, shares
from spectui.tune.traffic_space import Applicable, Candidate, build_space, candidate_config, defaults_of, method_space
from spectui.tune.traffic_split import split_units
from spectui.workload.source import read_workload
from spectui.workload.tuning import halves, portion, tokens
from tests.conftest import run_cli

NGRAM = tuple(n for n in METHODS if n.startswith("ngram"))
SHIPPED = prompts_dir() / "workloads"


def write_jsonl(path: Path, lines: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


# -- the split ---------------------------------------------------------------------------------


def test_split_alternates_units_and_keeps_a_conversation_whole(tmp_path):
    chat = {"role": "user", "content": "hi"}
    lines = [
        {"messages": [chat], "max_tokens": 8},  # 0
        {"conversation": "c", "messages": [chat], "max_tokens": 8},  # 1
        {"messages": [chat], "max_tokens": 8},  # 2
        {"conversation": "c", "messages": [chat, {"role": "assistant", "content": "a"}, chat], "max_tokens": 8},  # 3
        {"messages": [chat], "max_tokens": 8},  # 4
    ]
    w = read_workload(write_jsonl(tmp_path / "w.jsonl", lines))
    tuning, check = halves(w)
    assert [r.index for r in tuning.requests] == [0, 2]
    assert [r.index for r in check.requests] == [1, 3, 4]  # the conversation's two turns together
    again = halves(w)
    assert again == (tuning, check)  # deterministic


def test_a_workload_of_one_conversation_is_too_small_to_split():
    w = read_workload(SHIPPED / "code-review.jsonl")
    with pytest.raises(SpectuiError, match="4 requests in one conversation: too few to split"):
        halves(w)
    with pytest.raises(SpectuiError, match="too few"):
        split_units([("only",)])


def test_a_portion_takes_first_units_then_cuts_tokens():
    w = read_workload(SHIPPED / "mixed-12.jsonl")
    tuning, _ = halves(w)
    units = tuning.units()
    assert len(portion(tuning, 1.0).requests) == len(tuning.requests)
    third = portion(tuning, 1 / 3)
    assert third.units() == units[: round(len(units) / 3)]
    tiny = portion(tuning, 1 / 81)
    assert [r.index for r in tiny.requests] == [units[0][0].index]  # a conversation's first turn: a screen
    assert all(r.max_tokens == 24 for r in tiny.requests)  # never under MIN_TOKENS
    assert tokens(tiny) < tokens(tuning)


def test_a_portion_at_a_load_keeps_a_stream_per_client():
    w = read_workload(SHIPPED / "mixed-12.jsonl")
    tuning, _ = halves(w)
    units = tuning.units()
    tiny = portion(tuning, 1 / 27, clients=2)
    assert [r.index for r in tiny.requests] == [u[0].index for u in units[:2]]  # two clients, two streams
    assert tokens(tiny) < tokens(portion(tuning, 1 / 27, clients=1)) * 2 + 1
    assert portion(tuning, 1.0, clients=2).requests == tuning.requests


# -- the space ---------------------------------------------------------------------------------


def test_the_space_is_each_methods_declared_knobs_and_chains_of_two():
    cands = build_space(Applicable(accepted=NGRAM))
    singles = [c for c in cands if len(c.types) == 1]
    for name in NGRAM:
        declared = METHODS[name].space
        n = math.prod(len(v) for _, v in declared) if declared else 1
        assert sum(1 for c in singles if c.types == (name,)) == n
    assert sum(1 for c in cands if len(c.types) == 2) == math.comb(len(NGRAM), 2)
    assert len(set(cands)) == len(cands)
    assert defaults_of(cands) == [Candidate((n,)) for n in NGRAM]
    assert method_space("ngram-mod")[0].is_default
    # dealt in turn: every method as shipped and the first chain, then each one's next setting
    assert cands[: len(NGRAM) + 1] == [*(Candidate((n,)) for n in NGRAM), Candidate(NGRAM[:2])]
    first_of_each = [next(i for i, c in enumerate(cands) if c.types == (n,) and not c.is_default) for n in NGRAM if METHODS[n].space]
    assert max(first_of_each) < 2 * (len(NGRAM) + 1)  # a budget that ends early has tried every method's knobs


def test_model_drafters_apply_only_with_their_draft_and_mtp_only_with_nextn():
    every = tuple(n for n in METHODS if n != "none")
    none = build_space(Applicable(accepted=every), chains=False)
    assert {c.method for c in none} == set(NGRAM)
    simple = build_space(Applicable(accepted=every, draft_arch="llama"), chains=False)
    assert {c.method for c in simple} == {*NGRAM, "draft-simple"}
    mtp = build_space(Applicable(accepted=every, nextn=True), chains=False)
    assert "draft-mtp" in {c.method for c in mtp}


def test_a_method_the_binary_does_not_list_is_one_line():
    with pytest.raises(SpectuiError, match="does not accept --spec-type ngram-mod"):
        build_space(Applicable(accepted=("ngram-simple",)), methods=["ngram-mod"])
    with pytest.raises(SpectuiError, match="draft-simple does not apply here: it needs a draft model"):
        build_space(Applicable(accepted=("ngram-simple", "draft-simple")), methods=["draft-simple"])


def test_each_candidate_runs_with_the_flags_its_knobs_name():
    from spectui.config import BackendConfig, RunConfig

    base = RunConfig(prompt="x", mode="ar", backend=BackendConfig(name="llama-server"))
    c = Candidate(("ngram-mod",), k=16, n_min=2, lookup=12)
    args = method_of(candidate_config(base, c)).args()
    assert args == ["--spec-type", "ngram-mod", "--spec-ngram-mod-n-max", "16", "--spec-ngram-mod-n-min", "2",
                    "--spec-ngram-mod-n-match", "12"]
    assert c.label() == "ngram-mod n-max 16, n-min 2, n-match 12"
    assert method_of(candidate_config(base, Candidate(("ngram-simple",)))).args() == ["--spec-type", "ngram-simple"]
    assert method_of(candidate_config(base, None)).args() == []  # AR
    assert Candidate(("ngram-simple",)).label() == "ngram-simple as shipped"
    assert Candidate.from_dict(c.to_dict()) == c


# -- successive halving on recorded figures ----------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def recorded(speedups: dict[Candidate, float], clock: Clock, seconds_per_share: float = 10.0):
    calls: list[tuple[Candidate, int]] = []

    def measure(c: Candidate, rung: int, share: float) -> Trial:
        calls.append((c, rung))
        clock.t += seconds_per_share * share
        # a little noise that shrinks as the share grows: the true order shows at the full half
        return Trial(rung, c, share, speedups[c] + (0.02 if rung == 0 and c.k == 16 else 0.0), seconds_per_share * share)

    return measure, calls


def test_halving_finds_the_best_for_under_a_third_of_the_grids_cost():
    cands = build_space(Applicable(accepted=NGRAM))
    truth = {c: 0.8 + 0.01 * i for i, c in enumerate(cands)}
    best = max(truth, key=truth.__getitem__)
    clock = Clock()
    measure, calls = recorded(truth, clock)
    search = Search(list(cands), budget_s=1e9, clock=clock)
    seen: list[Status] = []
    assert search.run(measure, progress=seen.append) == best
    plan = shares(len(cands))
    assert plan[-1] == 1.0 and len(plan) == 4
    assert clock.t <= 0.30 * 10.0 * len(cands)  # the grid: every candidate on the whole half
    assert len([c for c, r in calls if r == 0]) == len(cands)
    assert {r for _, r in calls} == set(range(len(plan)))
    # as rung 2 starts, the quarter that went through waits for its turn: only the rest are out
    first_of_rung2 = next(st for st in seen if st.rung == 1)
    assert first_of_rung2.eliminated == len(cands) - math.ceil(len(cands) / ETA)
    status = seen[-1]  # the search's end: the winner alone is left
    assert status.rung == len(plan) - 1 and status.tried == len(cands) and status.eliminated == len(cands) - 1
    assert "leading" in status.line() and "budget left" in status.line()


def test_the_budget_stops_the_search_and_the_leader_so_far_wins():
    cands = build_space(Applicable(accepted=NGRAM))
    truth = {c: 1.0 + 0.01 * i for i, c in enumerate(cands)}
    clock = Clock()
    measure, calls = recorded(truth, clock, seconds_per_share=60.0)
    search = Search(list(cands), budget_s=60.0, clock=clock)  # the first rung's share is 1/64: ~0.9 s a candidate
    winner = search.run(measure)
    assert search.stopped.startswith("the budget ran out")
    assert winner is not None and winner in {c for c, _ in calls}
    assert clock.t <= 60.0


def test_a_candidate_that_failed_is_never_the_winner():
    a, b = Candidate(("ngram-mod",)), Candidate(("ngram-simple",))

    def measure(c: Candidate, rung: int, share: float) -> Trial:
        return Trial(rung, c, share, math.nan if c == a else 0.9, 1.0, error="refused" if c == a else "")

    assert Search([a, b], budget_s=100).run(measure) == b


def test_a_budget_too_small_for_one_candidate_is_one_line():
    least = min_budget_s(200, 200, 3)
    check_budget(least, least)
    with pytest.raises(SpectuiError, match="too small for one candidate"):
        check_budget(least / 2, least)


# -- the report --------------------------------------------------------------------------------


def rows(tuned: float, mod: float, simple: float) -> list[CheckRow]:
    def requests(s: float, exact: str = "identical") -> list[RequestRow]:
        return [RequestRow(index=i, exact=exact, ms=100.0 + i, ar_ms=(100.0 + i) * s) for i in (1, 3, 5)]

    return [
        CheckRow(role=AR, label="AR", requests=requests(1.0, "reference")),
        CheckRow(role=TUNED, label="ngram-mod n-max 16, n-min 2", candidate=Candidate(("ngram-mod",), k=16, n_min=2).to_dict(),
                 command="llama-server -m m.gguf --spec-type ngram-mod --spec-ngram-mod-n-max 16", speedup=tuned,
                 requests=requests(tuned)),
        CheckRow(role=DEFAULT, label="ngram-mod as shipped", candidate=Candidate(("ngram-mod",)).to_dict(), speedup=mod,
                 command="llama-server -m m.gguf --spec-type ngram-mod", requests=requests(mod)),
        CheckRow(role=DEFAULT, label="ngram-simple as shipped", candidate=Candidate(("ngram-simple",)).to_dict(), speedup=simple,
                 requests=requests(simple, "near-tie")),
    ]


def result(tuned: float = 1.31, mod: float = 0.95, simple: float = 0.76) -> TrafficResult:
    trials = [Trial(0, Candidate(("ngram-mod",), k=16, n_min=2), 1 / 3, 1.2, 3.0, 1).to_dict(),
              Trial(1, Candidate(("ngram-mod",), k=16, n_min=2), 1.0, 1.3, 9.0, 3).to_dict()]
    return TrafficResult(workload="mixed-12", path="w.jsonl", model="SmolLM2", clients=1, budget_s=900, search_s=60,
                         check_s=30, space=31, space_by_method={"ngram-mod": 8}, tuning=[0, 2, 4], check=[1, 3, 5],
                         trials=trials, rows=rows(tuned, mod, simple), complete=True)


def test_the_advice_names_the_setting_its_figures_and_every_default():
    line = advice(result())
    assert line.startswith("at 1 client: ngram-mod n-max 16, n-min 2: 1.31x AR on 3 requests it never saw (95% CI ")
    assert "all 3 identical" in line and "ngram-mod as shipped: 0.95x" in line and "ngram-simple as shipped: 0.76x" in line


def test_run_ar_where_nothing_beats_ar_by_the_noise_margin():
    line = advice(result(tuned=1.01, mod=0.95, simple=0.9))
    assert line.startswith("at 1 client: run AR: no setting beat AR by 3% with its 95% interval above AR on 3 requests it never saw")
    doc = to_json(result(tuned=1.01, mod=0.95, simple=0.9))
    assert doc["advised"] is None and doc["command"] == ""


def twice(result: TrafficResult, moved: float) -> TrafficResult:
    """``result`` as a check of two runs a setting, each setting's second run ``moved`` times
    its first (AR's the other way), every request's figure the two runs' mean."""
    for row in result.rows:
        factor = 1 / moved if row.role == AR else moved
        for q in row.requests:
            a, b = 2 * q.ms / (1 + factor), 2 * q.ms * factor / (1 + factor)
            q.runs_ms = [a, b]
            q.ar_runs_ms = [2 * q.ar_ms / (1 + 1 / moved), 2 * q.ar_ms / moved / (1 + 1 / moved)]
    return result


def test_the_run_spread_is_pooled_over_every_setting_run_twice():
    spread = run_spread(twice(result(), 1.1).rows)
    assert spread.settings == 4  # AR, the tuned one and both defaults
    assert spread.sd == pytest.approx(math.log(1.1) / math.sqrt(2))
    assert not run_spread(result().rows).known  # one run each: no spread to pool


def test_the_interval_holds_the_runs_spread_besides_the_requests():
    lo, hi = ratio_ci([(130.0, 100.0), (135.0, 100.0), (128.0, 100.0)])
    value = 393 / 300
    wide_lo, wide_hi = widened(value, (lo, hi), run_spread(twice(result(), 1.1).rows), 2, 2)
    assert wide_lo < lo and wide_hi > hi
    assert widened(value, (lo, hi), run_spread(result().rows), 1, 1) == (lo, hi)


def test_a_gain_inside_the_hosts_run_to_run_noise_is_run_ar():
    """1.10x on every request clears the margin on the requests alone, and not once the
    settings' second runs moved 15% from their first: the advice is AR."""
    steady = result(tuned=1.10, mod=0.95, simple=0.9)
    assert to_json(steady)["advised"] == "ngram-mod n-max 16, n-min 2"
    noisy = twice(result(tuned=1.10, mod=0.95, simple=0.9), 1.15)
    doc = to_json(noisy)
    assert doc["advised"] is None and doc["best"]["ci"][0] < 1.0 < doc["best"]["ci"][1]
    assert doc["run_spread"]["settings"] == 4 and doc["run_spread"]["sd"] == pytest.approx(math.log(1.15) / math.sqrt(2))
    assert "run AR" in doc["advice"] and "interval above AR" in doc["advice"]
    assert "moved 10% (one sd) from its twin on this host, over 4 settings run twice" in format_text(noisy)
    quiet = twice(result(tuned=1.10, mod=0.95, simple=0.9), 1.01)
    assert to_json(quiet)["advised"] == "ngram-mod n-max 16, n-min 2"


def test_a_default_that_does_better_on_the_check_half_is_what_is_advised():
    line = advice(result(tuned=1.05, mod=1.20, simple=0.9))
    assert line.startswith("at 1 client: ngram-mod as shipped: 1.20x") and "the tuned ngram-mod n-max 16, n-min 2 ran 1.05x" in line


def test_a_setting_with_a_defect_is_never_advised_however_fast():
    """Speculation that changed one output on the check half rules a setting out: the next
    fastest that clears the bar is advised, or AR, and the line says why."""
    fast_but_wrong = result(tuned=1.40, mod=1.20, simple=0.9)
    fast_but_wrong.rows[1].requests[0].exact = "defect"
    assert advice(fast_but_wrong).startswith("at 1 client: ngram-mod as shipped: 1.20x")
    fast_but_wrong.rows[2].requests[2].exact = "defect"
    line = advice(fast_but_wrong)
    assert line.startswith("at 1 client: run AR: ") and "ngram-mod n-max 16, n-min 2: 1.40x" in line
    assert line.count("with 1 defect: never advised") == 2 and to_json(fast_but_wrong)["advised"] is None


def test_json_has_the_issues_shape_with_check_half_figures():
    doc = to_json(result())
    assert doc["space"] == 31 and doc["tried"] == 1
    best = doc["best"]
    assert best["setting"] == "ngram-mod n-max 16, n-min 2" and best["command"].startswith("llama-server")
    assert best["speedup"] == pytest.approx(1.31) and len(best["ci"]) == 2
    assert set(best["requests"]) >= {"identical", "near_tie", "batched", "defect"} and best["requests"]["identical"] == 3
    assert [d["setting"] for d in doc["defaults"]] == ["ngram-mod as shipped", "ngram-simple as shipped"]
    assert doc["defaults"][1]["requests"]["near_tie"] == 3
    assert isinstance(doc["advice"], str) and doc["advised"] == best["setting"]
    json.dumps(doc, allow_nan=False)


def test_a_speedup_is_the_summed_ar_times_over_the_settings_own():
    rows = [RequestRow(index=0, exact="identical", ms=100.0, ar_ms=150.0),
            RequestRow(index=1, exact="identical", ms=200.0, ar_ms=210.0),
            RequestRow(index=2, exact="unjudged", ms=None, ar_ms=90.0)]  # no figure: left out of both sums
    assert ratio_of_sums(rows) == pytest.approx(360 / 300)
    assert math.isnan(ratio_of_sums(rows[2:]))


def test_ratio_ci_brackets_the_ratio_of_sums():
    pairs = [(120.0, 100.0), (130.0, 100.0), (110.0, 100.0), (125.0, 100.0)]
    lo, hi = ratio_ci(pairs)
    assert lo <= 485 / 400 <= hi
    assert all(math.isnan(v) for v in ratio_ci(pairs[:1]))


def test_the_text_shows_the_command_every_request_and_the_search_trail():
    text = format_text(result(), "/tmp/t")
    assert "llama-server -m m.gguf --spec-type ngram-mod --spec-ngram-mod-n-max 16" in text
    assert "#1 identical 1.31x" in text and "#5 near-tie 0.76x" in text
    assert "the search (tuning half only; not a result)" in text and "rung 2: 1 on 100% of the tuning half" in text
    assert "space: 31 settings" in text


# -- --analyze and bad inputs, through the command line ----------------------------------------


def test_analyze_prints_a_recorded_tune_again_without_a_model(tmp_path):
    save(result(), tmp_path)
    assert load(tmp_path) == result()
    proc = run_cli("tune", "--analyze", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("spectui tune: mixed-12 at 1 client") and "1.31x AR on 3 requests" in proc.stdout
    doc = json.loads(run_cli("tune", "--analyze", str(tmp_path), "--json").stdout)
    assert doc["best"]["speedup"] == pytest.approx(1.31)


@pytest.mark.parametrize(("extra", "message"), [
    (["code-review"], "too few to split"),
    (["mixed-12", "--clients", "0"], "--clients 0: the load to tune for needs 1 client or more"),
    (["mixed-12", "--budget", "0.001"], "too small for one candidate"),
    (["mixed-12", "--budget", "0"], "--budget 0: minutes above 0"),
    (["mixed-12", "--runtime", "mlx-lm"], "tune --workload tunes llama-server's methods"),
])
def test_bad_inputs_are_one_line_and_write_nothing(tmp_path, extra, message):
    out = tmp_path / "out"
    proc = run_cli("tune", "--out", str(out), "--workload", *extra)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not out.exists()


def test_a_runtime_that_is_not_there_is_one_line(tmp_path):
    out = tmp_path / "out"
    proc = run_cli("tune", "--out", str(out), "--workload", "mixed-12", "--llama-server", str(tmp_path / "no-such-server"))
    assert proc.returncode == 2
    assert "the runtime is not there" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not out.exists()
