"""Make ``docs/images/dashboard.svg``: the real dashboard after a real run on the embedded model.

The app is the one ``spectui`` opens (``make_app`` on the default configuration: speculative,
n-gram drafts, the default prompt), driven by Textual's Pilot in a virtual terminal: an AR run
(``m``, ``r``), then a speculative one (``m``, ``r``), and once the engine thread has finished
it the screen is saved as SVG. Nothing
is staged: the tokens, colours, sparklines and numbers are this machine's.

It loads the model, so on a shared machine run it under the model lock:

    flock /tmp/spectui-model.lock python docs/scripts/screenshot.py [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "docs" / "images" / "dashboard.svg"
#: Wide enough for the header's model and recording names, tall enough for the stream and plots.
SIZE = (120, 34)
#: Long enough for the sparklines to draw a shape, short enough to stay on one screen.
MAX_TOKENS = 160
RUN_TIMEOUT_S = 900


async def shoot(out: Path, *, threads: int | None, max_tokens: int, timeout_s: float) -> None:
    import msgspec

    from spectui.ui.launch import default_config, make_app

    config = default_config()
    config = msgspec.structs.replace(config, max_tokens=max_tokens)
    if threads is not None:
        config = msgspec.structs.replace(config, backend=msgspec.structs.replace(config.backend, n_threads=threads))
    app = make_app(config, record=False)
    deadline = time.monotonic() + timeout_s
    async with app.run_test(size=SIZE) as pilot:
        # as a person would: an AR run first (`m`, `r`), then back to speculative (`m`, `r`), so
        # the stats panel measures the speedup against that AR baseline
        for keys in (("m", "r"), ("m", "r")):
            await pilot.press(*keys)
            await finished(app, pilot, deadline)
        app.refresh_now()
        await pilot.pause(0.2)
        out.parent.mkdir(parents=True, exist_ok=True)
        app.save_screenshot(filename=out.name, path=str(out.parent))


async def finished(app, pilot, deadline: float) -> None:  # noqa: ANN001
    """Wait until the run the last keys started is over and the engine thread is free."""
    ctl = app.controller
    said = None
    await pilot.pause(0.2)
    while ctl.state not in ("done", "interrupted", "error") or ctl.runner.busy:
        if (ctl.state, ctl.detail) != said:  # a first run probes weights and calibrates: say so
            said = (ctl.state, ctl.detail)
            print(f"screenshot: {ctl.state} {ctl.detail}".rstrip(), file=sys.stderr)
        if time.monotonic() > deadline:
            raise SystemExit(f"screenshot: the runs did not end in time ({ctl.state}, {ctl.live.n_tokens} tokens)")
        await pilot.pause(0.1)
    if ctl.state != "done":
        raise SystemExit(f"screenshot: the run ended {ctl.state}: {ctl.detail}")


def main(argv: list[str] | None = None) -> int:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=OUT, help=f"the SVG to write (default {OUT.relative_to(REPO)})")
    p.add_argument("--threads", type=int, default=None,
                   help="llama.cpp threads (default: spectui's own; 1 on a machine other work keeps busy)")
    p.add_argument("--max-tokens", type=int, default=MAX_TOKENS, help=f"tokens to generate (default {MAX_TOKENS})")
    p.add_argument("--timeout", type=float, default=RUN_TIMEOUT_S, help=f"seconds the run may take (default {RUN_TIMEOUT_S})")
    args = p.parse_args(argv)
    import llama_cpp  # noqa: F401 - before numpy, as the command line loads it (spectui.cli._llama_before_numpy)

    asyncio.run(shoot(args.out, threads=args.threads, max_tokens=args.max_tokens, timeout_s=args.timeout))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
