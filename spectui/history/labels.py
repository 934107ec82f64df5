"""The one label of a run: what the dashboard's header, its compare columns and the history's
groups all call it (``AR``, ``spec n-gram K=1..16 adaptive``, ``spec draft SmolLM2-360M.Q8_0
K=4``, ``spec n-gram, then draft SmolLM2-360M.Q8_0 K=4``, ``spec (drafting on the server)``).

It is built from the configuration the run recorded, through the labels ``spectui.config``
owns (``RunConfig.label``, ``DraftConfig.label``/``k_label``), adding only the draft model's
display name (``format.model_name``). It lives here, not in the UI, because the history index
labels each recording when it reads it, and history may not import the UI; the UI, above
history, imports it from here. Three places once spelled a run three ways (the compare column
said ``K=4`` for a cost-aware run whose header said ``K=1..16 adaptive``).
"""

from __future__ import annotations

from spectui.config import RunConfig
from spectui.format import model_name


def run_label(config: RunConfig, draft_path: str = "") -> str:
    """``config``'s run in a few words. ``draft_path``: the draft file the run loaded (its
    header's artifacts), named in place of the configuration's draft source when known."""
    if config.mode == "ar" or config.backend.name == "server" or not config.draft.has_model:
        return config.label()  # no draft model to name: config's own label says it all
    name = model_name(draft_path or config.draft.flag)
    return f"spec {config.draft.label(model=f'draft {name}')}"
