"""Does the dashboard slow decoding down? Decode tok/s of the same run under the dashboard
(headless Textual, ``App.run_test``) and headless (``engine.run`` directly).

    python benchmarks/dashboard_vs_headless.py [--reps 5] [--max-tokens 256] [--record]

One process, one loaded engine shared by both variants; greedy, the same prompt, AR and
n-gram speculative (K=4). Repetitions alternate the order of the two variants, so drift in
machine load hits both alike; the report gives medians and the dashboard / headless ratio
(target >= 0.98) as the ratio of the medians (the verdict), with the median of the
per-repetition ratios beside it: on a shared machine single runs spread by +-20%, far more
than the effect measured, so both are printed.
Decode tok/s comes from the event timestamps, taken in the engine thread: whatever the UI
costs shows up as slower steps. The UI thread's own CPU share while decoding is printed too.

``--record`` writes a recording in both variants (the dashboard records by default); without
it neither records, which isolates the UI's own cost.

Threads: llama.cpp's CPU backend uses OpenMP, and libgomp keeps a thread team per calling
thread. With two live teams on two cores, libgomp stops spinning between parallel regions
and decoding drops to a third (measured). The dashboard calls llama.cpp from its one engine
thread only; so that the headless variant does not leave a second team alive next to it,
each headless run (and the engine load) happens on a fresh thread that exits afterwards,
which is what ``spectui run --headless`` is too: one process, one calling thread.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spectui.config import BackendConfig, RunConfig  # noqa: E402
from spectui.drafting import DraftConfig, Fixed  # noqa: E402
from spectui.engine.embedded import Engine  # noqa: E402
from spectui.metrics.stats import summarize  # noqa: E402
from spectui.prompts import find_prompt  # noqa: E402
from spectui.recording.writer import default_recording_path  # noqa: E402
from spectui.sessions.record import record_session  # noqa: E402
from spectui.ui.launch import make_app  # noqa: E402

SIZE = (160, 48)  # a large screen: more to draw than the 80x24 minimum
UI_CPU_SHARE: list[float] = []  # the UI thread's CPU time / wall time while decoding, per dashboard run


class SharedEngine:
    """The benchmark's engine, lent to each dashboard without letting it close it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.config = engine.config
        self.draft_model = engine.draft_model

    def run(self, config, *, stop=None):  # noqa: ANN001, ANN201
        return self.engine.run(config, stop=stop)

    def fits(self, config) -> bool:  # noqa: ANN001
        return self.engine.fits(config)

    def check(self, config) -> None:  # noqa: ANN001
        self.engine.check(config)

    def __getattr__(self, name: str):  # noqa: ANN204 - calibrate, warm_up, ...: the engine's own
        return getattr(self.engine, name)

    def close(self) -> None:
        pass


def on_fresh_thread(fn):  # noqa: ANN001, ANN201
    """``fn()`` on a new thread that exits afterwards (its OpenMP team goes with it)."""
    out: list = []
    errors: list[BaseException] = []

    def body() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return out[0]


def headless(engine: Engine, config: RunConfig, record_dir: str | None) -> tuple[float, int]:
    """What ``spectui run --headless`` does: the session through ``record_session``."""
    record_to = (lambda c: default_recording_path(c, record_dir)) if record_dir else None
    s = summarize(list(record_session(engine, config, record_to)))
    return s.decode_tok_s, s.n_tokens


async def dashboard(engine: Engine, config: RunConfig, record_dir: str | None) -> tuple[float, int]:
    shared = SharedEngine(engine)
    app = make_app(
        config,
        record=record_dir is not None,
        recordings_dir=record_dir,
        autostart=True,
        engine_factory=lambda _cfg: shared,
    )
    decoding: tuple[float, float] | None = None  # (wall, UI thread CPU) at the first token
    share: float | None = None
    async with app.run_test(size=SIZE):
        while app.controller.state not in ("done", "interrupted", "error") or app.controller.runner.busy:
            if decoding is None and app.controller.live.n_tokens:
                decoding = (time.monotonic(), time.thread_time())  # this thread runs the whole UI
            await asyncio.sleep(0.05)
        if decoding is not None:  # first token to the end of the run (within one poll)
            wall0, cpu0 = decoding
            share = (time.thread_time() - cpu0) / max(1e-9, time.monotonic() - wall0)
        if app.controller.state == "error":
            raise RuntimeError(app.controller.detail)
        s = app.controller.live.summary()
    if share is not None:
        UI_CPU_SHARE.append(share)
    return s.decode_tok_s, s.n_tokens


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--prompt-name", default="load-technical-memo", help="a prompt from prompts/ that runs long")
    ap.add_argument("--record", action="store_true", help="record in both variants")
    ap.add_argument("--threads", type=int, default=0, help="llama.cpp threads (0 = one per core)")
    ap.add_argument("--modes", default="ar,spec", help="comma-separated: ar, spec")
    args = ap.parse_args()

    prompt = find_prompt(args.prompt_name).text
    base = RunConfig(
        prompt=prompt,
        max_tokens=args.max_tokens,
        draft=DraftConfig(length=Fixed(k=4)),
        backend=BackendConfig(n_threads=args.threads),
    )
    configs = {m: msgspec.structs.replace(base, mode=m) for m in args.modes.split(",")}
    tmp = tempfile.TemporaryDirectory(prefix="spectui-bench-")
    record_dir = tmp.name if args.record else None

    results: dict[tuple[str, str], list[float]] = {}
    tokens: dict[tuple[str, str], list[int]] = {}
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    engine = on_fresh_thread(lambda: Engine.load(base))
    try:
        for config in configs.values():  # warm-up: caches, page faults, fingerprints
            on_fresh_thread(lambda c=config: headless(engine, c, None))
            asyncio.run(dashboard(engine, config, None))
        t0 = time.monotonic()
        for rep in range(args.reps):
            order = ("headless", "dashboard") if rep % 2 == 0 else ("dashboard", "headless")
            for mode, config in configs.items():
                for variant in order:
                    if variant == "headless":
                        rate, n = on_fresh_thread(lambda c=config: headless(engine, c, record_dir))
                    else:
                        rate, n = asyncio.run(dashboard(engine, config, record_dir))
                    results.setdefault((mode, variant), []).append(rate)
                    tokens.setdefault((mode, variant), []).append(n)
                    print(f"rep {rep + 1} {mode:4} {variant:9} {rate:7.1f} tok/s  ({n} tokens)", flush=True)
        elapsed = time.monotonic() - t0
    finally:
        on_fresh_thread(engine.close)
    tmp.cleanup()

    print(f"\n{args.reps} alternating repetitions in {elapsed:.0f} s; greedy, {args.max_tokens} tokens max, "
          f"prompt {args.prompt_name}, recording {'on' if args.record else 'off'}, dashboard {SIZE[0]}x{SIZE[1]}, "
          f"threads {args.threads or 'one per core'}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'mode':6}{'headless':>12}{'dashboard':>12}{'ratio':>8}{'paired':>8}   (median decode tok/s)")
    worst = float("inf")
    for mode in configs:
        h = statistics.median(results[(mode, "headless")])
        d = statistics.median(results[(mode, "dashboard")])
        ratio = d / h
        worst = min(worst, ratio)
        # Each repetition ran the two variants back to back; the median of those paired
        # ratios is shown beside the verdict as a second view of the same noise.
        paired = statistics.median(
            dv / hv for dv, hv in zip(results[(mode, "dashboard")], results[(mode, "headless")])
        )
        print(f"{mode:6}{h:12.1f}{d:12.1f}{ratio:8.3f}{paired:8.3f}")
    print(f"UI thread CPU while decoding: median {statistics.median(UI_CPU_SHARE):.1%} of one core")
    print(f"dashboard / headless, ratio of medians (worst mode): {worst:.3f}  target >= 0.98: {'met' if worst >= 0.98 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
