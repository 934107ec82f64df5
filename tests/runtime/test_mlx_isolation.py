"""mlx_lm.server is started where nothing of the user's can pass for mlx-lm, and loads only
exports that are the user's alone. No MLX needed: a planted ``mlx_lm/`` package in the working
directory must not be imported by the process spectui launches (it would run as the user and
serve unauthenticated); a half-written export a crashed run left is removed at the next start,
and an export another user could have changed is refused in one line."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from spectui.errors import SpectuiError
from spectui.paths import cache_dir
from spectui.runtime.mlx_lm_server import MlxLaunch, MlxLmServer, model_dir, python_path_without_relative
from spectui.runtime.server import start

DEAD_PID = 2**22 + 12345  # above Linux's and macOS's highest process id: never a live process


def _plant(folder: Path, marker: Path) -> None:
    for name in ("mlx_lm", "mlx"):
        (folder / name).mkdir()
        (folder / name / "__init__.py").write_text(f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\n")


@pytest.mark.parametrize("pythonpath", [None, "", ".", f"{os.pathsep}mlx_lm_parent"])
def test_a_planted_mlx_lm_in_the_working_directory_is_not_imported(tmp_path, monkeypatch, pythonpath):
    planted = tmp_path / "downloads"
    planted.mkdir()
    marker = tmp_path / "imported"
    _plant(planted, marker)
    monkeypatch.chdir(planted)  # the user runs spectui from a folder someone else filled
    if pythonpath is None:
        monkeypatch.delenv("PYTHONPATH", raising=False)
    else:
        monkeypatch.setenv("PYTHONPATH", pythonpath)
    model = planted / "model"
    model.mkdir()
    runtime = MlxLmServer(MlxLaunch(source=str(model), model="model"))  # named relative to where the user is
    with pytest.raises(SpectuiError, match=r"^mlx_lm\.server ") as err:  # no model there (and mlx-lm may not be installed)
        start(runtime, log_path=tmp_path / "mlx.log", ready_timeout_s=60)
    assert "\n" not in str(err.value)
    assert not marker.exists(), f"the planted package ran: {marker.read_text()}"
    argv = runtime.argv(8123)
    assert argv[argv.index("--model") + 1] == str(model)  # absolute: it starts elsewhere
    assert Path(runtime.workdir()).resolve() != planted.resolve()


def test_relative_entries_of_pythonpath_are_dropped():
    sep = os.pathsep
    assert python_path_without_relative(f"{sep}/opt/lib{sep}.{sep}src{sep}/home/u/mlx") == f"/opt/lib{sep}/home/u/mlx"
    assert python_path_without_relative("") == ""


def _cached_export(gguf: Path) -> Path:
    """Where ``model_dir`` keeps ``gguf``'s export, made as a finished export would be."""
    sha = hashlib.sha256(gguf.read_bytes()).hexdigest()[:16]
    out = cache_dir() / "mlx-lm" / "models" / sha / gguf.name.removesuffix(".gguf")
    out.mkdir(parents=True)
    (out / "config.json").write_text("{}")
    (out / "model.safetensors").write_bytes(b"weights")
    return out


def test_an_export_a_crashed_run_left_half_written_is_removed_at_the_next_start(tmp_path):
    gguf = tmp_path / "crashed.gguf"
    gguf.write_bytes(b"GGUF crashed")
    out = _cached_export(gguf)
    crashed = out.parent / f".{out.name}.{DEAD_PID}.tmp"
    working = out.parent / f".{out.name}.{os.getpid()}.tmp"  # an export under way in a live process
    elsewhere = out.parent.parent / "0123456789abcdef" / f".other.{DEAD_PID}.tmp"
    for folder in (crashed, working, elsewhere):
        folder.mkdir(parents=True)
    kept = out.parent / "notes"  # not a name spectui gives its exports
    kept.mkdir()
    assert model_dir(str(gguf)) == str(out)
    assert not crashed.exists() and not elsewhere.exists()
    assert working.exists() and kept.exists()


@pytest.mark.parametrize("what", ["file", "folder", "owner"])
def test_an_export_others_could_have_changed_is_refused_in_one_line(tmp_path, what):
    gguf = tmp_path / f"shared-{what}.gguf"
    gguf.write_bytes(f"GGUF {what}".encode())
    out = _cached_export(gguf)
    if what == "file":
        os.chmod(out / "model.safetensors", 0o666)
    elif what == "folder":
        os.chmod(out, 0o777)
    else:
        if os.getuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(out / "config.json", 65534, 65534)
    with pytest.raises(SpectuiError, match=r"the MLX export of shared-\w+\.gguf: .* spectui does not run or load it") as err:
        model_dir(str(gguf))
    assert "\n" not in str(err.value)
