"""Regenerate the tune result the tune screen's snapshot shows (run from the repo root):

    python tests/data/make_tune_result.py

A real ``run_tune`` of the embedded model (the copy and short prompts of prompts/, 96 tokens,
one check round, one thread), saved as ``spectui tune --json`` stores it. It is checked in so
the snapshot never depends on this machine's speed; regenerating it changes the snapshot.
"""

from __future__ import annotations

import json
from pathlib import Path

from spectui.config import BackendConfig, RunConfig
from spectui.prompts import find_prompt
from spectui.tune.report import to_json
from spectui.tune.runner import TunePlan, run_tune

HERE = Path(__file__).resolve().parent
PROMPTS = HERE.parents[1] / "prompts"
OUT = HERE / "tune-result.json"


def main() -> None:
    config = RunConfig(prompt="x", backend=BackendConfig(n_threads=1, n_ctx=1024))  # 1024: no long-context curve
    specs = [find_prompt(name, PROMPTS) for name in ("load-typo-fix", "short-greeting")]
    plan = TunePlan(specs=specs, max_tokens=96, reps=1)
    result = run_tune(config, plan, lambda text: print(f"tune: {text}"))
    doc = {"key": result.key, "measured_at": result.measured_at, **to_json(result)}
    OUT.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
