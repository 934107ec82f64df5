"""spectui's decode loop against llama-cpp-python's own ``Llama.generate``, same run.

Prints medians over alternating repetitions (the machines here are shared and noisy, so
ratios measured side by side mean more than absolute numbers):

* AR: spectui's loop vs ``Llama.generate`` (greedy, same prompt tokens, same threads);
* speculative with the n-gram drafter vs spectui AR on a copy-heavy prompt.

Decode tok/s everywhere = (tokens after the first) / (time from first to last token), so the
prefill is excluded on both sides.

    python benchmarks/engine_vs_llama_generate.py [--reps 5] [--tokens 128]
"""

from __future__ import annotations

import argparse
import statistics
import time

import llama_cpp

from spectui.config import BackendConfig, DraftConfig, RunConfig
from spectui.engine.llamacpp import default_threads
from spectui.engine.session import Engine
from spectui.metrics.stats import summarize
from spectui.models import embedded_model_path
from spectui.recording.schema import Step

STORY = "Write a long story about a lighthouse keeper who finds a message in a bottle."
COPY_HEAVY = (
    "Fix the typos in this text and return it otherwise unchanged:\n\n"
    "The quarterly report shows that revenue grew by twelve percent, drivn mostly by the new "
    "subscripton tier. Operating costs stayed flat, althogh the hosting bill rose after the "
    "migraton to the new region. The team recommends keeping the current pricing, expanding "
    "the suport rotation to cover weekends, and revisting the hosting contract in the spring "
    "when the comittment ends."
)


def spectui_rate(engine: Engine, config: RunConfig) -> tuple[float, list[int], object]:
    s = summarize(events := list(engine.run(config)))
    tokens = [t for ev in events if isinstance(ev, Step) for t in ev.tokens]
    return s.decode_tok_s, tokens, s


def llama_generate_rate(llm: llama_cpp.Llama, prompt_tokens: list[int], n: int) -> tuple[float, list[int]]:
    llm.reset()
    out: list[int] = []
    first = None
    for tok in llm.generate(prompt_tokens, temp=0.0, reset=True):
        if first is None:
            first = time.perf_counter()
        out.append(tok)
        if len(out) >= n:  # same token count as spectui's run (generate never stops by itself)
            break
    end = time.perf_counter()
    return (len(out) - 1) / (end - first), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=128)
    args = ap.parse_args()

    path = embedded_model_path()
    threads = default_threads()
    backend = BackendConfig(n_ctx=2048, n_threads=threads)
    ar = RunConfig(target=path, mode="ar", prompt=STORY, max_tokens=args.tokens, backend=backend)
    ar_copy = RunConfig(target=path, mode="ar", prompt=COPY_HEAVY, max_tokens=args.tokens, backend=backend)
    spec_copy = RunConfig(
        target=path, mode="spec", prompt=COPY_HEAVY, max_tokens=args.tokens, backend=backend,
        draft=DraftConfig(source="ngram", k=4),
    )
    engine = Engine.load(ar)
    llm = llama_cpp.Llama(path, n_ctx=2048, n_batch=512, n_threads=threads, n_threads_batch=threads, verbose=False)
    _, prompt_tokens = engine.prepare_prompt(ar)

    rates: dict[str, list[float]] = {"spectui AR": [], "Llama.generate": [], "copy AR": [], "copy spec": []}
    accept = []
    for rep in range(args.reps + 1):  # the first round warms caches and is dropped
        r_ours, ours = spectui_rate(engine, ar)[:2]
        r_llama, theirs = llama_generate_rate(llm, prompt_tokens, len(ours))
        r_ar, ar_tokens, _ = spectui_rate(engine, ar_copy)
        r_spec, spec_tokens, s = spectui_rate(engine, spec_copy)
        assert spec_tokens == ar_tokens, "speculative output differs from AR"
        if ours != theirs[: len(ours)]:
            print("note: Llama.generate's greedy tokens differ from spectui's")
        if rep:
            rates["spectui AR"].append(r_ours)
            rates["Llama.generate"].append(r_llama)
            rates["copy AR"].append(r_ar)
            rates["copy spec"].append(r_spec)
            accept.append(s.acceptance_rate)

    med = {k: statistics.median(v) for k, v in rates.items()}
    spread = {k: (min(v), max(v)) for k, v in rates.items()}
    print(f"model {path.rsplit('/', 1)[-1]}, threads {threads}, {args.tokens} tokens, {args.reps} reps, llama-cpp-python {llama_cpp.__version__}")
    for k in rates:
        lo, hi = spread[k]
        print(f"  {k:16s} median {med[k]:7.1f} tok/s   (min {lo:6.1f}, max {hi:6.1f})")
    print(f"  AR ratio spectui / Llama.generate        {med['spectui AR'] / med['Llama.generate']:.3f}")
    print(f"  n-gram spec / AR on the copy-heavy prompt {med['copy spec'] / med['copy AR']:.3f}"
          f"   (acceptance median {statistics.median(accept):.3f}, output identical)")
    llm.close()
    engine.close()


if __name__ == "__main__":
    main()
