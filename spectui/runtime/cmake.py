"""Running CMake on llama.cpp's source: configure, compile targets, read the progress from
CMake's own lines, and say a failure in one line that names its log.

Shared by the runtime's llama-server build (``build.py``, ``linked.py``) and
``benchmarks/native_tools.py``, which builds llama.cpp's other programs from the same source.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil

from spectui.errors import SpectuiError
from spectui.runtime import lifetime
from spectui.subprocesses import clean_env, python_argv, resolve

#: ``progress(fraction 0..1, what is being done)``: a phase ("configuring (cmake)"), or a
#: compile step that starts with ``STEP`` ("compiling: server-context.cpp")
ProgressFn = Callable[[float, str], None]
STEP = "compiling: "
#: the share of the progress where compiling starts (download, unpack and configure before it)
COMPILE_START = 0.1


class BuildError(SpectuiError):
    """A binary not found, or a build that failed: one line naming its log."""


def default_jobs() -> int:
    return int(os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or 2)


def _nice() -> list[str]:
    # the build shares the machine with whatever the user runs (a measured decode among them)
    return ["nice", "-n", "10"] if shutil.which("nice") else []


def configure(source: Path, build: Path, flags: Sequence[str], *, progress: ProgressFn | None = None) -> None:
    """``cmake -S source -B build flags`` (its output in ``build/configure.log``)."""
    if shutil.which("cmake") is None:
        raise BuildError("cmake is not installed: it builds llama-server (or pass --llama-server PATH)")
    build.mkdir(parents=True, exist_ok=True)
    (progress or (lambda _f, _t: None))(0.05, "configuring (cmake)")
    run_logged([*_nice(), "cmake", "-S", str(source), "-B", str(build), *flags], build / "configure.log", "cmake configure")


def compile_targets(build: Path, targets: Sequence[str], *, progress: ProgressFn | None = None, jobs: int | None = None,
                    span: tuple[float, float] = (COMPILE_START, 1.0), log_mode: str = "w") -> None:
    """``cmake --build build --target targets``, niced, ``jobs`` at once (default
    ``$CMAKE_BUILD_PARALLEL_LEVEL``, else 2). CMake's own percentages are reported across
    ``span`` of the whole progress; the output goes to ``build/build.log`` (``log_mode`` "a"
    adds to it)."""
    say = progress or (lambda _f, _t: None)
    lo, hi = span
    cmd = [*_nice(), "cmake", "--build", str(build), "--target", *targets, "-j", str(jobs or default_jobs())]
    log_path = build / "build.log"
    with open(log_path, log_mode) as log:
        proc = start_group(cmd, stdout=subprocess.PIPE, text=True, errors="replace")
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                log.write(line)
                done = _build_fraction(line)
                if done is not None:
                    say(lo + (hi - lo) * done[0], f"{STEP}{done[1]}")
            rc = proc.wait()
        except BaseException:  # Ctrl-C, a closed terminal, a progress display that failed: the compilers go too
            end_group(proc)
            raise
        if rc:
            end_group(proc)  # whatever make left running must not race the next build's clean-up
    if rc:
        raise BuildError(f"cmake --build failed (exit {rc}): {_last_line(log_path)}; see {log_path}")


def cmake_build(source: Path, build: Path, targets: Sequence[str], flags: Sequence[str], *, progress: ProgressFn | None = None,
                jobs: int | None = None) -> None:
    """Configure ``source`` into ``build`` with ``flags`` and build ``targets`` with everything
    they depend on (``configure`` then ``compile_targets``)."""
    say = progress or (lambda _f, _t: None)
    jobs = jobs or default_jobs()
    configure(source, build, flags, progress=say)
    say(COMPILE_START, f"compiling {', '.join(targets)} ({jobs} jobs{', under nice' if _nice() else ''})")
    compile_targets(build, targets, progress=say, jobs=jobs)


#: ``[ 45%] Building ...`` (Makefiles) or ``[45/180] Building ...`` (Ninja)
_PERCENT = re.compile(r"^\[\s*(\d+)%\]\s*(.*)")
_FRACTION = re.compile(r"^\[(\d+)/(\d+)\]\s*(.*)")


def _build_fraction(line: str) -> tuple[float, str] | None:
    m = _PERCENT.match(line)
    if m:
        return int(m.group(1)) / 100, _short_step(m.group(2))
    m = _FRACTION.match(line)
    if m and int(m.group(2)):
        return int(m.group(1)) / int(m.group(2)), _short_step(m.group(3))
    return None


def _short_step(text: str) -> str:
    """``Building CXX object tools/server/CMakeFiles/.../server-context.cpp.o`` -> ``server-context.cpp``."""
    words = text.strip().split()
    name = os.path.basename(words[-1]) if words else ""
    return name[:-2] if name.endswith(".o") else name


def run_logged(cmd: list[str], log_path: Path, what: str) -> None:
    """Run ``cmd`` with its output in ``log_path``; a failure is one line naming the log."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        try:
            proc = start_group(cmd, stdout=log)
        except OSError as exc:
            raise BuildError(f"{what}: {exc}") from None
        try:
            rc = proc.wait()
        except BaseException:
            end_group(proc)
            raise
        if rc:
            end_group(proc)
    if rc:
        raise BuildError(f"{what} failed (exit {rc}): {_last_line(log_path)}; see {log_path}")


#: The build's guard, the first process of its group (``python -I -c GUARD spectui's-pid cmd...``).
#: PR_SET_PDEATHSIG reaches the one process it is set in, and make and the compilers are that
#: process's children: so the guard is that process, and on its parent's death (PDEATHSIG's
#: SIGTERM on Linux, else a ``getppid`` seen to change within half a second) it kills its whole
#: group, the compilers with it. It runs the command in its own group and exits with its status.
GUARD = r"""
import ctypes, os, signal, subprocess, sys
parent = int(sys.argv[1])
def end(*_):
    os.killpg(0, signal.SIGKILL)
signal.signal(signal.SIGTERM, end)
signal.signal(signal.SIGHUP, end)
if sys.platform.startswith("linux"):
    ctypes.CDLL(None).prctl(1, int(signal.SIGTERM), 0, 0, 0)
if os.getppid() != parent:
    end()
try:
    child = subprocess.Popen(sys.argv[2:])
except OSError as exc:
    print(f"cannot start {sys.argv[2]}: {exc.strerror or exc}", file=sys.stderr)
    sys.exit(127)
while True:
    try:
        rc = child.wait(timeout=0.5)
        break
    except subprocess.TimeoutExpired:
        if os.getppid() != parent:
            end()
sys.exit(rc if rc >= 0 else 128 - rc)
"""
#: How long ``end_group`` waits for a killed group's last process to be gone.
END_WAIT_S = 10.0


def start_group(cmd: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    """``cmd`` under the build's guard (``GUARD``), in a session of its own, its output with
    its errors: whatever it starts (make, the compilers, a linker) shares its process group,
    which ``end_group`` ends whole, and which dies with spectui however spectui ends, SIGKILL
    included (``spectui.runtime.lifetime`` starts it: forked by the one long-lived thread,
    killed at exit). A Ctrl-C in the terminal then reaches spectui alone, which ends the group
    itself. Started isolated (``spectui.subprocesses``): a private working folder."""
    stdout = kwargs.pop("stdout", None)
    argv = python_argv("-c", GUARD, str(os.getpid()), *resolve(cmd, clean_env()))
    return lifetime.spawn(argv, env=dict(os.environ), stdout=stdout, **kwargs)


def end_group(proc: subprocess.Popen) -> None:
    """Kill every process of ``proc``'s group, not only ``proc`` (killing cmake alone leaves make
    and its compilers running), reap ``proc``, and wait until no process of the group is left
    running, so the next build's clean-up races nothing."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: the group id is its pid
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait()
    wait_group_gone(proc.pid)


def group_running(pgid: int) -> list[int]:
    """The processes of group ``pgid`` still running (zombies waiting for their reaper are not)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []
    except PermissionError:
        pass
    out = []
    for p in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
    return out


def wait_group_gone(pgid: int, timeout_s: float = END_WAIT_S) -> None:
    """Kill and wait out whatever of group ``pgid`` still runs, for at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while group_running(pgid) and time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        time.sleep(0.05)


def _last_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    errors = [ln for ln in lines if "error" in ln.lower()]
    return (errors or lines or ["no output"])[-1][:300]
