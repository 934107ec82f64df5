"""``--save-profile NAME``: the advised setting as ``[profile.NAME]`` in the user's own config
file (``spectui.profiles.USER_FILE`` in the config folder), never a project's ``spectui.toml``:
a tune measures one person's machine and traffic, and a project file is shared.

The keys are the long options ``spectui run``/``workload``/``serve`` take (``draft``, ``k``,
``n-min``, ``lookup``, ``p-min``, ``draft-model``), so ``--profile NAME`` runs what was tuned.
The table is appended; an existing profile of that name is refused (the caller checks first).
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from spectui.paths import config_dir
from spectui.profiles import USER_FILE, toml_value


def user_file() -> Path:
    return config_dir() / USER_FILE


def profile_text(name: str, candidate: dict | None, *, draft_model: str = "", target: str = "", why: str = "") -> str:
    """The TOML table (``candidate``: ``traffic_space.Candidate.to_dict()``; None: AR)."""
    keys: dict[str, object] = {"runtime": "llama-server"}
    if target:
        keys["target"] = target
    if candidate is None:
        keys["mode"] = "ar"
    else:
        types = list(candidate["types"])
        keys["draft"] = "runtime:" + ",".join(types)
        for key, field in (("k", "k"), ("n-min", "n_min"), ("lookup", "lookup"), ("p-min", "p_min")):
            if candidate.get(field) is not None:
                keys[key] = candidate[field]
        if draft_model and any(t.startswith("draft-") for t in types):
            keys["draft-model"] = draft_model
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# written by {why or 'spectui tune --workload'}, {stamp}", f"[profile.{name}]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in keys.items()]
    return "\n".join(lines) + "\n"


def save_profile(name: str, candidate: dict | None, *, draft_model: str = "", target: str = "", why: str = "") -> Path:
    """Append the profile to the user's file (created 0600 in a 0700 folder when missing)."""
    path = user_file()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    before = path.read_text(encoding="utf-8") if path.exists() else ""
    text = ("\n" if before and not before.endswith("\n\n") else "") + profile_text(
        name, candidate, draft_model=draft_model, target=target, why=why)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(text)
    return path
