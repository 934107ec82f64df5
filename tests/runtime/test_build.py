"""Where llama-server comes from and what it is.

Fast: a source package on disk is unpacked with its git metadata kept (the commit is read from
it, no network), the build's progress is read from CMake's own lines, a binary named
explicitly wins. Slow: the real binary (built once into the user cache by the session
fixture) names the vendored commit, lists every method in its ``--help``, and ``spectui
runtime info`` / ``build`` say so.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from spectui.errors import SpectuiError
from spectui.runtime.build import (
    LINKED,
    ServerBinary,
    find_server,
    installed_llama_cpp_python,
    read_record,
    source_tree,
    spec_types,
)
from spectui.runtime.cmake import _build_fraction
from spectui.runtime.linked import installed_libraries
from spectui.runtime.methods import METHODS
from tests.conftest import run_cli

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _sdist(path: Path, *, with_git: bool = True) -> Path:
    top = "llama_cpp_python-9.9.9"
    files = {
        f"{top}/vendor/llama.cpp/CMakeLists.txt": b"project(llama)\n",
        f"{top}/vendor/llama.cpp/.git": b"gitdir: ../../.git/modules/vendor/llama.cpp\n",
        f"{top}/llama_cpp/__init__.py": b"",  # not unpacked: only llama.cpp is built
    }
    if with_git:
        files[f"{top}/.git/modules/vendor/llama.cpp/HEAD"] = (COMMIT + "\n").encode()
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_source_package_on_disk_is_unpacked_with_its_commit(tmp_path):
    source, commit = source_tree("9.9.9", sdist=str(_sdist(tmp_path / "s.tar.gz")), cache=tmp_path / "cache")
    assert commit == COMMIT
    assert (source / "CMakeLists.txt").is_file() and (source / ".git").is_file()
    # the submodule's gitdir resolves as the file says, so CMake (and git) find the commit
    assert (source / "../../.git/modules/vendor/llama.cpp/HEAD").resolve().read_text().strip() == COMMIT
    assert not (source.parent.parent / "llama_cpp").exists()
    # once unpacked, nothing is fetched or unpacked again (the package may be gone)
    assert source_tree("9.9.9", sdist=str(tmp_path / "gone.tar.gz"), cache=tmp_path / "cache") == (source, COMMIT)


def test_a_package_without_git_metadata_has_no_commit_and_a_foreign_archive_is_one_line(tmp_path):
    _, commit = source_tree("1.0.0", sdist=str(_sdist(tmp_path / "s.tar.gz", with_git=False)), cache=tmp_path / "c1")
    assert commit == ""
    with tarfile.open(tmp_path / "other.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo("something/README")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(SpectuiError, match="holds no vendor/llama.cpp: not a llama-cpp-python source package"):
        source_tree("2.0.0", sdist=str(tmp_path / "other.tar.gz"), cache=tmp_path / "c2")


@pytest.mark.parametrize("line, expected", [
    ("[ 45%] Building CXX object tools/server/CMakeFiles/llama-server.dir/server-context.cpp.o\n", (0.45, "server-context.cpp")),
    ("[100%] Linking CXX executable ../../bin/llama-server\n", (1.0, "llama-server")),
    ("[12/48] Building C object ggml/src/CMakeFiles/ggml-base.dir/ggml.c.o\n", (0.25, "ggml.c")),
    ("-- Configuring done\n", None),
])
def test_build_progress_is_read_from_cmakes_lines(line, expected):
    assert _build_fraction(line) == expected


def test_an_explicit_binary_wins_and_a_wrong_one_is_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv("SPECTUI_LLAMA_SERVER", raising=False)
    with pytest.raises(SpectuiError, match="--llama-server .*: no executable llama-server there"):
        find_server(str(tmp_path / "nothing"))
    monkeypatch.setenv("SPECTUI_LLAMA_SERVER", str(tmp_path))
    with pytest.raises(SpectuiError, match=r"\$SPECTUI_LLAMA_SERVER .*: no executable llama-server there"):
        find_server()


# -- the real binary ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.server
def test_the_built_binary_names_the_vendored_commit_and_lists_every_method(llama_server_binary: ServerBinary):
    b = llama_server_binary
    assert os.access(b.path, os.X_OK)
    assert set(spec_types(b.path)) >= set(METHODS)
    if b.origin == "built":
        record = read_record(Path(b.path).parent.parent)
        assert record is not None and record["llama_cpp_python"] == installed_llama_cpp_python()
        assert record["commit_full"] and record["commit_full"].startswith(b.commit)  # the sdist's HEAD, as --version says
        assert "-DLLAMA_USE_PREBUILT_UI=OFF" in record["flags"] and record["build_seconds"] > 0
        # linked to the installed llama-cpp-python's libraries (linked.py), which this venv has
        assert installed_libraries() is not None and record["links"] == LINKED == b.links
        assert {p.name for p in installed_libraries().iterdir()} <= {p.name for p in Path(b.path).parent.iterdir()}


@pytest.mark.slow
@pytest.mark.server
def test_runtime_info_and_build_say_which_binary_runs(llama_server_binary: ServerBinary):
    proc = run_cli("runtime", "info", "--llama-server", llama_server_binary.path, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["path"] == llama_server_binary.path and doc["commit"] == llama_server_binary.commit
    assert "ngram-mod" in doc["spec_types"] and "draft-mtp" in doc["spec_types"]
    text = run_cli("runtime", "info", "--llama-server", llama_server_binary.path).stdout
    assert f"llama-server: {llama_server_binary.path}" in text and "--spec-type: none, draft-simple" in text
    if llama_server_binary.origin == "built":  # named by its path, still described by its build record
        assert "links: the installed llama-cpp-python's libraries (the embedded engine's own)" in text
    bad = run_cli("runtime", "info", "--llama-server", "/nonexistent/llama-server")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no executable llama-server there" in bad.stderr
