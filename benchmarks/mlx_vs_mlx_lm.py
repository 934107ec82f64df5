"""spectui's MLX backend against mlx-lm's own generator, same model directory, same run.

The GGUF is exported once with ``export_mlx_model`` to an mlx-lm directory; both sides load
that directory and decode the same prompt tokens greedily:

* AR: spectui's decode loop on ``MLXBackend`` vs ``mlx_lm.stream_generate``;
* speculative, model drafter = the same model, K = 4: spectui vs ``stream_generate`` with
  ``draft_model`` and ``num_draft_tokens=4`` (greedy on both sides, so every draft is
  accepted: this measures the loops' overhead, not a drafter's quality).

Two mlx-lm rows: as ``mlx_lm.load`` gives it (quantisation scales in the stored float16),
and with the model cast to float32 like spectui's backend does on a CPU (``set_dtype``), so
the like-for-like ratio separates loop cost from dtype. On Metal/CUDA both keep float16.

Rates: end-to-end tok/s = tokens / (call to last token, prefill included) is the headline:
the prompt is short and sent raw (no chat template), so decoding dominates it, and it
measures both sides the same way. decode tok/s = (tokens after the first) / (first to last
token) is printed too, but it is not like for like under speculation: spectui emits its
first token straight from the prefill, mlx-lm only after its first draft-and-verify block,
so mlx-lm's decode span leaves one block out. Medians over alternating reps (shared, noisy
machines: side-by-side ratios mean more than absolute numbers).

    python benchmarks/mlx_vs_mlx_lm.py [--reps 3] [--tokens 32] [--model GGUF] [--model-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

from spectui.config import BackendConfig, RunConfig
from spectui.drafting import DraftConfig, Fixed, Model
from spectui.engine.backends.mlx_gguf import export_mlx_model
from spectui.engine.embedded import Engine
from spectui.models.registry import embedded_model_path
from spectui.recording.schema import Step

PROMPT = "Fix the typos in this sentence and repeat it: The quick brwon fox jumpd over the lazzy dog."


def spectui_run(engine: Engine, config: RunConfig) -> tuple[tuple[float, float], list[int]]:
    t_call = time.perf_counter_ns()
    times: list[int] = []
    tokens: list[int] = []
    for ev in engine.run(config, memory_interval_s=None):
        if isinstance(ev, Step):
            now = time.perf_counter_ns()
            times.extend([now] * len(ev.tokens))
            tokens.extend(ev.tokens)
    return _rates(t_call, times), tokens


def mlx_lm_run(model, tokenizer, prompt: list[int], n: int, draft=None, k: int = 4) -> tuple[tuple[float, float], list[int]]:
    from mlx_lm import stream_generate

    kwargs = {"draft_model": draft, "num_draft_tokens": k} if draft is not None else {}
    t_call = time.perf_counter_ns()
    times: list[int] = []
    tokens: list[int] = []
    for r in stream_generate(model, tokenizer, prompt, max_tokens=n, **kwargs):
        times.append(time.perf_counter_ns())
        tokens.append(int(r.token))
    return _rates(t_call, times), tokens


def _rates(t_call: int, times: list[int]) -> tuple[float, float]:
    decode = (len(times) - 1) / ((times[-1] - times[0]) / 1e9) if len(times) > 1 and times[-1] > times[0] else float("nan")
    end_to_end = len(times) / ((times[-1] - t_call) / 1e9)
    return decode, end_to_end


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--model", default=embedded_model_path())
    ap.add_argument("--model-dir", default=None, help="an existing export (skips exporting)")
    args = ap.parse_args()

    import mlx.core as mx
    from mlx_lm import load as mlx_lm_load

    scratch = None if args.model_dir else tempfile.mkdtemp(prefix="spectui-mlx-")
    model_dir = args.model_dir or export_mlx_model(args.model, os.path.join(scratch, "model"))
    backend = BackendConfig(name="mlx", n_ctx=1024)
    ar = RunConfig(target=model_dir, mode="ar", prompt=PROMPT, chat=False, max_tokens=args.tokens, backend=backend)
    spec = RunConfig(
        target=model_dir, mode="spec", prompt=PROMPT, chat=False, max_tokens=args.tokens, backend=backend,
        draft=DraftConfig(drafter=Model(path=model_dir), length=Fixed(k=args.k)),
    )
    engine = Engine.load(spec)
    _, prompt_tokens = engine.prepare_prompt(ar)
    stored, tokenizer = mlx_lm_load(model_dir)
    as_f32, _ = mlx_lm_load(model_dir)
    as_f32.set_dtype(mx.float32)
    mx.eval(as_f32.parameters())

    runs = {
        "spectui AR": lambda: spectui_run(engine, ar),
        "mlx_lm AR (stored f16)": lambda: mlx_lm_run(stored, tokenizer, prompt_tokens, args.tokens),
        "mlx_lm AR (f32)": lambda: mlx_lm_run(as_f32, tokenizer, prompt_tokens, args.tokens),
        "spectui spec": lambda: spectui_run(engine, spec),
        "mlx_lm spec (stored f16)": lambda: mlx_lm_run(stored, tokenizer, prompt_tokens, args.tokens, stored, args.k),
        "mlx_lm spec (f32)": lambda: mlx_lm_run(as_f32, tokenizer, prompt_tokens, args.tokens, as_f32, args.k),
    }
    decode: dict[str, list[float]] = {k: [] for k in runs}
    e2e: dict[str, list[float]] = {k: [] for k in runs}
    outputs: dict[str, list[int]] = {}
    for rep in range(args.reps + 1):  # the first round warms caches and is dropped
        for name, run in runs.items():
            (d, e), tokens = run()
            outputs[name] = tokens
            if rep:
                decode[name].append(d)
                e2e[name].append(e)

    dev = mx.default_device()
    print(f"model dir {model_dir} ({engine.target.artifacts().quant}), device {dev}, {len(prompt_tokens)} prompt tokens, "
          f"{args.tokens} new tokens, K={args.k}, {args.reps} reps")
    for name in runs:
        print(f"  {name:26s} end-to-end {statistics.median(e2e[name]):6.2f} tok/s (min {min(e2e[name]):.2f}, "
              f"max {max(e2e[name]):.2f})   decode {statistics.median(decode[name]):6.2f} tok/s")
    med = {k: statistics.median(v) for k, v in decode.items()}
    med_e = {k: statistics.median(v) for k, v in e2e.items()}
    for what, ours, theirs in (("AR", "spectui AR", "mlx_lm AR (f32)"), ("spec", "spectui spec", "mlx_lm spec (f32)")):
        print(f"  {what:4s} spectui / mlx_lm (both f32): end-to-end {med_e[ours] / med_e[theirs]:.3f}  (decode {med[ours] / med[theirs]:.3f})")
    print(f"  spec / AR end-to-end: spectui {med_e['spectui spec'] / med_e['spectui AR']:.3f}, mlx_lm (f32) "
          f"{med_e['mlx_lm spec (f32)'] / med_e['mlx_lm AR (f32)']:.3f}")
    ref = outputs["spectui AR"]
    for name, tokens in outputs.items():
        same = tokens[: len(ref)] == ref[: len(tokens)]
        print(f"  greedy tokens of {name!r} {'match' if same else 'DIFFER from'} spectui AR")
    engine.close()
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
