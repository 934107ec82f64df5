"""Does memory stay flat under continuous decoding? A 600 s soak on the embedded model.

Runs n-gram speculative decoding (K=4) back to back on every prompt in prompts/ but the
quality-* ones, each with its own token ceiling, records every session, then prints the RSS
slope in MiB/min with its 95% interval, the growth, swap, and acceptance per 5-minute window
(the same report as ``spectui soak``; re-read it with ``spectui soak --analyze DIR``).

    python benchmarks/soak.py [--duration 600] [--window 300] [--threads N] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from spectui.cli.signals import StopOnSignal  # noqa: E402
from spectui.config import BackendConfig, RunConfig  # noqa: E402
from spectui.drafting import DraftConfig, Fixed  # noqa: E402
from spectui.lab.soak import (  # noqa: E402
    SoakThresholds,
    analyze_folder,
    format_soak_report,
    run_soak,
    session_configs,
    soak_prompts,
)
from spectui.sessions.open import open_engine  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=600.0, help="seconds of decoding")
    ap.add_argument("--window", type=float, default=300.0, help="report window in seconds")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0 = all cores; 1 when another decoder shares the cores)")
    ap.add_argument("--out", default=None, help="folder for the recordings (default: a new temporary folder, kept)")
    args = ap.parse_args()
    folder = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="spectui-soak-")) / "soak"
    prompts = soak_prompts()
    base = RunConfig(
        mode="spec", draft=DraftConfig(length=Fixed(k=4)), prompt=prompts[0].text, backend=BackendConfig(n_threads=args.threads)
    )
    configs = session_configs(base, prompts)
    print(f"soak: {args.duration:g} s, {base.draft.label()}, {len(prompts)} prompts ({', '.join(p.name for p in prompts)})", file=sys.stderr)
    with open_engine(base) as engine, StopOnSignal() as stop:
        run = run_soak(engine, configs, duration_s=args.duration, folder=folder, stop=stop)
    report = analyze_folder(folder, SoakThresholds(window_s=args.window))
    lo, hi = report.slope_ci95_mib_min
    print(
        f"RSS slope {report.slope_mib_min:+.3f} MiB/min (95% CI {lo:+.3f} .. {hi:+.3f}), growth {report.growth_mib:+.2f} MiB"
        f" over {report.fit_span_s:.0f} s; swap {report.swap_start_mib:.1f} -> {report.swap_end_mib:.1f} MiB;"
        f" acceptance per window " + " ".join(f"{w.acceptance_rate:.3f}" for w in report.windows)
        + f"; {len(run.paths)} sessions, {run.tokens} tokens{' (stopped early)' if run.stopped else ''}"
    )
    print(format_soak_report(report, folder))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
