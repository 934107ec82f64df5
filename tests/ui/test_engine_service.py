"""One engine per dashboard: a tune from the dashboard runs on the engine its sessions run on.

Each side runs in a process of its own (peak RSS is per process): the dashboard runs a session,
then, on one side only, ``t`` and ``r`` tune the same target. Counting ``Engine.load`` calls
(the real loader, wrapped) says how many times the weights were loaded; the tuned process's
peak RSS must stay within 10% of the plain one's, as it does when no second copy of the model
is loaded beside the first.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import seed_calibrations

from .conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.ui]

PROBE = r'''
import asyncio, json, resource, sys, time
import msgspec
from spectui.engine import embedded
from spectui.prompts import find_prompt
from spectui.tune.runner import TunePlan
from spectui.ui.launch import make_app
from spectui.ui.screens import tune as tune_screen
from spectui.ui.screens.tune import TuneScreen
from tests.ui.conftest import real_config

loads = 0
real_load = embedded.Engine.load.__func__

def counted(cls, config):
    global loads
    loads += 1
    return real_load(cls, config)

embedded.Engine.load = classmethod(counted)
tune_screen.short_plan = lambda: TunePlan(specs=[find_prompt("short-greeting")], max_tokens=16, reps=0)

async def until(pilot, cond, what, timeout=300):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.1)

async def main(tune):
    c = real_config()
    app = make_app(msgspec.structs.replace(c, backend=msgspec.structs.replace(c.backend, n_ctx=1024)), record=False)
    async with app.run_test(size=(160, 60)) as pilot:
        await pilot.press("r")
        await until(pilot, lambda: app.controller.runner.loads == 1 and not app.controller.running, "the session")
        if tune:
            await pilot.press("t")
            await until(pilot, lambda: isinstance(app.screen, TuneScreen) and app.screen.loaded, "the tune screen")
            screen = app.screen
            await pilot.press("r")
            await until(pilot, lambda: screen.result is not None or "failed" in screen.status, "the tune")
            assert screen.result is not None, screen.status
    print(json.dumps({"loads": loads, "runner_loads": app.controller.runner.loads,
                      "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))

asyncio.run(main(sys.argv[1] == "tune"))
'''


def probe(kind: str, env_dir, calibrations: str) -> dict:  # noqa: ANN001
    import os

    seed_calibrations(calibrations, env_dir / kind)  # the session's, measured once (tests/conftest.py)
    env = {**os.environ, "XDG_CACHE_HOME": str(env_dir / kind)}
    proc = subprocess.run([sys.executable, "-c", PROBE, kind], capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_tune_in_the_dashboard_loads_the_model_once(tmp_path, calibrations):
    plain = probe("plain", tmp_path, calibrations)
    tuned = probe("tune", tmp_path, calibrations)
    assert plain["loads"] == 1 and plain["runner_loads"] == 1
    assert tuned["loads"] == 1, f"the tune loaded the model again: {tuned['loads']} loads"
    assert tuned["runner_loads"] == 1
    assert tuned["peak_rss_kb"] <= 1.10 * plain["peak_rss_kb"], (plain, tuned)
