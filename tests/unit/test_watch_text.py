"""What a watch says in words: a missing figure is a dash and a reason, never a zero; the
llama-server step (counters move when a request finishes) is said, not drawn as a flat line;
a server that is not drafting gets the one line that says how to turn drafting on."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from spectui.metrics.prometheus import LLAMA_SERVER, SGLANG, VLLM, parse_exposition, read_counters
from spectui.metrics.watch_rates import interval
from spectui.watch.sampler import WatchSample
from spectui.watch.source import LiveSlots, WatchTarget, live_slots
from spectui.watch.text import opening_lines, sample_line, speculation_missing

DATA = Path(__file__).resolve().parents[1] / "data" / "metrics"


def reading(name: str, t_s: float, families=LLAMA_SERVER):  # noqa: ANN001, ANN201
    return read_counters(parse_exposition((DATA / name).read_text()), families, t_s)


def test_a_running_request_not_yet_counted_is_said_not_drawn_as_zero():
    r1 = reading("llama-server-1.txt", 0.0)  # one request running
    step = interval(r1, dataclasses.replace(r1, t_s=1.0))  # a second later nothing has finished
    line = sample_line(LLAMA_SERVER, WatchSample(1, 1.0, r1, step, LiveSlots(1, 1, 1, 23)))
    assert "gen 0.0 tok/s" in line and "in flight 23 tok" in line
    assert "counted when a request finishes" in line
    assert "accept" not in line  # nothing drafted in the interval: no rate, not 0%


def test_opening_lines_say_what_the_server_does_not_report():
    lines = opening_lines(WatchTarget("http://127.0.0.1:1", SGLANG, {"server": "SGLang", "model": "m"}), 2.0)
    assert lines[0].startswith("watching SGLang at http://127.0.0.1:1 (model m), every 2 s; sending it only GETs")
    assert any(line.startswith("not reported: acceptance per draft position") for line in lines)
    vllm = opening_lines(WatchTarget("http://h:1", VLLM, {"server": "vLLM"}), 1.0)
    assert not any(line.startswith(("not reported", "note:")) for line in vllm)  # vLLM reports every figure live


def test_no_drafting_gets_one_line_with_the_switch():
    r = reading("llama-server-1.txt", 0.0)
    slots_off = live_slots([{"id": 0, "speculative": False, "is_processing": False}])
    assert slots_off == LiveSlots(1, 0, 0, 0)
    said = speculation_missing(LLAMA_SERVER, WatchSample(0, 0.0, r, None, slots_off))
    assert said is not None and "speculative: false" in said and "--spec-type" in said
    assert speculation_missing(LLAMA_SERVER, WatchSample(0, 0.0, r, None, LiveSlots(1, 0, 1, 0))) is None
    plain = read_counters(parse_exposition('# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 1\n'), SGLANG, 0.0)
    said = speculation_missing(SGLANG, WatchSample(0, 0.0, plain, None))
    assert said is not None and "--speculative-algorithm" in said


def test_sglang_zero_gauges_mean_no_figure():
    text = (
        "# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length 0.0\n"
        "# TYPE sglang:spec_accept_rate gauge\nsglang:spec_accept_rate 0.0\n"
    )
    r = read_counters(parse_exposition(text), SGLANG, 0.0)
    assert r.accept_length_gauge is None and r.accept_rate_gauge is None and not r.speculative_series


def test_slots_body_from_llama_server():
    body = [
        {"id": 0, "speculative": True, "is_processing": True, "next_token": [{"n_decoded": 12}]},
        {"id": 1, "speculative": True, "is_processing": False, "next_token": [{"n_decoded": 40}]},
    ]
    assert live_slots(body) == LiveSlots(slots=2, processing=1, speculative=2, decoded_in_flight=12)
    assert live_slots({"error": "not supported"}) is None
