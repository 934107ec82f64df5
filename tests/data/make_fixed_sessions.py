"""Regenerate the fixed sessions the UI snapshot tests load (run from the repo root):

    python tests/data/make_fixed_sessions.py

Two real runs of the embedded model on prompts/load-technical-memo.txt, greedy, 160 tokens:
an AR baseline and a speculative n-gram run with K=4 (a memo: some acceptance, many
rollbacks, every token origin on screen). They are checked in, so snapshots never
depend on this machine's speed or memory; regenerating them changes the snapshots.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from spectui.config import RunConfig
from spectui.drafting import DraftConfig, Fixed
from spectui.engine.embedded import Engine
from spectui.prompts import find_prompt
from spectui.recording.writer import RecordingWriter

HERE = Path(__file__).resolve().parent
PROMPT = find_prompt("load-technical-memo", HERE.parents[1] / "prompts")
BASE = RunConfig(prompt=PROMPT.text, prompt_tier=PROMPT.tier, max_tokens=160, draft=DraftConfig(length=Fixed(k=4)))
RUNS = {
    "fixed-session-ar.spectui": msgspec.structs.replace(BASE, mode="ar"),
    "fixed-session.spectui": BASE,
}


def main() -> None:
    with Engine.load(RunConfig(prompt="x")) as engine:
        for _ in engine.run(BASE):  # warm-up: page faults and caches are not the recording's
            pass
        for name, config in RUNS.items():
            path = HERE / name
            if path.exists():
                os.remove(path)
            with RecordingWriter(path) as writer:
                # Memory every 100 ms: enough points for the headroom sparkline in a short run.
                for ev in engine.run(config, memory_interval_s=0.1):
                    writer.write(ev)
            print(f"{path} {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
