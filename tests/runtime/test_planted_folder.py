"""Nothing the working folder holds runs: a folder planted with ``pip/``, ``mlx_lm/``, ``mlx/``,
``llama_cpp/`` and ``spectui/`` packages and ``cmake``, ``nice``, ``ssh`` programs (``.`` first on
``$PATH``), then every command that starts a subprocess, run from it as a person would (the
installed console script). Each planted thing writes a marker naming itself; no marker may
appear. Fast: the commands fail early (no index for pip, a fake source package, a fake ssh), and
what matters is what ran on the way."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from spectui import subprocesses
from tests.runtime.test_build import _sdist

SPECTUI = Path(sys.executable).with_name("spectui")
PACKAGES = ("pip", "mlx_lm", "mlx", "llama_cpp", "spectui")
PROGRAMS = ("cmake", "nice", "ssh", "make", "python", "python3")


@pytest.fixture
def planted(tmp_path):
    """(the planted folder, the marker file, the environment a command runs with)."""
    folder = tmp_path / "cloned-repo"
    folder.mkdir()
    marker = tmp_path / "planted-code-ran"
    code = f"import os\nopen({str(marker)!r}, 'a').write(__name__ + ' in ' + os.getcwd() + '\\n')\n"
    for name in PACKAGES:
        (folder / name).mkdir()
        (folder / name / "__init__.py").write_text(code)
        (folder / name / "__main__.py").write_text(code)
    for name in PROGRAMS:
        program = folder / name
        program.write_text(f"#!/bin/sh\necho '{name} (planted) in '\"$PWD\" >> {marker}\n")
        program.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f".{os.pathsep}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
        "HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_DATA_HOME": str(tmp_path / "data"),
        "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "CMAKE_BUILD_PARALLEL_LEVEL": "1",
    }  # fmt: skip
    env.pop("PYTHONPATH", None)  # spectui itself is the installed one: the question is what it starts
    for name in ("SPECTUI_LLAMA_SERVER", "SPECTUI_LLAMA_CPP_SDIST", "SPECTUI_SSH", "SPECTUI_REMOTE_COMMAND"):
        env.pop(name, None)
    (tmp_path / "home").mkdir()
    return folder, marker, env


def _spectui(folder: Path, env: dict[str, str], *words: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(SPECTUI), *words], cwd=folder, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def _nothing_ran(marker: Path) -> None:
    assert not marker.exists(), "planted code ran:\n" + marker.read_text()


@pytest.mark.skipif(not SPECTUI.is_file(), reason="the installed console script")
def test_runtime_build_downloads_with_an_isolated_pip(planted):
    """`spectui runtime build` runs `python -m pip download`: the planted pip/ must not be it."""
    folder, marker, env = planted
    result = _spectui(folder, env, "runtime", "build")
    assert result.returncode != 0  # no index: pip finds nothing, said in one line
    assert "pip download failed" in result.stderr, result.stderr
    _nothing_ran(marker)


@pytest.mark.skipif(not SPECTUI.is_file(), reason="the installed console script")
def test_runtime_build_from_a_source_package_runs_no_planted_cmake_or_nice(planted, tmp_path):
    """The build's CMake steps (configure, build) with `.` first on $PATH: the real cmake runs,
    in a private folder, never the one planted where the user stands."""
    folder, marker, env = planted
    sdist = _sdist(tmp_path / "llama_cpp_python.tar.gz")
    assert tarfile.is_tarfile(sdist)
    result = _spectui(folder, env, "runtime", "build", "--sdist", str(sdist))
    assert result.returncode != 0  # a fake llama.cpp builds no llama-server
    assert "Traceback" not in result.stderr
    _nothing_ran(marker)


@pytest.mark.skipif(not SPECTUI.is_file(), reason="the installed console script")
def test_a_run_on_a_host_starts_ssh_in_a_private_folder(planted, tmp_path):
    """`--host` starts the ssh client; here a stand-in that runs `python -c 'import spectui'`,
    which imports from its working folder first: from the user's, the planted spectui/ ran."""
    folder, marker, env = planted
    fake_ssh = tmp_path / "fake-ssh"
    fake_ssh.write_text(f"#!/bin/sh\npwd > {tmp_path / 'ssh-cwd'}\n{sys.executable} -c 'import spectui, pip, llama_cpp'\nexit 255\n")
    fake_ssh.chmod(0o755)
    result = _spectui(folder, {**env, "SPECTUI_SSH": str(fake_ssh)}, "run", "--headless", "--host", "node-a", "--prompt", "hi", timeout=120)
    assert result.returncode != 0 and "node-a" in result.stderr, result.stderr
    assert (tmp_path / "ssh-cwd").read_text().strip() != str(folder)
    _nothing_ran(marker)


@pytest.mark.skipif(not SPECTUI.is_file(), reason="the installed console script")
def test_a_project_file_naming_a_runtime_starts_no_build_until_trusted(planted, tmp_path):
    """A cloned folder's spectui.toml that says `runtime = "llama-server"` with no server built:
    refused in one line before anything is downloaded or built."""
    folder, marker, env = planted
    (folder / "spectui.toml").write_text('[defaults]\nruntime = "llama-server"\n')
    result = _spectui(folder, env, "run", "--headless", "--prompt", "hi", timeout=120)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"spectui: error: {folder / 'spectui.toml'}:2: runtime starts a server program"), line
    assert not list((tmp_path / "cache").rglob("pip-download.log"))  # no download was started
    _nothing_ran(marker)


def test_every_child_gets_absolute_search_paths_and_a_private_folder(tmp_path, monkeypatch):
    """The helper itself: relative and empty entries of PATH and PYTHONPATH go, a bare program
    is found on the absolute entries only, a relative path is made absolute where it was named."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cmake").write_text("#!/bin/sh\n")
    (tmp_path / "cmake").chmod(0o755)
    env = {"PATH": f".{os.pathsep}{os.pathsep}bin{os.pathsep}/usr/bin{os.pathsep}/bin", "PYTHONPATH": f".{os.pathsep}src"}
    clean = subprocesses.clean_env(env)
    assert clean["PATH"] == f"/usr/bin{os.pathsep}/bin" and "PYTHONPATH" not in clean
    argv, _env, cwd = subprocesses.isolated(["cmake", "--version"], env)
    assert argv[0] != str(tmp_path / "cmake") and os.path.isabs(argv[0])
    assert subprocesses.resolve(["./tool", "x"], env) == [str(tmp_path / "tool"), "x"]
    assert cwd == subprocesses.private_cwd() and os.stat(cwd).st_mode & 0o077 == 0 and not os.listdir(cwd)
    assert subprocesses.python_argv("-m", "pip")[:2] == [sys.executable, "-I"]
