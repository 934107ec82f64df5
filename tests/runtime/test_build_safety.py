"""A build that fails or is interrupted leaves nothing running, a crashed one leaves nothing in
the way of the next, a cached build is run only while it is the user's alone, and a source
package is never unpacked unchecked, on a Python without ``tarfile``'s ``data`` filter too.
Fast: fake build commands (shell scripts that start a grandchild, as make starts compilers),
small archives, no compiler."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import psutil
import pytest

from spectui.runtime.build import RECORD_NAME, built_server, server_build_dir, source_tree
from spectui.runtime.cmake import BuildError, compile_targets, run_logged
from tests.runtime.test_build import COMMIT, _sdist

DEAD_PID = 2**22 + 12345  # above Linux's and macOS's highest process id: never a live process


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def _grandchild(pid_file: Path) -> str:
    # a compiler make started: its output elsewhere, so only the group kill can end it
    return f"sleep 300 >/dev/null 2>&1 &\necho $! > {pid_file}\n"


def _read_pid(pid_file: Path) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if pid_file.exists() and pid_file.read_text().strip():
            return int(pid_file.read_text())
        time.sleep(0.05)
    raise AssertionError("the fake build never started its grandchild")


def _cleanup(pid: int) -> None:
    if not _gone(pid, 0.1):
        os.kill(pid, 9)


def test_a_failed_step_leaves_none_of_its_processes_running(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    step = _script(tmp_path / "configure.sh", _grandchild(pid_file) + "echo 'error: no compiler'\nexit 3\n")
    with pytest.raises(BuildError, match=r"cmake configure failed \(exit 3\): error: no compiler; see "):
        run_logged([str(step)], tmp_path / "configure.log", "cmake configure")
    pid = _read_pid(pid_file)
    try:
        assert _gone(pid), "a process the failed step started is still running"
    finally:
        _cleanup(pid)


@pytest.fixture
def fake_cmake(tmp_path, monkeypatch):
    """A ``cmake`` on $PATH whose build starts a compiler (a grandchild), prints CMake's
    progress, then ends as ``ending`` says."""

    def make(ending: str) -> Path:
        folder = tmp_path / "bin"
        folder.mkdir(exist_ok=True)
        pid_file = tmp_path / "compiler.pid"
        _script(folder / "cmake", _grandchild(pid_file) + "echo '[ 10%] Building CXX object a.cpp.o'\n" + ending)
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
        return pid_file

    return make


def test_a_failed_compile_leaves_no_compiler_running(tmp_path, fake_cmake):
    pid_file = fake_cmake("echo 'a.cpp:1: error: nope'\nexit 2\n")
    build = tmp_path / "build"
    build.mkdir()
    with pytest.raises(BuildError, match=r"cmake --build failed \(exit 2\)"):
        compile_targets(build, ["llama-server"])
    pid = _read_pid(pid_file)
    try:
        assert _gone(pid), "a compiler of the failed build is still running"
    finally:
        _cleanup(pid)


def test_an_interrupted_compile_leaves_no_compiler_running(tmp_path, fake_cmake):
    pid_file = fake_cmake("sleep 300\n")
    build = tmp_path / "build"
    build.mkdir()

    def ctrl_c(_fraction: float, _text: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        compile_targets(build, ["llama-server"], progress=ctrl_c)
    pid = _read_pid(pid_file)
    try:
        assert _gone(pid), "a compiler of the interrupted build is still running"
    finally:
        _cleanup(pid)


def test_an_unpacking_a_crashed_run_left_is_removed_at_the_next_start(tmp_path):
    cache = tmp_path / "cache"
    root = cache / "llama.cpp" / "9.9.9"
    crashed = root / f".unpack-{DEAD_PID}-abc123"
    working = root / f".unpack-{os.getpid()}-def456"  # another unpacking under way in a live process
    old_style = root / ".unpack-q1w2e3"  # an older spectui's name: no process id, judged by its age
    fresh_old_style = root / ".unpack-r4t5y6"
    mine_not = root / "unpack-notes"
    for folder in (crashed, working, old_style, fresh_old_style, mine_not):
        folder.mkdir(parents=True)
    two_days_ago = time.time() - 2 * 86400
    os.utime(old_style, (two_days_ago, two_days_ago))
    source, commit = source_tree("9.9.9", sdist=str(_sdist(tmp_path / "s.tar.gz")), cache=cache)
    assert commit == COMMIT and (source / "CMakeLists.txt").is_file()
    assert not crashed.exists() and not old_style.exists()
    assert working.exists() and fresh_old_style.exists() and mine_not.exists()
    assert not [p for p in root.iterdir() if p.name.startswith(f".unpack-{os.getpid()}-") and p != working]


# -- the cached build: the user's alone --------------------------------------------------------


def _cached_build(cache: Path) -> Path:
    build = server_build_dir("9.9.9", cache)
    (build / "bin").mkdir(parents=True)
    binary = _script(build / "bin" / "llama-server", "echo 'version: 1 (abc1234)'\n")
    (build / "bin" / "libllama.so").write_bytes(b"\x7fELF")
    (build / RECORD_NAME).write_text(json.dumps({"llama_cpp_python": "9.9.9", "version": "b1", "commit": "abc1234"}))
    return binary


def test_a_cached_build_that_is_the_users_alone_is_run(tmp_path):
    binary = _cached_build(tmp_path)
    found = built_server("9.9.9", cache=tmp_path)
    assert found is not None and found.path == str(binary)


@pytest.mark.parametrize("what", ["binary", "bin", "build", "library", "owner"])
def test_a_cached_build_others_could_have_changed_is_refused_in_one_line(tmp_path, what):
    binary = _cached_build(tmp_path)
    target = {"binary": binary, "bin": binary.parent, "build": binary.parent.parent, "library": binary.parent / "libllama.so",
              "owner": binary}[what]
    if what == "owner":
        if os.getuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(target, 65534, 65534)
    else:
        os.chmod(target, stat.S_IMODE(target.stat().st_mode) | stat.S_IWOTH)
    with pytest.raises(BuildError, match=r"the cached llama-server build: .* spectui does not run or load it \(remove .* and run "
                                         r"`spectui runtime build`\)") as err:
        built_server("9.9.9", cache=tmp_path)
    assert str(target) in str(err.value) and "\n" not in str(err.value)


# -- unpacking without the data filter ---------------------------------------------------------


@pytest.fixture
def python_without_data_filter(monkeypatch):
    """This Python as 3.10.11 was: no ``tarfile.data_filter``, no ``filter=`` argument."""
    monkeypatch.delattr(tarfile, "data_filter")
    for method in ("extractall", "extract"):
        real = getattr(tarfile.TarFile, method)

        def old(self, *args, _real=real, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - tarfile's signature
            if "filter" in kwargs:
                raise TypeError(f"{_real.__name__}() got an unexpected keyword argument 'filter'")
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(tarfile.TarFile, method, old)


TOP = "llama_cpp_python-9.9.9"


def _archive(path: Path, extra: list[tarfile.TarInfo]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in {f"{TOP}/vendor/llama.cpp/CMakeLists.txt": b"project(llama)\n",
                           f"{TOP}/.git/modules/vendor/llama.cpp/HEAD": (COMMIT + "\n").encode()}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info, io.BytesIO(b"x" * info.size) if info.isreg() else None)
    return path


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(f"{TOP}/vendor/llama.cpp/{name}")
    info.type, info.linkname, info.mode = kind, link, mode
    info.size = 1 if kind == tarfile.REGTYPE else 0
    return info


def test_a_good_package_unpacks_without_the_data_filter(tmp_path, python_without_data_filter):
    extra = [_member("ggml/src/a.c", mode=0o4777), _member("include"), _member("inc", tarfile.SYMTYPE, "include")]
    extra[1].type = tarfile.DIRTYPE
    source, commit = source_tree("9.9.9", sdist=str(_archive(tmp_path / "good.tar.gz", extra)), cache=tmp_path / "cache")
    assert commit == COMMIT and (source / "CMakeLists.txt").read_bytes() == b"project(llama)\n"
    mode = stat.S_IMODE((source / "ggml/src/a.c").stat().st_mode)
    assert mode == 0o755, oct(mode)  # no set-id bit, no group/other write: as the data filter leaves it
    assert (source / "inc").is_symlink() and os.readlink(source / "inc") == "include"


@pytest.mark.parametrize(("member", "why"), [
    (_member("../../../../escaped"), r"climbs out of the folder"),
    (_member("up", tarfile.SYMTYPE, "../../../.."), r"links outside the folder"),
    (_member("passwd", tarfile.SYMTYPE, "/etc/passwd"), r"links to an absolute path"),
    (_member("hard", tarfile.LNKTYPE, "/etc/passwd"), r"links to an absolute path"),
    (_member("null", tarfile.CHRTYPE), r"is a device, FIFO or other special file"),
    (_member("pipe", tarfile.FIFOTYPE), r"is a device, FIFO or other special file"),
])
def test_an_unsafe_member_is_refused_without_the_data_filter(tmp_path, python_without_data_filter, member, why):
    archive = _archive(tmp_path / "bad.tar.gz", [member])
    with pytest.raises(BuildError, match=rf"unpacking bad\.tar\.gz refused: .*{why}") as err:
        source_tree("9.9.9", sdist=str(archive), cache=tmp_path / "cache")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "escaped").exists()
    assert not (tmp_path / "cache" / "llama.cpp" / "9.9.9" / "sdist").exists()


def test_a_link_through_an_earlier_link_is_refused_without_the_data_filter(tmp_path, python_without_data_filter):
    # each alone stays inside; together the second climbs out through the first
    # (s/t names the unpacking's own top folder; a, read as written, stays in llama.cpp/)
    chain = [_member("s"), _member("s/t", tarfile.SYMTYPE, "../../../.."), _member("a", tarfile.SYMTYPE, "s/t/../..")]
    chain[0].type = tarfile.DIRTYPE
    with pytest.raises(BuildError, match=r"refused: .*links outside the folder"):
        source_tree("9.9.9", sdist=str(_archive(tmp_path / "chain.tar.gz", chain)), cache=tmp_path / "cache")


def test_an_unsafe_member_is_refused_with_the_data_filter_too(tmp_path):
    archive = _archive(tmp_path / "bad.tar.gz", [_member("../../../../escaped")])
    with pytest.raises(BuildError, match=r"unpacking bad\.tar\.gz refused: ") as err:
        source_tree("9.9.9", sdist=str(archive), cache=tmp_path / "cache")
    assert "\n" not in str(err.value)


#: spectui's stand-in: configure a real CMake project and build its one target, as the runtime
#: build does, until the test kills it with SIGKILL.
_BUILDING = """
import sys
from pathlib import Path
from spectui.runtime.cmake import cmake_build
cmake_build(Path(sys.argv[1]), Path(sys.argv[2]), ["llama-server"], [])
"""


@pytest.mark.skipif(shutil.which("cmake") is None or not sys.platform.startswith("linux"), reason="a real CMake build, on Linux")
def test_a_build_killed_with_sigkill_leaves_none_of_its_compilers_running(tmp_path):
    """A real CMake build whose target starts two 'compilers' (``sh -c "sleep & sleep"``), the
    process that runs it killed with SIGKILL: no handler of its runs, and both must still go."""
    source = tmp_path / "src"
    source.mkdir()
    pids = tmp_path / "compilers.pid"
    compile = _script(tmp_path / "compile.sh", f"sleep 300 &\necho $! >> {pids}\nsleep 300 &\necho $! >> {pids}\nwait\n")
    (source / "CMakeLists.txt").write_text(
        f"cmake_minimum_required(VERSION 3.10)\nproject(fake NONE)\nadd_custom_target(llama-server COMMAND sh {compile})\n"
    )
    repo = Path(__file__).resolve().parents[2]
    spectui_proc = subprocess.Popen(
        [sys.executable, "-c", _BUILDING, str(source), str(tmp_path / "build")],
        env={**os.environ, "PYTHONPATH": str(repo)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not pids.exists() or len(pids.read_text().split()) < 2):
        assert spectui_proc.poll() is None, "the build ended before its compilers started"
        time.sleep(0.05)
    compilers = [int(p) for p in pids.read_text().split()]
    assert len(compilers) == 2
    spectui_proc.kill()  # SIGKILL: no atexit, no signal handler, no finally
    spectui_proc.wait()
    try:
        for pid in compilers:
            assert _gone(pid), f"compiler {pid} outlived the build's SIGKILL-ed parent"
    finally:
        for pid in compilers:
            _cleanup(pid)


def test_a_build_step_starts_in_a_private_folder_whatever_the_working_folder(tmp_path, monkeypatch):
    """The step's working folder is spectui's private one, not where the user stands (a
    planted ``cmake``, ``nice`` or ``pip`` there is never what runs)."""
    monkeypatch.chdir(tmp_path)
    where = tmp_path / "cwd.txt"
    step = _script(tmp_path / "step.sh", f"pwd > {where}\n")
    run_logged([str(step)], tmp_path / "step.log", "step")
    ran_in = Path(where.read_text().strip())
    assert ran_in != tmp_path and ran_in.name.startswith("spectui-cwd-") and not any(ran_in.iterdir())
