"""Where spectui keeps things on disk: the one place that decides it.

* data (recordings, the history index): ``platformdirs.user_data_dir`` (Linux
  ``$XDG_DATA_HOME/spectui`` or ``~/.local/share/spectui``; macOS
  ``~/Library/Application Support/spectui``; Windows ``%LOCALAPPDATA%\\spectui``);
* cache (file fingerprints, verify-cost curves, tune results, the model catalogue, the
  suffix drafter's memory, requantized models): ``platformdirs.user_cache_dir`` (Linux
  ``$XDG_CACHE_HOME/spectui`` or ``~/.cache/spectui``; macOS ``~/Library/Caches/spectui``);
* config: ``platformdirs.user_config_dir`` (Linux ``$XDG_CONFIG_HOME/spectui`` or
  ``~/.config/spectui``; macOS ``~/Library/Application Support/spectui``): the user's
  ``config.toml`` of defaults and named profiles (``spectui.profiles``), which spectui reads
  and never writes;
* state: ``platformdirs.user_state_dir`` (Linux ``$XDG_STATE_HOME/spectui`` or
  ``~/.local/state/spectui``): what the dashboard remembers between sessions (its theme, K
  and mode), kept apart from the config a person writes;
* recordings: ``$SPECTUI_RECORDINGS`` when set, else ``recordings/`` under the data
  directory. A run from a checkout no longer writes into the repository's tracked
  ``recordings/`` samples: point ``SPECTUI_RECORDINGS`` (or ``--record``) there to do so;
* the shipped prompts and themes: the copies a wheel carries inside the package
  (``spectui/shipped/``, made at build time by ``setup.py`` from the top-level ``prompts/``
  and ``themes/``), else those top-level folders of the checkout this package runs from.

Nothing here creates a directory: whoever writes makes the folder it needs.
Near the bottom of the layers: imports only the standard library and platformdirs.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "spectui"
#: Set to a folder to put every recording there (the dashboard, headless runs, tune, sweep).
RECORDINGS_ENV = "SPECTUI_RECORDINGS"
_PACKAGE = Path(__file__).resolve().parent


def data_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP, appauthor=False))


def cache_dir() -> Path:
    return Path(platformdirs.user_cache_dir(APP, appauthor=False))


def config_dir() -> Path:
    return Path(platformdirs.user_config_dir(APP, appauthor=False))


def state_dir() -> Path:
    return Path(platformdirs.user_state_dir(APP, appauthor=False))


def dashboard_state_file() -> Path:
    """What the dashboard remembers between sessions (``spectui.ui.remembered``)."""
    return state_dir() / "dashboard.json"


def recordings_dir() -> Path:
    """``$SPECTUI_RECORDINGS``, else ``recordings/`` in the user data directory."""
    env = os.environ.get(RECORDINGS_ENV)
    if env:
        return Path(env).expanduser()
    return data_dir() / "recordings"


def shipped_dir(name: str) -> Path:
    """The shipped ``prompts`` or ``themes`` folder: the wheel's copy inside the package when
    there is one, else the checkout's top-level folder (an editable install, or a run from
    the source tree). Never ``site-packages/<name>``, which belongs to no one."""
    packaged = _PACKAGE / "shipped" / name
    if packaged.is_dir():
        return packaged
    return _PACKAGE.parent / name
