"""Drafters: what proposes the tokens a speculative block verifies, one file each (n-gram
lookup, suffix decoding, a draft model, a chain of a lookup in front of a draft model), and
the registry every caller reads.

A model-free drafter is registered as a ``DrafterKind``: its ``--draft`` name, its label and a
factory. From then on ``--draft NAME`` and ``--chain NAME`` accept it, the engine makes it
(``make_drafter``), ``spectui tune`` replays it over a greedy output, and the dashboard's
model picker lists it; nothing else needs editing (ARCHITECTURE.md, "Where new things go").
A draft model is not a registered kind: any other ``--draft`` value names one.

May import the loop (sampling, the shared-prefix rule) and ``protocol``; never the backends,
the host measurements or the engine front door.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spectui.config import MODEL_FREE, RunConfig
from spectui.errors import SpectuiError

if TYPE_CHECKING:
    from spectui.engine.drafters.suffix_memory import SuffixMemory
    from spectui.engine.protocol import Backend, Drafter

# The drafters themselves (and numpy with them) are imported when one is made, not here:
# the command line reads this registry for its flags, and `spectui --help` stays light.


@dataclass(frozen=True)
class DraftSources:
    """What a drafter may draw on for a run: its settings, the loaded draft model, the
    engine's long-lived memory of earlier outputs (None: this request only, as tune replays),
    and whether the run keeps a conversation's caches."""

    config: RunConfig
    draft_model: Backend | None = None
    memory: Callable[[], SuffixMemory] | None = None
    reuse: bool = False


@dataclass(frozen=True)
class DrafterKind:
    """A model-free drafter: proposing costs nothing, so its K is cost-aware by default, it
    may run in front of a draft model (``--chain``) and tune replays it exactly."""

    #: the ``--draft`` value, as recordings name the drafter (``DraftConfig.source``)
    name: str
    #: how reports and screens name it: ``n-gram``
    label: str
    #: a new drafter for one run
    make: Callable[[DraftSources], Drafter]
    #: one line for the model picker and ``--draft``'s help
    summary: str = ""


_KINDS: dict[str, DrafterKind] = {}


def register(kind: DrafterKind) -> DrafterKind:
    """Add (or replace) a model-free drafter; its name becomes a valid ``--draft`` everywhere."""
    if not kind.name or "/" in kind.name or kind.name.endswith(".gguf"):
        raise ValueError(f"a drafter's name is a plain word, not a path: {kind.name!r}")
    _KINDS[kind.name] = kind
    MODEL_FREE[kind.name] = kind.label  # the config layer's table: labels and validation
    return kind


def unregister(name: str) -> None:
    """Remove a drafter added with ``register`` (a plugin unloaded, a test's drafter)."""
    if _KINDS.pop(name, None) is not None:
        MODEL_FREE.pop(name, None)


def drafter_kind(name: str) -> DrafterKind:
    try:
        return _KINDS[name]
    except KeyError:
        raise SpectuiError(f"no drafter is called {name!r}; the model-free ones are {', '.join(_KINDS)}") from None


def drafter_kinds() -> list[DrafterKind]:
    return list(_KINDS.values())


def make_drafter(sources: DraftSources) -> Drafter | None:
    """The drafter a run's settings ask for (None for AR)."""
    config = sources.config
    d = config.draft
    if config.mode == "ar":
        return None
    if not d.has_model:
        return drafter_kind(d.source).make(sources)
    if sources.draft_model is None:
        raise SpectuiError("this engine was loaded without a draft model")
    from spectui.engine.drafters.chain import ChainDrafter
    from spectui.engine.drafters.model import ModelDrafter, draft_sampling

    model = ModelDrafter(sources.draft_model, draft_sampling(config.sampling, d), p_min=d.p_min, reuse=sources.reuse)
    return ChainDrafter(drafter_kind(d.chain).make(sources), model) if d.chain else model


def _ngram(sources: DraftSources) -> Drafter:
    from spectui.engine.drafters.ngram import NgramDrafter

    d = sources.config.draft
    return NgramDrafter(d.ngram_min, d.ngram_max)


def _suffix(sources: DraftSources) -> Drafter:
    from spectui.engine.drafters.suffix import SuffixDrafter

    memory = sources.memory if sources.config.draft.memory else None
    return SuffixDrafter(memory() if memory is not None else None)


register(DrafterKind("ngram", "n-gram", _ngram, "prompt lookup: copies what followed the last n tokens before"))
register(DrafterKind("suffix", "suffix", _suffix, "suffix decoding: the request and earlier outputs, by frequency"))
