"""README's first command installs on a Python that refuses plain ``pip install`` (PEP 668:
Debian, Ubuntu, Fedora, Homebrew mark their Python "externally managed").

The stand-in for such a Python is this test's own interpreter under a new prefix: a copy of its
executable beside links to its standard library, plus an ``EXTERNALLY-MANAGED`` file in that
standard library. (A marker inside a virtual environment would not do: pip ignores the marker
in any virtual environment, and a venv's standard library is its base Python's, shared with
everything else on the machine.) The test first proves the stand-in refuses a plain install,
then runs README line 1 up to ``&& spectui`` with that Python first on PATH, in a copy of the
checkout (never creating the checkout's own .venv), and runs ``spectui --version`` from the
.venv it made.

pip runs as in tests/functional/test_wheel_install.py, with pip's own cache; llama-cpp-python
(a source package that compiles llama.cpp for ~8 minutes) comes as the wheel pip built for this
environment's install, pinned to the installed version, so nothing compiles.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.functional.test_wheel_install import run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(2400),
    pytest.mark.skipif(sys.platform != "linux", reason="the stand-in system Python is built the Linux way"),
]

MARKER = """[externally-managed]
Error=This Python is managed by the system (spectui's PEP 668 stand-in): use a virtual environment.
"""


def readme_install_command() -> str:
    """README line 1 without its last step (the dashboard): the install alone."""
    first = (Path(REPO) / "README.md").read_text().splitlines()[0]
    install, sep, _ = first.rpartition("&& spectui")
    assert sep and "pip install" in install, f"README line 1 is not the install-and-run command: {first}"
    return install.strip()


def system_python(root: Path) -> Path:
    """A Python that is not a virtual environment, at a prefix of its own (``root``), marked
    externally managed: the executable copied (a link would lead Python back to its real
    prefix), the standard library linked in entry by entry, pip linked into its own
    site-packages (so ``python -m pip`` can be refused)."""
    base_stdlib = Path(sysconfig.get_path("stdlib"))  # the base Python's, also inside a venv
    base_exe = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = root / base_stdlib.relative_to(sys.base_prefix)
    (root / "bin").mkdir(parents=True)
    stdlib.mkdir(parents=True)
    shutil.copy2(base_exe, root / "bin" / version)
    (root / "bin" / "python3").symlink_to(version)
    for entry in base_stdlib.iterdir():
        if entry.name != "site-packages":
            (stdlib / entry.name).symlink_to(entry)
    site = stdlib / "site-packages"
    site.mkdir()
    pip_dir = Path(importlib.util.find_spec("pip").submodule_search_locations[0])
    (site / "pip").symlink_to(pip_dir)
    (stdlib / "EXTERNALLY-MANAGED").write_text(MARKER)
    return root / "bin" / "python3"


def checkout_copy(dest: Path) -> Path:
    """The checkout's files (tracked and new, none ignored: no .venv, no build output)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True)
    if listed.returncode == 0:
        for name in filter(None, listed.stdout.split("\0")):
            source = Path(REPO) / name
            if source.is_file():  # a tracked file deleted in the working tree is not there
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest / name)
    else:  # not a git checkout (an unpacked sdist)
        shutil.copytree(REPO, dest, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", "build", "dist"),
                        dirs_exist_ok=True)
    return dest


def llama_cpp_wheel(pip_env: dict[str, str], into: Path) -> Path | None:
    """The llama-cpp-python wheel pip built for this environment's install (pip's wheel cache),
    copied into ``into``; None where pip's cache has none (the install then compiles it)."""
    version = importlib.metadata.version("llama-cpp-python")
    listed = subprocess.run([sys.executable, "-m", "pip", "cache", "list", "--format=abspath", f"llama_cpp_python-{version}-"],
                            capture_output=True, text=True, env=pip_env, timeout=120)
    wheels = [Path(line) for line in listed.stdout.splitlines() if line.endswith(".whl")]
    if not wheels:
        return None
    into.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy2(wheels[0], into))


def test_readme_install_works_where_the_system_python_is_externally_managed(tmp_path):
    # pip's own cache (the suite's XDG_CACHE_HOME is a temporary one); nothing that would let
    # pip past the marker (PIP_BREAK_SYSTEM_PACKAGES) or point Python elsewhere
    dropped = ("XDG_CACHE_HOME", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_BREAK_SYSTEM_PACKAGES", "PIP_REQUIRE_VIRTUALENV")
    pip_env = {k: v for k, v in os.environ.items() if k not in dropped}
    pip_env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    python = system_python(tmp_path / "system")
    this_venv_bin = os.path.dirname(sys.executable)
    path = [str(python.parent), *(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != this_venv_bin)]
    env = {**pip_env, "PATH": os.pathsep.join(path)}

    # the stand-in is what it stands for: not a virtual environment, and its pip refuses
    probe = run(["python3", "-c", "import sys; print(sys.prefix == sys.base_prefix, sys.prefix)"], cwd=tmp_path, env=env,
                timeout=120)
    assert probe.stdout.split() == ["True", str(python.parent.parent)], probe.stdout
    local = tmp_path / "probe-package"
    local.mkdir()
    (local / "pyproject.toml").write_text('[project]\nname = "pep668-probe"\nversion = "0"\n')
    refused = subprocess.run(["python3", "-m", "pip", "install", "--no-index", "--no-deps", "--no-build-isolation", str(local)],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0 and "externally-managed-environment" in refused.stderr, refused.stdout + refused.stderr

    wheel = llama_cpp_wheel(pip_env, tmp_path / "wheels")
    if wheel is not None:  # the built wheel, and only that version: a newer source release would compile
        (tmp_path / "constraints.txt").write_text(f"llama-cpp-python=={importlib.metadata.version('llama-cpp-python')}\n")
        env["PIP_FIND_LINKS"] = " ".join(filter(None, [str(wheel.parent), env.get("PIP_FIND_LINKS")]))
        env["PIP_CONSTRAINT"] = str(tmp_path / "constraints.txt")

    copy = checkout_copy(tmp_path / "checkout")
    install = readme_install_command()
    proc = subprocess.run(["bash", "-c", install], cwd=copy, env=env, capture_output=True, text=True, timeout=2000)
    assert proc.returncode == 0, f"{install} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"

    venv_bin = copy / ".venv" / "bin"
    assert (venv_bin / "spectui").exists(), sorted(p.name for p in copy.iterdir())
    run_env = {**env, "PATH": os.pathsep.join([str(venv_bin), *path])}
    version = run(["spectui", "--version"], cwd=copy, env=run_env, timeout=120)
    assert version.stdout.strip().startswith("spectui "), version.stdout
    where = run([str(venv_bin / "python"), "-c", "import spectui, sys; print(spectui.__file__); print(sys.base_prefix)"],
                cwd=tmp_path, env=run_env, timeout=120).stdout.split()
    assert where == [str(copy / "spectui" / "__init__.py"), str(python.parent.parent)]  # the copy, on the stand-in
