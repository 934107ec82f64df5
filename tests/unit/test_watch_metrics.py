"""The watch's metric parsers on /metrics texts written with each server's own metric names
(tests/data/metrics/make_metrics.py says where each name comes from), at successive moments of
one watch, the last after a server restart; and the figures two readings give.

No model, no network: the texts are files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spectui.metrics.prometheus import (
    LLAMA_SERVER,
    SGLANG,
    VLLM,
    MalformedMetrics,
    detect_families,
    parse_exposition,
    read_counters,
)
from spectui.metrics.watch_rates import WatchFold, interval, restarted

DATA = Path(__file__).resolve().parents[1] / "data" / "metrics"


def readings(server: str) -> list:
    files = sorted(DATA.glob(f"{server}-*.txt"))
    assert len(files) >= 3, files
    out = []
    for i, path in enumerate(files):
        exposition = parse_exposition(path.read_text())
        families = detect_families(exposition)
        out.append(read_counters(exposition, families, t_s=2.0 * i))
    return out


@pytest.mark.parametrize(("server", "families"), [("llama-server", LLAMA_SERVER), ("vllm", VLLM), ("sglang", SGLANG)])
def test_each_server_is_recognised_by_its_own_names(server, families):
    exposition = parse_exposition((DATA / f"{server}-1.txt").read_text())
    assert detect_families(exposition) is families
    # every series the families name for this server is in the text (none misspelt)
    named = [
        getattr(families, f)
        for f in ("generated_tokens", "prompt_tokens", "requests_running", "requests_waiting", "requests_finished", "drafts",
                  "draft_tokens", "accepted_tokens", "accepted_per_position", "accept_rate_gauge", "accept_length_gauge",
                  "verify_calls", "decode_calls")
    ]  # fmt: skip
    for name in filter(None, named):
        assert exposition.has(name), name


def test_llama_server_counters_and_per_position():
    r = readings("llama-server")
    assert r[0].drafts == 0 and r[0].accepted_per_position == ()  # no per-position series before a draft
    assert (r[1].generated_tokens, r[1].requests_running, r[1].requests_waiting) == (128, 1, 2)
    assert r[1].accepted_per_position == (55, 43, 28) and sum(r[1].accepted_per_position) == r[1].accepted_tokens
    assert r[1].requests_finished is None  # llama-server counts no requests: None, not 0
    # a counter past 999999, as llama.cpp's C++ stream prints it (6 significant digits)
    assert r[2].generated_tokens == 1.23457e06


def test_llama_server_interval_figures():
    step = interval(*readings("llama-server")[:2])
    assert not step.restarted and step.dt_s == 2.0
    assert step.generated_tok_s == pytest.approx(64.0)
    assert step.acceptance_rate == pytest.approx(126 / 180)
    assert step.mean_accepted_length == pytest.approx(1 + 126 / 62)
    assert step.per_position == pytest.approx((55 / 62, 43 / 62, 28 / 62))


def test_vllm_interval_figures():
    r = readings("vllm")
    step = interval(r[0], r[1])
    assert step.generated_tokens == 1500 and step.requests_finished == 3  # stop + length, summed over reasons
    assert (step.requests_running, step.requests_waiting) == (4, 0)
    assert step.acceptance_rate == pytest.approx(900 / 1200)
    assert step.mean_accepted_length == pytest.approx(1 + 900 / 400)
    assert step.per_position == pytest.approx((360 / 400, 315 / 400, 225 / 400))


def test_sglang_says_what_it_does_not_report():
    r = readings("sglang")
    step = interval(r[0], r[1])
    # no drafted/accepted counters: no acceptance rate from counters, only SGLang's own gauges
    assert step.acceptance_rate is None and step.mean_accepted_length is None and step.per_position == ()
    assert (step.accept_rate_gauge, step.accept_length_gauge) == (0.7, 3.1)
    assert step.tokens_per_verify == pytest.approx(1500 / 500)
    assert (step.requests_running, step.requests_waiting, step.requests_finished) == (5, 3, 3)
    assert "acceptance per draft position" in SGLANG.not_reported


@pytest.mark.parametrize("server", ["llama-server", "vllm", "sglang"])
def test_a_restart_mid_watch_counts_from_zero_never_negative(server):
    fold = WatchFold()
    steps = [fold.add(r) for r in readings(server)]
    assert steps[0] is None
    last = steps[-1]
    assert last.restarted and fold.totals.restarts == 1
    assert not any(s.restarted for s in steps[1:-1])
    for s in steps[1:]:
        for value in (s.generated_tokens, s.generated_tok_s, s.drafts, s.draft_tokens, s.accepted_tokens, s.requests_finished):
            assert value is None or value >= 0
        assert all(p >= 0 for p in s.per_position)
    # after the restart the increase is the new counter's value (Prometheus's rate() rule)
    assert last.generated_tokens == readings(server)[-1].generated_tokens
    # the watch's totals add the intervals: what came before the restart is kept
    assert fold.totals.generated_tokens == pytest.approx(sum(s.generated_tokens for s in steps[1:]))


def test_a_changed_process_start_is_a_restart_even_when_counters_grew():
    import dataclasses

    a, b = readings("vllm")[:2]
    a = dataclasses.replace(a, started_at=1000.0)
    b = dataclasses.replace(b, started_at=2000.0)
    assert restarted(a, b)
    step = interval(a, b)
    assert step.generated_tokens == b.generated_tokens  # counted from zero, not b - a
    assert not restarted(a, dataclasses.replace(b, started_at=1000.0))


def test_nothing_drafted_is_no_rate_not_zero():
    r = readings("llama-server")
    step = interval(r[1], r[1])  # no counter moved
    assert step.acceptance_rate is None and step.mean_accepted_length is None and step.per_position == ()
    assert step.generated_tokens == 0


def test_several_engines_and_ranks_add_up():
    text = (
        '# TYPE vllm:num_requests_running gauge\n'
        'vllm:num_requests_running{engine="0",model_name="m"} 2.0\n'
        'vllm:num_requests_running{engine="1",model_name="m"} 3.0\n'
        '# TYPE vllm:generation_tokens_total counter\n'
        'vllm:generation_tokens_total{engine="0",model_name="m"} 10.0\n'
        'vllm:generation_tokens_total{engine="1",model_name="m"} 5.0\n'
    )
    r = read_counters(parse_exposition(text), VLLM, 0.0)
    assert r.requests_running == 5 and r.generated_tokens == 15
    assert r.drafts is None and not r.speculative_series  # vLLM without --speculative-config


def test_malformed_text_is_one_line():
    with pytest.raises(MalformedMetrics) as err:
        parse_exposition("<html><body>Not Found</body></html>\n")
    assert "\n" not in str(err.value) and "<html>" in str(err.value)
    assert detect_families(parse_exposition("# HELP x y\n# TYPE x gauge\nx 1\n")) is None
