"""spectui's engine on a CUDA GPU: the weight probe, exactness and the defaults' speed on the
embedded model, and the Qwen pair's verify-cost curve and draft cost. Never in CI.

    python benchmarks/cuda_probe.py --model SmolLM2-135M-Instruct.Q4_1.gguf \
        [--pair-dir DIR] [--out RESULT.json]

Needs llama-cpp-python built with CUDA (``CMAKE_ARGS="-DGGML_CUDA=on"``) and spectui's Python
dependencies; the model is the embedded default's file (``spectui models`` prints its path).

1. The weight probe (``engine.weights``, what ``spectui tune --weights`` runs), every layer
   offloaded: each type's verify-cost curve, and the type the embedded default would run in on
   this GPU (``choose_weights``: the same rule as on a CPU).
2. Exactness and speed, shipped file and chosen type: the batch-shape noise (block against
   one-token logits, ``engine.noise``), then AR and ``spectui run --mode spec`` with no other
   flag, alternating on every copy prompt and a free-form one: tokens identical or where they
   part, median ratio.
3. The pair (Qwen2.5-Coder 1.5B Q4_K_M target, 0.5B draft): a GPU machine that cannot fetch the
   1.6 GB of weights gets, in ``--pair-dir``, each file's first ``data_offset`` bytes (the real
   metadata, tensor names, shapes and types: ``NAME.head``) and its size (``NAME.size``). The
   rest is filled with random bytes: what a kernel costs depends on the shapes and types, not
   the values, so the verify-cost curve and the draft's cost per token are the pair's; its
   outputs are noise, so acceptance comes from the CPU run (``pair-*.json``) and speedups are
   tune's prediction (``metrics.predict``), not a measurement.
"""

from __future__ import annotations

import llama_cpp  # noqa: F401 - first: a CUDA build segfaulted on every load after numpy (spectui/cli/__init__.py)

# isort: split
import argparse
import gzip
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from spectui.cli import build_parser
from spectui.cli.run_flags import config_from_args
from spectui.config import BackendConfig
from spectui.engine.backends.llamacpp import LlamaCppBackend
from spectui.engine.embedded import Engine
from spectui.engine.host.noise import measure_batch_noise
from spectui.engine.host.verify_cost import measure_curve, measure_draft_cost
from spectui.engine.host.weights import PROBE_PROMPT, choose_weights, probe_file, probe_weights
from spectui.metrics.predict import expected_tokens
from spectui.metrics.stats import summarize
from spectui.models.gguf import read_gguf
from spectui.prompts import find_prompt, list_prompts
from spectui.recording.schema import Step

GPU = BackendConfig(n_gpu_layers=-1)
PAIR = ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "qwen2.5-coder-0.5b-instruct.gguf")
#: the CPU run whose acceptance the pair's GPU prediction uses
PAIR_RESULT = Path(__file__).parent / "results" / "pair-2026-11-26-b.json"


def log(line: str) -> None:
    print(line, flush=True)


def gpu_name() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        return "?"


def weight_probe(model: str) -> dict:
    rows = probe_weights(GPU, find_prompt(PROBE_PROMPT).text, source=model, progress=log)
    shipped = read_gguf(model).quant
    choice = choose_weights(rows, shipped, by="cuda probe")
    for r in rows:
        log(f"  {r.quant:7} 1 token {r.curve.unit_us / 1000:6.2f} ms  n=2 {r.curve.cost(2):.2f}  n=4 {r.curve.cost(4):.2f}  "
            f"n=8 {r.curve.cost(8):.2f}  n=16 {r.curve.cost(16):.2f}  block of 9 {r.block_us / 1000:.2f} ms")
    log(f"  the embedded default would run as {choice.quant}: {choice.reason()}")
    return {"rows": [{"quant": r.quant, "unit_us": r.curve.unit_us, "relative": list(r.curve.relative)} for r in rows],
            "choice": choice.quant, "reason": choice.reason()}


def config(prompt_path: str, mode: str, target: str):
    args = build_parser().parse_args(["run", "--mode", mode, "--prompt-file", prompt_path, "--target", target, "--gpu-layers", "-1"])
    return config_from_args(args)


def outcome(engine: Engine, cfg) -> tuple[float, list[int]]:
    events = list(engine.run(cfg, memory_interval_s=None))
    return summarize(events).decode_tok_s, [t for e in events if type(e) is Step for t in e.tokens]


def exactness_and_speed(model: str, reps: int) -> dict:
    prompts = [s for s in list_prompts() if s.tier in ("copy", "medium")]
    first = config(prompts[0].path, "spec", model)
    out: dict = {"model": Path(model).name, "prompts": []}
    with Engine.load(first) as engine:
        tokens = engine.target.tokenize(find_prompt("long-retrieval").text, add_bos=True)[:512]
        noise = measure_batch_noise(engine.target, tokens)
        out["batch_noise"] = {"depth": noise.depth, "max_logit_diff": max(noise.by_depth, default=0.0),
                              "first_nonzero_depth": next((i * noise.depth_step for i, v in enumerate(noise.by_depth) if v > 0), None)}
        log(f"  batch noise to depth {noise.depth}: largest logit difference {out['batch_noise']['max_logit_diff']:.4g}, "
            f"first at depth {out['batch_noise']['first_nonzero_depth']}")
        for spec_ in prompts:
            ar_cfg, spec_cfg = config(spec_.path, "ar", model), config(spec_.path, "spec", model)
            ratios, parted = [], None
            for rep in range(reps + 1):
                pair = [(ar_cfg, "ar"), (spec_cfg, "spec")][:: 1 if rep % 2 else -1]
                got = {side: outcome(engine, cfg) for cfg, side in pair}
                (ar_rate, ar_toks), (sp_rate, sp_toks) = got["ar"], got["spec"]
                if ar_toks != sp_toks and parted is None:
                    parted = next((i for i, (a, b) in enumerate(zip(ar_toks, sp_toks)) if a != b), min(len(ar_toks), len(sp_toks)))
                if rep:
                    ratios.append(sp_rate / ar_rate)
            row = {"prompt": spec_.name, "tier": spec_.tier, "ar_tok_s": ar_rate, "ratio": statistics.median(ratios),
                   "ratios": ratios, "identical": parted is None, "parts_at": parted, "tokens": len(ar_toks)}
            out["prompts"].append(row)
            log(f"  {spec_.name:24} AR {ar_rate:7.1f} tok/s  spec default x{row['ratio']:.2f} "
                f"({min(ratios):.2f}-{max(ratios):.2f})  {len(ar_toks)} tok  {'same' if parted is None else f'parts at token {parted}'}")
    return out


def shape_true(pair_dir: Path, name: str, work: Path) -> Path:
    """``name`` rebuilt from its real header and random data (see the module's docstring)."""
    head = gzip.decompress((pair_dir / f"{name}.head.gz").read_bytes())
    size = int((pair_dir / f"{name}.size").read_text())
    path = work / name
    rng = np.random.default_rng(0)
    with open(path, "wb") as f:
        f.write(head)
        left = size - len(head)
        while left:
            n = min(left, 1 << 28)
            f.write(rng.bytes(n))
            left -= n
    return path


def pair_curve(pair_dir: Path, work: Path) -> dict:
    target_path, draft_path = (shape_true(pair_dir, n, work) for n in PAIR)
    context_text = find_prompt("copy-refactor-rename").text
    target = LlamaCppBackend.open(str(target_path), GPU)
    try:
        context = target.tokenize(context_text, add_bos=True)
        curve = measure_curve(target, context, depth=len(context))
        draft = LlamaCppBackend.open(str(draft_path), GPU)
        try:
            draft_cost = measure_draft_cost(draft, context, curve.unit_us, steps=64)
        finally:
            draft.close()
    finally:
        target.close()
    log(f"  target one token {curve.unit_us / 1000:.2f} ms at depth {curve.depth}; block of n / one token: "
        + " ".join(f"{n}:{curve.cost(n):.2f}" for n in (2, 3, 5, 9, 17)))
    log(f"  draft cost per drafted token: {draft_cost:.2f} of a target token")
    cpu = json.loads(PAIR_RESULT.read_text())
    predictions = []
    for row in cpu["rows"]:
        if row["peer"] != "spectui draft model K=4" or not row["acceptance"]:
            continue
        a, k = statistics.median(row["acceptance"]), 4
        cost = k * draft_cost + curve.cost(k + 1)
        predictions.append({"prompt": row["prompt"], "acceptance_cpu": a, "predicted_speedup_k4": expected_tokens(a, k) / cost})
        log(f"  {row['prompt']:24} acceptance (CPU run) {a:.2f}: draft model K=4 predicted x{predictions[-1]['predicted_speedup_k4']:.2f} AR here")
    return {"unit_us": curve.unit_us, "depth": curve.depth, "relative": list(curve.relative), "draft_cost": draft_cost,
            "predictions": predictions}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="the embedded default's GGUF (SmolLM2-135M-Instruct.Q4_1.gguf)")
    ap.add_argument("--pair-dir", type=Path, default=None, help="NAME.head.gz and NAME.size of the pair's two files")
    ap.add_argument("--work", type=Path, default=Path("/tmp/cuda-probe"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--steps", default="weights,pair,shipped,chosen", help="which steps, in this order")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    from spectui.engine.backends.llamacpp import _init_llama

    _init_llama()  # llama.cpp's backends set up (and its log kept) before any other call into it
    result: dict = {"gpu": gpu_name(), "llama_cpp_python": llama_cpp.__version__,
                    "gpu_offload": bool(llama_cpp.llama_supports_gpu_offload())}
    log(f"{result['gpu']}; llama-cpp-python {result['llama_cpp_python']}; GPU offload {result['gpu_offload']}")

    def save() -> None:
        if args.out:
            args.out.write_text(json.dumps(result, indent=1))

    if args.out and args.out.exists():
        result = {**json.loads(args.out.read_text()), **result}  # a rerun of some steps keeps the others
    every = {
        "weights": lambda: weight_probe(args.model),
        "pair": lambda: pair_curve(args.pair_dir, args.work),
        "shipped": lambda: exactness_and_speed(args.model, args.reps),
        "chosen": lambda: exactness_and_speed(probe_file(result["weights"]["choice"], args.model), args.reps)
        if result.get("weights", {}).get("choice") not in (None, read_gguf(args.model).quant) else {"same as shipped": True},
    }
    steps = [(n, every[n]) for n in args.steps.split(",") if n in every and (n != "pair" or args.pair_dir)]
    for name, step in steps:
        log(f"== {name}")
        t = time.perf_counter()
        try:
            result[name] = step()
        except Exception as exc:  # noqa: BLE001 - one step's failure still leaves the others' numbers
            result[name] = {"error": f"{type(exc).__name__}: {exc}"}
            log(f"  failed: {exc}")
        result[name + "_s"] = round(time.perf_counter() - t, 1)
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
