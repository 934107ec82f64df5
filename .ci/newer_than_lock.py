"""Which installed packages differ from the lock: ``python .ci/newer_than_lock.py constraints.txt``.

.ci/run's unlocked check prints this beside its result, so a break there comes with its likely
cause (the packages whose release is newer than the tested set). One line, comma-separated
``name locked -> installed``; nothing when the environment matches the lock.
"""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

from packaging.requirements import Requirement


def differences(lock: Path) -> list[str]:
    out = []
    for line in lock.read_text(encoding="utf-8").splitlines():
        spec = line.split("#", 1)[0].strip()
        if not spec:
            continue
        req = Requirement(spec)
        if req.marker is not None and not req.marker.evaluate():
            continue
        locked = next(iter(req.specifier)).version
        try:
            installed = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            continue  # an extra's package this environment does not install
        if installed != locked:
            out.append(f"{req.name} {locked} -> {installed}")
    return out


if __name__ == "__main__":
    print(", ".join(differences(Path(sys.argv[1]))))
