"""mypy, started as soon as the tests are collected, in the background.

With a cold cache (a clean checkout: CI) mypy reads every imported library's types, about a
minute of one core. The tests run on one core too, so starting mypy before the first test and
collecting its verdict in ``test_lint.py::test_mypy_passes`` takes that minute off the fast
tier's wall time on a machine with a second core; the verdict is the same as running it there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MYPY_TEST = "tests/unit/test_lint.py::test_mypy_passes"
mypy_key = pytest.StashKey[subprocess.Popen]()


def pytest_collection_finish(session: pytest.Session) -> None:
    # under pytest-xdist every worker collects every test: one mypy, not one per worker (a
    # worker without it that gets the test runs mypy there)
    if os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        return
    if any(item.nodeid == MYPY_TEST for item in session.items):
        session.config.stash[mypy_key] = subprocess.Popen(
            [sys.executable, "-m", "mypy"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    proc = config.stash.get(mypy_key, None)
    if proc is not None and proc.poll() is None:  # the run stopped before the test collected it
        proc.kill()
        proc.wait()
