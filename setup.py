"""One build step beyond pyproject.toml: ship the top-level prompts/ and themes/ in the wheel.

Those folders stay where the README puts them (a user reads and adds to them there) and are
the only copy in git. A wheel gets a copy under ``spectui/shipped/`` at build time, and
``spectui.paths.shipped_dir`` reads it when the package runs outside a checkout. An editable
install builds nothing here: it reads the checkout's folders directly. The sdist carries the
top-level folders (MANIFEST.in), so a wheel built from it gets the same copy.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
SHIPPED = ("prompts", "themes")


class BuildPyWithShipped(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in SHIPPED:
            source = ROOT / name
            if not source.is_dir():
                raise FileNotFoundError(f"{source}: the shipped {name} are missing from this source tree")
            target = Path(self.build_lib) / "spectui" / "shipped" / name
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(source, target, ignore=shutil.ignore_patterns(".*", "__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithShipped})
