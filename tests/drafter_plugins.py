"""Drafter plugins for the tests: docs/internals/drafters.md's example, read from the page, and
installed packages made from it the way pip leaves one (a module beside a
``NAME-VERSION.dist-info`` folder holding METADATA and entry_points.txt), with no network and
no pip."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # the oldest Python claimed
    import tomli as tomllib

PAGE = Path(REPO) / "docs" / "internals" / "drafters.md"


def doc_example() -> tuple[str, str, str]:
    """The page's one python block, and its entry point: (source, entry point name, "module:object")."""
    text = PAGE.read_text(encoding="utf-8")
    python = re.findall(r"```python\n(.*?)```", text, re.S)
    toml = re.findall(r"```toml\n(.*?)```", text, re.S)
    assert len(python) == 1 and len(toml) == 1, "the page holds one python block and one toml block"
    points = tomllib.loads(toml[0])["project"]["entry-points"]["spectui.drafters"]
    assert len(points) == 1, points
    ((name, value),) = points.items()
    return python[0], name, value


def install(folder: Path, source: str, name: str, value: str, *, dist: str = "spectui-recall") -> Path:
    """``source`` as an installed distribution in ``folder`` (the folder to put on the path)
    declaring the entry point ``name = value`` in the ``spectui.drafters`` group."""
    folder.mkdir(parents=True, exist_ok=True)
    module = value.split(":")[0]
    (folder / f"{module}.py").write_text(source, encoding="utf-8")
    info = folder / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[spectui.drafters]\n{name} = {value}\n", encoding="utf-8")
    return folder
