"""Drafters: what proposes the tokens a speculative block verifies, one file each (n-gram
lookup, suffix decoding, a draft model, a chain of a lookup in front of a draft model), and
the registry every caller reads.

A model-free drafter is registered as a ``DrafterKind``: its ``--draft`` name, its label, a
factory, the options it takes (``--draft-option KEY=VALUE``, ``options.py``) and, where it
learns across requests, a factory of the state the engine keeps for it. From then on
``--draft NAME`` and ``--chain NAME`` accept it, the engine makes it (``make_drafter``),
``spectui tune`` replays it over a greedy output, and the dashboard's model picker lists it;
nothing else needs editing (ARCHITECTURE.md, "Where new things go").
A draft model is not a registered kind: any other ``--draft`` value names one.

A drafter of another package registers through the ``spectui.drafters`` entry point group
(``NAME = "module:object"``, the object a ``DrafterKind`` called NAME): it is imported the
first time a name that no registered drafter has is asked for, and a broken one (it does not
import, is no ``DrafterKind``, makes no ``Drafter``, takes a built-in's name) is refused in one
line (``SpectuiError``). docs/internals/drafters.md shows one.

May import the loop (sampling, the shared-prefix rule) and ``protocol``; never the backends,
the host measurements or the engine front door.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spectui.config import RunConfig
from spectui.drafting import RUNTIME_PREFIX, DraftConfig, Lookup, Model, OptionValue, Runtime
from spectui.engine.drafters.options import DrafterOption, resolve
from spectui.errors import SpectuiError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from spectui.engine.drafters.suffix_memory import SuffixMemory
    from spectui.engine.protocol import Backend, Drafter

# The drafters themselves (and numpy with them) are imported when one is made, not here:
# the command line reads this registry for its flags, and `spectui --help` stays light.


@dataclass(frozen=True)
class DraftSources:
    """What a drafter may draw on for a run: its settings, the loaded draft model, the
    engine's long-lived memory of earlier outputs (None: this request only, as tune replays),
    whether the run keeps a conversation's caches, and the engine's state for each kind."""

    config: RunConfig
    draft_model: Backend | None = None
    memory: Callable[[], SuffixMemory] | None = None
    reuse: bool = False
    #: the state the engine keeps for a kind across its requests, made on first use
    #: (``Engine.drafter_state``); None: no engine (tune's replays, the plugin check)
    states: Callable[[DrafterKind], Any] | None = None
    #: the kind being made (``make_lookup`` sets it); None: the one the run's lookup names
    kind: DrafterKind | None = None

    @property
    def lookup(self) -> Lookup:
        """The settings of the lookup being made: the run's drafter, or its chain's (defaults
        for the n-gram lookup the fallback policy puts behind a draft model)."""
        return self.config.draft.lookup_part or Lookup()

    @property
    def options(self) -> Mapping[str, OptionValue]:
        """The options the kind being made declares, valued as the run asks or by default."""
        kind = self._kind()
        return resolve(kind.name, kind.options, self.lookup)

    @property
    def state(self) -> Any:
        """What the kind's ``state`` hook made for this engine, the one object every drafter of
        the kind it makes shares; None where the kind keeps none or no engine makes the drafter
        (a drafter then remembers this request only)."""
        kind = self._kind()
        return self.states(kind) if self.states is not None and kind.state is not None else None

    def _kind(self) -> DrafterKind:
        return self.kind if self.kind is not None else drafter_kind(self.lookup.name)


@dataclass(frozen=True)
class DrafterKind:
    """A model-free drafter: proposing costs nothing, so its K is cost-aware by default, it
    may run in front of a draft model (``--chain``) and tune replays it exactly."""

    #: the ``--draft`` value, as recordings name the drafter (``Lookup.name``)
    name: str
    #: how reports and screens name it: ``n-gram``
    label: str
    #: a new drafter for one run
    make: Callable[[DraftSources], Drafter]
    #: one line for the model picker and ``--draft``'s help
    summary: str = ""
    #: the settings it takes: ``--draft-option NAME=VALUE``; the factory reads them resolved
    #: (``DraftSources.options``)
    options: tuple[DrafterOption, ...] = ()
    #: a factory of what it keeps across requests (a memory of earlier outputs): the engine
    #: calls it once, on first use, hands the object to every drafter of this kind it makes
    #: (``DraftSources.state``) and closes it, where it has a ``close``, as the engine closes
    state: Callable[[], Any] | None = None

    def __post_init__(self) -> None:
        names = [o.name for o in self.options]
        if len(set(names)) != len(names):
            raise ValueError(f"the drafter {self.name!r} declares an option twice: {', '.join(names)}")


_KINDS: dict[str, DrafterKind] = {}


def register(kind: DrafterKind) -> DrafterKind:
    """Add (or replace) a model-free drafter; its name becomes a valid ``--draft`` everywhere."""
    if not kind.name or "/" in kind.name or kind.name.endswith(".gguf"):
        raise ValueError(f"a drafter's name is a plain word, not a path: {kind.name!r}")
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a drafter added with ``register`` (a plugin unloaded, a test's drafter)."""
    _KINDS.pop(name, None)


def drafter_kind(name: str) -> DrafterKind:
    kind = find_drafter(name)
    if kind is None:
        raise SpectuiError(f"no drafter is called {name!r}; the model-free ones are {', '.join(_KINDS)}")
    return kind


def find_drafter(name: str) -> DrafterKind | None:
    """The model-free drafter called ``name``: a registered one, else an installed package's
    (``ENTRY_POINT_GROUP``), loaded and registered now; None where neither has the name."""
    kind = _KINDS.get(name)
    if kind is not None or not name or "/" in name or name.endswith(".gguf"):
        return kind  # a path is a draft model: no package metadata is read for it
    return load_plugin(name)


def parse_drafter(flag: str) -> Lookup | Model | Runtime:
    """The drafter a ``--draft`` (or picker, or sweep point) string names, read once where it
    arrives: ``runtime:METHOD`` a runtime's method, a registered (or installed plugin's)
    drafter's name a lookup, anything else a draft model's path."""
    if flag.startswith(RUNTIME_PREFIX):
        return Runtime(method=flag.removeprefix(RUNTIME_PREFIX))
    return Lookup(name=flag) if find_drafter(flag) is not None else Model(path=flag)


def drafter_kinds() -> list[DrafterKind]:
    """The registered drafters: the built-in ones and the plugins loaded so far."""
    return list(_KINDS.values())


#: the entry point group where another package declares its drafters: ``NAME = "module:object"``
ENTRY_POINT_GROUP = "spectui.drafters"


def load_plugin(name: str) -> DrafterKind | None:
    """Load and register the ``ENTRY_POINT_GROUP`` entry point called ``name`` (None: no installed
    package declares one). Anything wrong with it is one ``SpectuiError`` line, never a traceback."""
    from importlib.metadata import entry_points

    points = list(entry_points(group=ENTRY_POINT_GROUP, name=name))
    if not points:
        return None
    where = ", ".join(_origin(p) for p in points)
    if len(points) > 1:
        raise SpectuiError(f"two drafter plugins are called {name!r} ({where}): uninstall one")
    if name in _BUILT_IN:
        raise SpectuiError(f"the drafter plugin {name!r} ({where}) takes a built-in drafter's name: rename its entry point")
    try:
        found: Any = points[0].load()
    except Exception as exc:  # noqa: BLE001 - whatever a plugin's import raises, the user sees one line
        raise SpectuiError(f"the drafter plugin {name!r} ({where}) does not load: {type(exc).__name__}: {exc}") from None
    if not isinstance(found, DrafterKind):
        raise SpectuiError(f"the drafter plugin {name!r} ({where}) is a {type(found).__name__}, not a "
                           "spectui.engine.drafters.DrafterKind (docs/internals/drafters.md)")
    if found.name != name:
        raise SpectuiError(f"the drafter plugin {name!r} ({where}) makes a drafter called {found.name!r}: the two names must agree")
    _check(found, where)
    return register(found)


def _origin(point: EntryPoint) -> str:
    """``package 0.1: module:object``, how a line names a plugin."""
    dist = point.dist
    return f"{dist.name} {dist.version}: {point.value}" if dist is not None else point.value


def _check(kind: DrafterKind, where: str) -> None:
    """Make one drafter of ``kind`` with the default settings and hold it to the ``Drafter``
    protocol, so that a plugin that breaks it is refused here, before any model loads, not
    by an AttributeError in the middle of a run."""
    from spectui.engine.protocol import Drafter

    try:
        drafter = make_lookup(kind, DraftSources(RunConfig()))
    except Exception as exc:  # noqa: BLE001 - a plugin's factory failing is its one line too
        raise SpectuiError(f"the drafter plugin {kind.name!r} ({where}) cannot make a drafter: {type(exc).__name__}: {exc}") from None
    members = [m for m in vars(Drafter) if not m.startswith("_")] + list(Drafter.__annotations__)
    missing = sorted({m for m in members if not hasattr(drafter, m)})
    if "close" not in missing:
        with contextlib.suppress(Exception):  # the check's drafter is thrown away; its close is no verdict
            drafter.close()
    if missing or not isinstance(drafter, Drafter):
        raise SpectuiError(f"the drafter plugin {kind.name!r} ({where}) makes a {type(drafter).__name__}, which is no "
                           f"Drafter: it lacks {', '.join(missing)} (subclass spectui.engine.protocol.DrafterBase)")


def make_drafter(sources: DraftSources) -> Drafter | None:
    """The drafter a run's settings ask for (None for AR)."""
    config = sources.config
    d = config.draft
    if config.mode == "ar":
        return None
    if isinstance(d.drafter, Lookup):
        return make_lookup(drafter_kind(d.drafter.name), sources)
    if not isinstance(d.drafter, Model):
        raise SpectuiError(f"--draft {d.flag} is a runtime's own method: spectui's loop does not draft with it")
    if sources.draft_model is None:
        raise SpectuiError("this engine was loaded without a draft model")
    from spectui.engine.drafters.chain import ChainDrafter
    from spectui.engine.drafters.model import ModelDrafter, draft_sampling

    m = d.drafter
    model = ModelDrafter(sources.draft_model, draft_sampling(config.sampling, m), p_min=m.p_min, reuse=sources.reuse)
    return ChainDrafter(make_lookup(drafter_kind(m.chain.name), sources), model) if m.chain is not None else model


def make_lookup(kind: DrafterKind, sources: DraftSources) -> Drafter:
    """A drafter of ``kind``, its factory reading ``kind``'s options and state from ``sources``."""
    return kind.make(dataclasses.replace(sources, kind=kind))


def check_options(draft: DraftConfig) -> None:
    """Refuse, in one line, options the lookup of ``draft`` holds that its kind does not take
    (a recording, a profile or a dashboard's settings: the flags were checked as parsed)."""
    lookup = draft.lookup_part
    if lookup is not None:
        kind = drafter_kind(lookup.name)
        resolve(kind.name, kind.options, lookup)


def _ngram(sources: DraftSources) -> Drafter:
    from spectui.engine.drafters.ngram import NgramDrafter

    options = sources.options
    return NgramDrafter(int(options["ngram-min"]), int(options["ngram-max"]))


def _suffix(sources: DraftSources) -> Drafter:
    from spectui.engine.drafters.suffix import SuffixDrafter

    # its memory is the engine's, opened per vocabulary (``Engine.suffix_memory``), not a
    # ``state`` hook's: the hook knows no vocabulary, and a memory is kept per vocabulary
    memory = sources.memory if sources.options["memory"] else None
    return SuffixDrafter(memory() if memory is not None else None)


def _ngram_size(field: str, help: str) -> DrafterOption:
    return DrafterOption(field.replace("_", "-"), int, getattr(Lookup(), field), help, min=1, max=16, field=field)


register(DrafterKind("ngram", "n-gram", _ngram, "prompt lookup: copies what followed the last n tokens before", options=(
    _ngram_size("ngram_min", "the fewest recent tokens looked up (as --ngram-min)"),
    _ngram_size("ngram_max", "the most recent tokens looked up (as --ngram-max)"),
)))
register(DrafterKind("suffix", "suffix", _suffix, "suffix decoding: the request and earlier outputs, by frequency", options=(
    DrafterOption("memory", bool, Lookup().memory, "remember earlier outputs across requests (off: --no-draft-memory)",
                  field="memory"),
)))
#: the names a plugin may not take: a plugin adds a drafter, it never replaces one
_BUILT_IN = frozenset(_KINDS)
