"""The package as a new user gets it: sdist and wheel built from this tree (``python -m build``:
the wheel is built from the sdist, so both must carry what runs), the wheel installed
non-editable with the demo extra into a fresh virtual environment (no system site-packages:
a dependency the wheel forgets to declare fails here), then, from a folder outside the
checkout, ``spectui --version``, a headless run on a shipped prompt, and the dashboard in tmux
(starts, runs, quits 0).

llama-cpp-python ships only a source package: pip's wheel cache (filled by the editable install
that set up this environment) spares the new environment a second compile, so the pip commands
run with pip's own cache, not the temporary ``XDG_CACHE_HOME`` the test suite sets
(``PIP_CACHE_DIR`` wins where it is set). Without a cached wheel the install compiles llama.cpp
(6-8 minutes on two cores), within this test's time limit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from spectui.recording.reader import read_recording
from tests.conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.ui, pytest.mark.timeout(2400)]

#: what the program reads at run time, as it must appear inside the wheel
PACKAGED = ["spectui/ui/app.tcss", "spectui/shipped/prompts/load-typo-fix.txt", "spectui/shipped/themes/spectui-dark.toml"]


def run(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(argv)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    """(the venv's bin folder, an environment for running it, a folder outside the checkout)."""
    root = tmp_path_factory.mktemp("wheel")
    pip_env = dict(os.environ)
    pip_env.pop("XDG_CACHE_HOME", None)  # pip's own cache holds the compiled llama-cpp-python
    pip_env.pop("PYTHONPATH", None)
    pip_env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    started = time.monotonic()
    dist = root / "dist"
    run([sys.executable, "-m", "build", "--outdir", str(dist), str(REPO)], cwd=root, env=pip_env, timeout=900)
    (wheel,) = dist.glob("spectui-*.whl")
    (sdist,) = dist.glob("spectui-*.tar.gz")
    built = time.monotonic()

    names = set(zipfile.ZipFile(wheel).namelist())
    for path in PACKAGED:
        assert path in names, f"{path} is missing from the wheel"
    assert not any(n.startswith(("prompts/", "themes/", "tests/")) for n in names)  # nothing outside the package
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata
    for dependency in ("rich", "platformdirs", "textual", "psutil"):
        assert f"Requires-Dist: {dependency}" in metadata, dependency
    assert any(n.endswith("licenses/LICENSE") for n in names)
    sdist_names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    for path in ("prompts/load-typo-fix.txt", "themes/spectui-dark.toml", "spectui/ui/app.tcss", "LICENSE", "setup.py"):
        assert path in sdist_names, f"{path} is missing from the sdist"

    venv = root / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=root, env=pip_env, timeout=300)
    bin_dir = venv / "bin"
    run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", f"{wheel}[demo]"], cwd=root, env=pip_env, timeout=1500)
    print(f"\nwheel test: build {built - started:.0f} s, install {time.monotonic() - built:.0f} s", file=sys.stderr)

    outside = root / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "SPECTUI_PROMPTS", "SPECTUI_THEMES")}
    env.update(SPECTUI_RECORDINGS=str(root / "recordings"), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
    return bin_dir, env, outside


def test_the_installed_package_is_the_wheel_and_finds_its_own_files(installed):
    bin_dir, env, outside = installed
    probe = (
        "import spectui, spectui.prompts as p, spectui.ui.themes as t; "
        "print(spectui.__file__); print(p.prompts_dir()); print(len(t.load_themes()))"
    )
    out = run([str(bin_dir / "python"), "-c", probe], cwd=outside, env=env, timeout=120).stdout.splitlines()
    site = str(bin_dir.parent)
    assert out[0].startswith(site) and "site-packages" in out[0]  # not the checkout
    assert out[1].startswith(site) and out[1].endswith(os.path.join("spectui", "shipped", "prompts"))
    assert int(out[2]) >= 3  # dark, light and 256-colour


def test_version_and_a_headless_run_on_a_shipped_prompt(installed):
    bin_dir, env, outside = installed
    version = run([str(bin_dir / "spectui"), "--version"], cwd=outside, env=env, timeout=120)
    assert version.stdout.strip().startswith("spectui 0.1.0")
    argv = [str(bin_dir / "spectui"), "run", "--headless", "--prompt-name", "load-typo-fix", "--max-tokens", "16"]
    proc = run(argv, cwd=outside, env=env, timeout=600)
    assert proc.stdout.strip(), proc.stderr
    assert "Traceback" not in proc.stderr and "tok/s" in proc.stderr
    (recording,) = Path(env["SPECTUI_RECORDINGS"]).glob("*.spectui")
    rec = read_recording(recording)
    assert rec.complete and rec.header.config.prompt_name == "load-typo-fix"
    assert not (outside / "recordings").exists()  # nothing written where it was started


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_dashboard_in_tmux_starts_runs_and_quits(installed, tmp_path):
    from tests.ui.test_tmux_e2e import Tmux

    bin_dir, env, outside = installed
    recordings = tmp_path / "recordings"
    status = tmp_path / "exit-status"
    tmux = Tmux(f"spectui-wheel-{os.getpid()}")
    try:
        tmux.start(f"{bin_dir / 'spectui'} --max-tokens 24", cwd=outside, status_file=status,
                   env=f"SPECTUI_RECORDINGS={recordings} PATH={bin_dir}:$PATH")
        screen = tmux.wait_for(lambda s: "idle" in s and "Quit" in s or "Traceback" in s, "the dashboard")
        assert "Traceback" not in screen and "spectui" in screen and "SmolLM2" in screen
        tmux("send-keys", "-t", "e2e", "r")
        tmux.wait_for(lambda s: "done" in s or "interrupted" in s, "the run to end")
        tmux.quit()
        assert status.read_text().strip() == "0", tmux.screen()
        assert "Traceback" not in tmux.screen()
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=30)
    (recording,) = recordings.glob("*.spectui")
    assert read_recording(recording).complete
