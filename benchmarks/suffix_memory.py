"""What the suffix drafter's memory costs: time per step, bytes per stored token, save and load.

No model: the "outputs" are this repository's own text (prompts/, spectui/, tests/,
benchmarks/, README), split into words, spaces and punctuation (one id per distinct piece,
about the granularity of BPE tokens) and cut into answers of 100-600 tokens. For each cap it
feeds answers until twice the cap went in (so eviction and rebuilds run), then reports:

* feed: microseconds per token added (eviction and rebuilds included);
* the memory: answers and tokens kept, index states per token, bytes per stored token as
  tracemalloc measures a memory loaded from its file (caps up to 100,000 only: tracemalloc
  slows the load tenfold; the bytes per token hardly move with the size), and in brackets as
  ``stats()`` estimates it;
* the file: size, save time, load time (decode + rebuild, what each process pays on open);
* proposals: 40 greedy "requests" (k = 8, a draft is accepted up to the first wrong token),
  half repeating an answer the memory holds (its prompt: the 40 tokens before it), half
  unseen (every 20th answer is never fed); the median and 90th percentile of one step's
  propose + extend, in microseconds, and the tokens accepted per step.

Run: python3 benchmarks/suffix_memory.py   (well under a minute on a 2-core CPU)
"""

from __future__ import annotations

import random
import re
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from spectui.engine.drafters.suffix import SuffixDrafter
from spectui.engine.drafters.suffix_memory import SuffixMemory

ROOT = Path(__file__).resolve().parent.parent
PIECES = re.compile(r"\w+|[^\w\s]|\s+")
VOCAB = "benchmark"


def corpus() -> list[int]:
    vocab: dict[str, int] = {}
    tokens: list[int] = []
    for pattern in ("prompts/*.txt", "spectui/**/*.py", "tests/**/*.py", "benchmarks/*.py", "*.md"):
        for path in sorted(ROOT.glob(pattern)):
            tokens.extend(vocab.setdefault(p, len(vocab)) for p in PIECES.findall(path.read_text(errors="replace")))
    return tokens


def answers(tokens: list[int], rng: random.Random) -> list[tuple[int, int]]:
    """(start, end) of consecutive answers of 100-600 tokens."""
    out, i = [], 40
    while i < len(tokens):
        j = min(len(tokens), i + rng.randrange(100, 600))
        out.append((i, j))
        i = j
    return out


def simulate(drafter: SuffixDrafter, prompt: list[int], output: list[int], times: list[float], k: int = 8) -> tuple[int, int]:
    """Greedy decoding of a "model" that answers ``output``: (steps, accepted draft tokens)."""
    drafter.reset(prompt)
    history = prompt + output[:1]
    steps = accepted = 0
    clock = time.perf_counter_ns
    while len(history) < len(prompt) + len(output):
        done = len(history) - len(prompt)
        t0 = clock()
        draft = drafter.propose(history, k).tokens
        times.append((clock() - t0) / 1000)
        truth = output[done:done + len(draft)]
        a = 0
        while a < len(draft) and a < len(truth) and draft[a] == truth[a]:
            a += 1
        steps += 1
        accepted += a
        history = prompt + output[:done + a + 1]
    return steps, accepted


def bench(cap: int, tokens: list[int], spans: list[tuple[int, int]], unseen: list[tuple[int, int]], cache: Path) -> list[str]:
    vocab = f"{VOCAB}-{cap}"
    memory = SuffixMemory.open(vocab, cache=cache, max_tokens=cap)
    fed_spans = []
    fed = 0
    t0 = time.perf_counter()
    for start, end in spans:
        if fed >= 2 * cap:
            break
        memory.add(tokens[start - 20:end])  # an answer with the tail of its "prompt"
        fed += end - start + 20
        fed_spans.append((start, end))
    feed_us = (time.perf_counter() - t0) / fed * 1e6
    t0 = time.perf_counter()
    memory.save()
    save_ms = (time.perf_counter() - t0) * 1000
    size = memory.path.stat().st_size
    t0 = time.perf_counter()
    SuffixMemory.open(vocab, cache=cache, max_tokens=cap)
    load_s = time.perf_counter() - t0
    measured = None
    if cap <= 100_000:
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        loaded = SuffixMemory.open(vocab, cache=cache, max_tokens=cap)
        measured = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
    else:
        loaded = memory
    stats = loaded.stats()
    held = measured if measured is not None else stats.bytes

    rng = random.Random(cap)
    kept = fed_spans[-loaded.sequences:]  # still in the memory
    rows = []
    for label, pool in (("repeat", kept), ("unseen", unseen)):
        times: list[float] = []
        steps = accepted = 0
        drafter = SuffixDrafter(loaded, learn=False)  # the benchmark's requests stay out of it
        for start, end in rng.sample(pool, min(20, len(pool))):
            s, a = simulate(drafter, tokens[start - 40:start], tokens[start:end], times)
            steps, accepted = steps + s, accepted + a
        times.sort()
        rows.append(f"{label} {statistics.median(times):.0f}/{times[int(0.9 * len(times))]:.0f} us, {accepted / steps:.2f} acc/step")
    return [
        f"{cap:,}",
        f"{fed:,}",
        f"{feed_us:.1f}",
        f"{stats.sequences:,} / {stats.tokens:,}",
        f"{stats.nodes / stats.tokens:.2f}",
        f"{measured / stats.tokens:.0f} ({stats.bytes / stats.tokens:.0f})" if measured else f"- ({stats.bytes / stats.tokens:.0f})",
        f"{held / 1e6:.1f}",
        f"{size / stats.tokens:.1f} B/tok, {save_ms:.0f} ms",
        f"{load_s:.2f}",
        *rows,
    ]


def main() -> int:
    started = time.perf_counter()
    tokens = corpus()
    spans = answers(tokens, random.Random(0))
    unseen = spans[::20]
    spans = [s for i, s in enumerate(spans) if i % 20]
    print(f"corpus: {len(tokens):,} tokens ({len(set(tokens)):,} distinct), {len(spans)} answers; python {sys.version.split()[0]}")
    head = [
        "cap", "fed", "feed us/tok", "answers / tokens kept", "states/tok", "B/tok (estimate)", "MB",
        "file, save", "load s", "step p50/p90, repeat", "step p50/p90, unseen",
    ]
    table = [head]
    with tempfile.TemporaryDirectory() as tmp:
        for cap in (25_000, 100_000, 200_000, 1_000_000):
            row = bench(cap, tokens, spans, unseen, Path(tmp))
            table.append(row[:9] + row[9].split(" ", 1)[1:] + row[10].split(" ", 1)[1:])
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for i, r in enumerate(table):
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths)))
        if i == 0:
            print("-+-".join("-" * w for w in widths))
    # the per-request index alone: reset over a long prompt, then steps with no memory
    drafter = SuffixDrafter(None)
    prompt = tokens[:4000]
    t0 = time.perf_counter()
    drafter.reset(prompt)
    reset_ms = (time.perf_counter() - t0) * 1000
    times: list[float] = []
    steps, accepted = simulate(drafter, tokens[10_000:10_040], tokens[10_040:13_040], times)
    times.sort()
    print(
        f"no memory: reset over a 4,000-token prompt {reset_ms:.0f} ms ({reset_ms * 1000 / 4000:.1f} us/token); "
        f"3,000 unseen tokens: step p50 {statistics.median(times):.0f} us, {accepted / steps:.2f} acc/step"
    )
    print(f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
