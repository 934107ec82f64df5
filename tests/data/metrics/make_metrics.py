"""Regenerate the /metrics texts the watch parser tests read (run from the repo root):

    python tests/data/metrics/make_metrics.py

Each server's text is written the way that server writes it, with the metric names of its
source, at a few moments of one watch (``<server>-<n>.txt``): counters growing, then the server
restarted (counters back near zero) before the last one.

* llama-server: ``tools/server/server-task.cpp``, ``server_task_result_metrics::to_metrics``:
  per item ``# HELP llamacpp:<name> ...``, ``# TYPE llamacpp:<name> counter|gauge`` and
  ``llamacpp:<name> <value>``, the counters first, then the gauges, then the labelled
  ``spec_decode_num_accepted_tokens_per_pos_total{position="i"}`` (only once a speculative
  request finished). Values go through a C++ stream's default formatting (``double`` with 6
  significant digits): a counter past 999999 prints as ``1.23457e+06``, as here.
* vLLM and SGLang write theirs with prometheus_client, so these are prometheus_client's own
  output (``generate_latest``) of Counters and Gauges with the names, documentation and label
  names of ``vllm/v1/metrics/loggers.py`` + ``vllm/v1/spec_decode/metrics.py`` and of SGLang's
  ``python/sglang/srt/observability/metrics_collector.py``.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

HERE = Path(__file__).resolve().parent


def cpp_double(v: float) -> str:
    """``std::ostream << double`` with the default precision (6, general format)."""
    text = f"{v:.6g}"
    if "e" in text:  # C++ writes a two-digit exponent with its sign: 1.23457e+06
        mant, exp = text.split("e")
        sign = exp[0] if exp[0] in "+-" else "+"
        text = f"{mant}e{sign}{int(exp.lstrip('+-')):02d}"
    return text


def llama_server(c: dict, per_pos: list[int]) -> str:
    counters = [
        ("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens", c["prompt"]),
        ("prompt_tokens_cached_total", "Number of prompt tokens reused from the cache", c["cached"]),
        ("prompt_seconds_total", "Total time spent processing prompts", c["prompt_s"]),
        ("tokens_predicted_total", "Number of generation tokens processed", c["predicted"]),
        ("tokens_predicted_seconds_total", "Total time spent generating tokens", c["predicted_s"]),
        ("n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding", c["decode"]),
        ("n_tokens_max", "Largest observed sequence length (prompt + generation)", c["tokens_max"]),
        ("spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", c["draft_tokens"]),
        ("spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model", c["accepted"]),
        ("spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps", c["drafts"]),
    ]
    gauges = [
        ("prompt_tokens_seconds", "Average prompt throughput in tokens/s", c["prompt_tps"]),
        ("predicted_tokens_seconds", "Average generation throughput in tokens/s", c["predicted_tps"]),
        ("requests_processing", "Number of requests processing", c["processing"]),
        ("requests_deferred", "Number of requests deferred", c["deferred"]),
        ("n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", c["busy"]),
    ]
    out = []
    for kind, items in (("counter", counters), ("gauge", gauges)):
        for name, help_, value in items:
            out += [f"# HELP llamacpp:{name} {help_}", f"# TYPE llamacpp:{name} {kind}", f"llamacpp:{name} {cpp_double(value)}"]
    if per_pos:
        out += [
            "# HELP llamacpp:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position",
            "# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter",
        ]
        out += [f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {v}' for i, v in enumerate(per_pos)]
    return "\n".join(out) + "\n"


LLAMA = [
    # idle, fresh server: nothing drafted yet, so no per-position series at all
    (dict(prompt=0, cached=0, prompt_s=0, predicted=0, predicted_s=0, decode=0, tokens_max=0, draft_tokens=0, accepted=0,
          drafts=0, prompt_tps=0, predicted_tps=0, processing=0, deferred=0, busy=0), []),
    # two requests finished; one running (its tokens are not counted yet)
    (dict(prompt=96, cached=0, prompt_s=0.21, predicted=128, predicted_s=0.83, decode=70, tokens_max=160, draft_tokens=180,
          accepted=126, drafts=62, prompt_tps=457.1, predicted_tps=154.2, processing=1, deferred=2, busy=1), [55, 43, 28]),
    # a long-lived server: counters past 999999 lose digits in the C++ formatting
    (dict(prompt=2345678, cached=1200, prompt_s=4012.5, predicted=1234567, predicted_s=9876.5, decode=700123, tokens_max=4096,
          draft_tokens=1800321, accepted=1200456, drafts=600789, prompt_tps=300.2, predicted_tps=140.8, processing=0, deferred=0,
          busy=1), [500100, 400200, 300156]),
    # restarted: every counter is small again
    (dict(prompt=40, cached=0, prompt_s=0.1, predicted=32, predicted_s=0.22, decode=20, tokens_max=72, draft_tokens=30,
          accepted=21, drafts=12, prompt_tps=400.0, predicted_tps=145.5, processing=0, deferred=0, busy=1), [10, 7, 4]),
]  # fmt: skip


def vllm(c: dict) -> bytes:
    reg = CollectorRegistry()
    labels = ["model_name", "engine"]
    lv = ("Qwen/Qwen3-8B", "0")
    Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", labels, registry=reg).labels(*lv).set(c["running"])
    Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels, registry=reg).labels(*lv).set(c["waiting"])
    Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels, registry=reg).labels(*lv).inc(c["prompt"])
    Counter("vllm:generation_tokens", "Number of generation tokens processed.", labels, registry=reg).labels(*lv).inc(c["generated"])
    success = Counter("vllm:request_success", "Count of successfully processed requests.", labels + ["finished_reason"], registry=reg)
    for reason, n in c["finished"].items():
        success.labels(*lv, reason).inc(n)
    Counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", labels, registry=reg).labels(*lv).inc(c["drafts"])
    Counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", labels, registry=reg).labels(*lv).inc(c["draft_tokens"])
    Counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", labels, registry=reg).labels(*lv).inc(c["accepted"])
    per_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.", labels + ["position"], registry=reg)
    for i, n in enumerate(c["per_pos"]):
        per_pos.labels(*lv, str(i)).inc(n)
    return generate_latest(reg)


VLLM = [
    dict(running=3, waiting=1, prompt=5000, generated=8000, finished={"stop": 20, "length": 4}, drafts=2000, draft_tokens=6000,
         accepted=4200, per_pos=[1800, 1450, 950]),
    dict(running=4, waiting=0, prompt=5600, generated=9500, finished={"stop": 23, "length": 4}, drafts=2400, draft_tokens=7200,
         accepted=5100, per_pos=[2160, 1765, 1175]),
    # restarted
    dict(running=1, waiting=0, prompt=300, generated=400, finished={"stop": 1}, drafts=100, draft_tokens=300, accepted=180,
         per_pos=[85, 60, 35]),
]  # fmt: skip


def sglang(c: dict) -> bytes:
    reg = CollectorRegistry()
    sched = ["model_name", "engine_type", "tp_rank", "pp_rank"]
    sv = ("meta-llama/Llama-3.1-8B-Instruct", "unified", "0", "0")
    tok = ["model_name", "engine_type"]
    tv = sv[:2]
    Gauge("sglang:num_running_reqs", "The number of running requests.", sched, registry=reg).labels(*sv).set(c["running"])
    Gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", sched, registry=reg).labels(*sv).set(c["queued"])
    Gauge("sglang:gen_throughput", "The generation throughput (token/s).", sched, registry=reg).labels(*sv).set(c["gen_tps"])
    Gauge(
        "sglang:spec_accept_length",
        "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
        sched,
        registry=reg,
    ).labels(*sv).set(c["accept_length"])
    Gauge(
        "sglang:spec_accept_rate", "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).", sched, registry=reg
    ).labels(*sv).set(c["accept_rate"])
    Counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", tok, registry=reg).labels(*tv).inc(c["prompt"])
    Counter("sglang:generation_tokens_total", "Number of generation tokens processed.", tok, registry=reg).labels(*tv).inc(c["generated"])
    Counter("sglang:spec_verify_calls_total", "Number of speculative decoding verification calls.", tok, registry=reg).labels(*tv).inc(
        c["verify"]
    )
    Counter("sglang:num_requests_total", "Number of requests processed.", tok, registry=reg).labels(*tv).inc(c["requests"])
    return generate_latest(reg)


SGLANG = [
    dict(running=2, queued=0, gen_tps=410.5, accept_length=2.9, accept_rate=0.63, prompt=4000, generated=9000, verify=3100, requests=30),
    dict(running=5, queued=3, gen_tps=520.0, accept_length=3.1, accept_rate=0.7, prompt=4800, generated=10500, verify=3600, requests=33),
    # restarted
    dict(running=0, queued=0, gen_tps=0.0, accept_length=0.0, accept_rate=0.0, prompt=120, generated=250, verify=90, requests=1),
]  # fmt: skip


def main() -> None:
    for i, (c, per_pos) in enumerate(LLAMA):
        (HERE / f"llama-server-{i}.txt").write_text(llama_server(c, per_pos))
    for i, c in enumerate(VLLM):
        (HERE / f"vllm-{i}.txt").write_bytes(vllm(c))
    for i, c in enumerate(SGLANG):
        (HERE / f"sglang-{i}.txt").write_bytes(sglang(c))
    print(f"wrote {len(LLAMA) + len(VLLM) + len(SGLANG)} files to {HERE}")


if __name__ == "__main__":
    main()
