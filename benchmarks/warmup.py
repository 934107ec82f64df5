"""Does the warm-up after load pay? The first verified block of each new size against the
median of the later blocks of that size, over repetitions (each on a freshly loaded engine).

    python benchmarks/warmup.py [--reps 5]

The runs are those of ``tests/backends/test_warmup.py`` (the embedded model drafting for itself
greedily, so every block is K + 1 tokens; three runs on one engine with K = 3, 6, 12). Target:
the median ratio of every K within 1.2 (cold blocks on Metal cost several times a warm one; on
this CPU the cold cost is small and one run's ratio is noise).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spectui.models.registry import embedded_model_path  # noqa: E402
from tests.backends.test_warmup import KS, first_block_ratios, warm_runs  # noqa: E402

TARGET = 1.2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    model = embedded_model_path()
    ratios: dict[int, list[float]] = {k: [] for k in KS}
    for rep in range(args.reps):
        print(f"rep {rep + 1}", flush=True)
        for k, r in zip(KS, first_block_ratios(warm_runs(model, KS), KS)):
            ratios[k].append(r)
    print(f"\n{args.reps} repetitions, a fresh engine each; first block / median of the later ones")
    worst = 0.0
    for k in KS:
        med = statistics.median(ratios[k])
        worst = max(worst, med)
        print(f"K={k:<3} median {med:.2f}  (runs: {', '.join(f'{r:.2f}' for r in ratios[k])})")
    print(f"worst median {worst:.2f}  target <= {TARGET}: {'met' if worst <= TARGET else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
