"""Does recording slow decoding down? The same real run with and without a recording writer.

Alternates recorded and unrecorded runs of the embedded model (AR, and n-gram speculative on a
copy-heavy prompt) and prints median decode tok/s of each and their ratio.

    python benchmarks/recording_overhead.py [--reps 5] [--tokens 256]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from spectui.config import RunConfig  # noqa: E402
from spectui.drafting import DraftConfig, Fixed  # noqa: E402
from spectui.engine.embedded import Engine  # noqa: E402
from spectui.metrics.stats import summarize  # noqa: E402
from spectui.prompts import find_prompt  # noqa: E402
from spectui.sessions.record import record_session  # noqa: E402


def decode_rate(engine: Engine, config: RunConfig, path: Path | None) -> float:
    # the path every command records through; path None runs the same loop without a writer
    return summarize(list(record_session(engine, config, path))).decode_tok_s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=256)
    args = ap.parse_args()
    prompt = find_prompt("load-typo-fix").text
    configs = [
        RunConfig(mode="ar", prompt=prompt, max_tokens=args.tokens),
        RunConfig(mode="spec", prompt=prompt, max_tokens=args.tokens, draft=DraftConfig(length=Fixed(k=4))),
    ]
    with Engine.load(configs[0]) as engine, tempfile.TemporaryDirectory() as tmp:
        for config in configs:
            name = config.label()  # "AR", "spec n-gram K=4"
            plain, recorded = [], []
            for rep in range(args.reps + 1):  # the first pair warms up and is dropped
                a = decode_rate(engine, config, None)
                b = decode_rate(engine, config, Path(tmp) / f"{name}-{rep}.spectui".replace(" ", "_"))
                if rep:
                    plain.append(a)
                    recorded.append(b)
            mp, mr = statistics.median(plain), statistics.median(recorded)
            print(f"{name:16s} without {mp:7.1f} tok/s  with recording {mr:7.1f} tok/s  ratio {mr / mp:.3f}  ({args.reps} reps)")


if __name__ == "__main__":
    main()
