"""Recording I/O cost: write overhead per AR step, and read speed of a large recording.

    python benchmarks/recording_io.py [--write-events N] [--read-events N] [--repeat R]

Prints medians over R repetitions. The machine-level question ("how much slower does a real
decode get when recorded?") is a separate, engine-level benchmark; ``synthetic_steps`` is
shared with it.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from spectui.recording.reader import read_recording  # noqa: E402
from spectui.recording.schema import End, Header, Prefill, Step  # noqa: E402
from spectui.recording.writer import RecordingWriter  # noqa: E402

_PIECES = [b" the", b" of", b"ing", b" a", b",", b".", b" model", b" decoding", b"\n", b" spec", b"ul", b"ative"]


def synthetic_steps(n: int, seed: int = 0, tokens_per_s: float = 50.0) -> list[Step]:
    """``n`` AR-shaped steps (one token each), as the engine emits them: a token id from a
    49k vocabulary, its piece, an emission time at ``tokens_per_s``, ~the verify time."""
    rng = random.Random(seed)
    step_us = int(1e6 / tokens_per_s)
    t = 150_000  # after a prefill
    out = []
    for _ in range(n):
        verify = step_us - rng.randrange(step_us // 10)
        t += verify + rng.randrange(50, 300)
        out.append(Step([rng.randrange(49152)], [0], [rng.choice(_PIECES)], [t], 0, 0, 0, 0, verify, 0))
    return out


def _build_only(n: int) -> None:
    # What an engine does anyway to emit a step: the baseline the write cost is compared to.
    for i in range(n):
        Step([1000 + i % 30000], [0], [b" the"], [150_000 + 20_000 * i], 0, 0, 0, 0, 19_500, 0)


def _median_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
        del result  # freeing a million events is not part of reading them
    return statistics.median(times)


def bench_write(n: int, repeat: int, folder: Path) -> None:
    counter = iter(range(1_000_000))

    def build_and_write() -> None:
        path = folder / f"w{next(counter)}.spectui"
        with RecordingWriter(path) as w:
            write = w.write
            for i in range(n):
                write(Step([1000 + i % 30000], [0], [b" the"], [150_000 + 20_000 * i], 0, 0, 0, 0, 19_500, 0))
        path.unlink()

    base = _median_time(lambda: _build_only(n), repeat)
    with_write = _median_time(build_and_write, repeat)
    per_event = (with_write - base) / n
    print(f"write: {n:,} AR steps: build only {base:.3f} s, build + encode + write + flush {with_write:.3f} s")
    print(f"       ratio {with_write / base:.1f}x; recording costs {per_event * 1e6:.2f} us per step "
          f"({per_event * 1e6 / 20_000:.3%} of a 20 ms token, {per_event * 1e6 / 1_000:.2%} of a 1 ms token)")


def bench_read(n: int, repeat: int, folder: Path) -> None:
    path = folder / "read.spectui"
    with RecordingWriter(path) as w:
        w.write(Header(prompt_tokens=list(range(100))))
        w.write(Prefill(n_tokens=100, t_start_us=100, t_end_us=150_000))
        for s in synthetic_steps(n):
            w.write(s)
        w.write(End(t_us=s.t_us[-1], n_tokens=n))
    size = path.stat().st_size
    seconds = _median_time(lambda: read_recording(path), repeat)
    print(f"read:  {n:,} AR steps ({size / 1e6:.1f} MB, {size / n:.1f} bytes/token): "
          f"{seconds:.3f} s, {n / seconds / 1e6:.2f} M events/s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write-events", type=int, default=200_000)
    p.add_argument("--read-events", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; medians of {args.repeat}")
    with tempfile.TemporaryDirectory(prefix="spectui-bench-") as d:
        bench_write(args.write_events, args.repeat, Path(d))
        bench_read(args.read_events, args.repeat, Path(d))


if __name__ == "__main__":
    main()
