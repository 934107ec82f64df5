"""ruff and mypy pass with the configuration in pyproject.toml ([tool.ruff], [tool.mypy]): the
rules the code follows stay followed, and every ``noqa`` / ``type: ignore`` left is one the
checkers still need.

ruff reads spectui/, tests/ and benchmarks/ (tests and benchmarks without the annotation
rules: see pyproject.toml); mypy checks spectui/. mypy keeps its incremental cache in
.mypy_cache/ (gitignored): a first run reads every imported library's types (about a minute
of CPU), later runs only what changed (seconds).
"""

import re
import subprocess
import sys
from pathlib import Path

from tests.unit.conftest import mypy_key

REPO = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=REPO, timeout=600)


def test_ruff_passes():
    out = run("ruff", "check", "--no-fix", "--output-format", "concise", "spectui", "tests", "benchmarks")
    assert out.returncode == 0, f"ruff check found problems:\n{out.stdout}{out.stderr}"
    assert "All checks passed" in out.stdout, out.stdout + out.stderr


def test_mypy_passes(request):
    # files, strictness and the cache all come from pyproject.toml; tests/unit/conftest.py
    # started it when the tests were collected (a cold cache costs a minute)
    proc = request.config.stash.get(mypy_key, None)
    if proc is None:  # collected some other way than by node id: run it here
        out = run("mypy")
        returncode, stdout = out.returncode, out.stdout + out.stderr
    else:
        stdout, _ = proc.communicate(timeout=600)
        returncode = proc.returncode
    assert returncode == 0, f"mypy found problems:\n{stdout}"
    # every module of spectui was checked (the configuration's `files` names the package)
    modules = sum(1 for _ in (REPO / "spectui").rglob("*.py"))
    assert f"no issues found in {modules} source files" in stdout, stdout


#: a suppression, its codes, and what follows them on the line (the reason)
SUPPRESSION = re.compile(r"# (?:noqa(?P<noqa>: [A-Z]+[0-9]+(?:, *[A-Z]+[0-9]+)*)?|type: ignore(?P<ignore>\[[a-z-]+(?:, *[a-z-]+)*\])?)(?P<rest>.*)")


def test_every_suppression_says_why():
    """Each ``# noqa: CODE`` and ``# type: ignore[code]`` in spectui/ names its codes and gives
    its reason after them (``# noqa: BLE001 - the sampler must outlive any failure``)."""
    bare = []
    for path in sorted((REPO / "spectui").rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in SUPPRESSION.finditer(line):
                if not (m["noqa"] or m["ignore"]) or not re.search(r"\w", m["rest"]):
                    bare.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not bare, "a suppression without its codes or its reason:\n" + "\n".join(bare)
