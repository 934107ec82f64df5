"""Every program spectui starts, started the one way: nothing the working folder holds is run.

A person runs spectui in whatever folder they are in: a cloned repository, a download folder,
``/tmp``. Python puts that folder first on ``sys.path`` for ``python -m`` (so a planted
``pip/__main__.py`` or ``mlx_lm/`` would run instead of the installed package), ``PYTHONPATH``
entries that are empty or relative name it too, and a ``PATH`` holding ``.`` or an empty entry
finds a planted ``cmake`` or ``nice`` there. So each child:

* starts in a private, empty working folder of this process (``private_cwd``: made 0700 under
  the system's temporary folder, removed at exit), never the user's; every path handed to it is
  made absolute first, by its caller;
* gets an environment whose ``PATH`` and ``PYTHONPATH`` keep only absolute entries
  (``clean_env``); the program itself is looked up on that ``PATH`` here, before the folder
  changes (``resolve``), so a relative name the user gave still means what it meant;
* is a Python child as ``python -I`` (``python_argv``): no script folder or working folder on
  ``sys.path``, no user site-packages, no ``PYTHON*`` variables.

``popen`` and ``run`` wrap ``subprocess`` with all three; ``spectui.runtime.lifetime`` (servers)
and ``spectui.runtime.cmake`` (builds) pass their own process-group and lifetime options
through ``popen``. Only the standard library and ``spectui.errors``: the lowest layers call it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from typing import Any

_CWD_LOCK = threading.Lock()
_cwd: str | None = None


def private_cwd() -> str:
    """An empty folder only this user can write, this process's own: where every child starts."""
    global _cwd
    with _CWD_LOCK:
        if _cwd is None or not os.path.isdir(_cwd):
            _cwd = tempfile.mkdtemp(prefix=f"spectui-cwd-{os.getpid()}-")  # mode 0700
            atexit.register(shutil.rmtree, _cwd, True)
        return _cwd


def absolute_entries(value: str) -> str:
    """A ``PATH``-like value without its empty or relative entries: those name a folder relative
    to wherever a process starts (an empty entry is the working folder itself)."""
    return os.pathsep.join(p for p in value.split(os.pathsep) if p and os.path.isabs(p))


def clean_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default this process's) with ``PATH`` and ``PYTHONPATH`` reduced to absolute
    entries (a variable left with none is removed)."""
    out = dict(os.environ if env is None else env)
    for name in ("PATH", "PYTHONPATH"):
        if name in out:
            kept = absolute_entries(out[name])
            if kept:
                out[name] = kept
            else:
                out.pop(name)
    return out


def python_argv(*args: str) -> list[str]:
    """This interpreter, isolated (``-I``), with ``args``: ``python_argv("-m", "pip", ...)``."""
    return [sys.executable, "-I", *args]


def resolve(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """``argv`` with its program made absolute: a path (``./bin/x``, ``bin/x``) against this
    process's working folder, a bare name on ``env``'s ``PATH`` (its absolute entries only).
    A bare name found nowhere is left as it is: the start fails with the usual error."""
    out = list(argv)
    if not out:
        return out
    program = out[0]
    if os.sep in program or (os.altsep and os.altsep in program):
        out[0] = os.path.abspath(program)
    else:
        found = shutil.which(program, path=absolute_entries(env.get("PATH", os.defpath)))
        if found:
            out[0] = os.path.abspath(found)
    return out


def isolated(argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None) -> tuple[list[str], dict[str, str], str]:
    """(argv, env, cwd) as every child gets them: the program resolved, the environment
    cleaned, the working folder ``cwd`` when the caller names one of its own (a private folder
    too), else ``private_cwd()``."""
    clean = clean_env(env)
    return resolve(argv, clean), clean, cwd or private_cwd()


def popen(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None, **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen`` of ``argv``, isolated (see ``isolated``)."""
    args, clean, folder = isolated(argv, env, cwd)
    return subprocess.Popen(args, env=clean, cwd=folder, **kwargs)


def run(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None, **kwargs: Any) -> subprocess.CompletedProcess:
    """``subprocess.run`` of ``argv``, isolated (see ``isolated``)."""
    args, clean, folder = isolated(argv, env, cwd)
    return subprocess.run(args, env=clean, cwd=folder, **kwargs)
