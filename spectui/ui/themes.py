"""Themes from the top-level ``themes/`` folder (shipped inside the wheel too): one small TOML file per Textual ``Theme``.

A file holds ``Theme``'s fields (``name``, ``primary``, ..., ``dark``, optional
``[variables]``). Widgets use theme variables only, so a new file is a new look with no code.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from textual.theme import Theme

from spectui.paths import shipped_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, before it joined the standard library
    import tomli as tomllib

DEFAULT_THEME = "spectui-dark"
_FIELDS = {
    "name", "primary", "secondary", "warning", "error", "success", "accent", "foreground",
    "background", "surface", "panel", "boost", "dark", "luminosity_spread", "text_alpha", "variables",
}  # fmt: skip


def themes_dir() -> Path:
    """$SPECTUI_THEMES, else ./themes, else the shipped themes (``spectui.paths.shipped_dir``:
    the wheel's copy, or the checkout's top-level ``themes/``)."""
    env = os.environ.get("SPECTUI_THEMES")
    if env:
        return Path(env).expanduser()
    local = Path("themes")
    if local.is_dir():
        return local
    return shipped_dir("themes")


def load_theme(path: str | os.PathLike[str]) -> Theme:
    with open(path, "rb") as f:
        data = tomllib.load(f)
    unknown = set(data) - _FIELDS
    if unknown:
        raise ValueError(f"{path}: unknown theme fields {sorted(unknown)}")
    data.setdefault("name", Path(path).stem)
    return Theme(**data)


def load_themes(directory: str | os.PathLike[str] | None = None) -> list[Theme]:
    """Every readable theme file, sorted by name; a broken file is skipped, not fatal (the
    dashboard still has Textual's built-in themes)."""
    folder = Path(directory) if directory is not None else themes_dir()
    themes = []
    for path in sorted(folder.glob("*.toml")) if folder.is_dir() else ():
        try:
            themes.append(load_theme(path))
        except (OSError, ValueError, TypeError, tomllib.TOMLDecodeError):
            continue
    return themes


def register_themes(app) -> list[Theme]:  # noqa: ANN001 - a textual App
    """Register every theme file with ``app`` and select the default one; the themes loaded."""
    themes = load_themes()
    for theme in themes:
        app.register_theme(theme)
    if any(t.name == DEFAULT_THEME for t in themes):
        app.theme = DEFAULT_THEME
    return themes
