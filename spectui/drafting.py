"""How drafts are made, as typed data: which drafter (``Lookup | Model | Runtime``) and how
long its drafts are (``Fixed | CostAware | RuntimeDefault``), and what a run's plan measured to
price them (``Pricing``).

``DraftConfig`` is what a person asks for (the flags, a profile, the dashboard, a sweep's
point, tune's settings) and is recorded verbatim in every header; what the plan measures
before the first token (the verify-cost curve a cost-aware K starts from, a draft model's
price) is not asked for and lives beside it (``Header.pricing``, ``RunPlan.pricing``). The K
of each step is decided from these two in one place, ``spectui.engine.loop.draft_length``.

Near the bottom of the layers: imports only ``spectui.errors``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

import msgspec

from spectui.errors import SpectuiError

#: A draft longer than this is refused: verification of K+1 positions grows with K, and a
#: block of 64 already costs ~30 single-token forwards on a CPU.
MAX_DRAFT_LENGTH = 64
#: How reports name the built-in lookups, by their ``Lookup.name``, so that a recording reads
#: without the engine loaded (this module sits below it); a plugin's lookup is named by its
#: name. Which names are lookups at all is the engine's drafter registry's to say
#: (``spectui.engine.drafters.parse_drafter``, where a ``--draft`` string is read), never a
#: table here: tests/unit/test_drafter_plugins.py holds these labels equal to the registry's.
BUILT_IN_LABELS: Mapping[str, str] = MappingProxyType({"ngram": "n-gram", "suffix": "suffix"})
#: The ``--draft`` prefix that names a runtime's own method (``runtime:ngram-mod``): the
#: runtime spectui starts drafts (``spectui.runtime``), spectui's loop does not.
RUNTIME_PREFIX = "runtime:"
#: The fixed K a draft model drafts when none is asked for.
DEFAULT_K = 4
#: What a drafter kind's own option holds (``spectui.engine.drafters.options``)
OptionValue = int | float | bool | str

class Lookup(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="lookup"):
    """A model-free drafter from the registry (``ngram``, ``suffix``, a plugin's), asked
    for a continuation of text the request or earlier outputs already hold."""

    name: str = "ngram"
    #: the n-gram drafter's key lengths, longest tried first
    ngram_min: int = 1
    ngram_max: int = 4
    #: the suffix drafter remembers earlier outputs of the model across requests, in a file
    #: per vocabulary under the user cache dir (``--no-draft-memory``: this request's text only)
    memory: bool = True
    #: the options a plugin's drafter kind declares, as asked (``--draft-option KEY=VALUE``,
    #: parsed against the kind where the flags are read); one not set takes the kind's default
    #: when the drafter is made. The built-in kinds keep theirs in the fields above, which
    #: recordings held before kinds had options.
    options: dict[str, OptionValue] = {}


class Model(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="model"):
    """A draft model spectui loads and drafts with (a GGUF file, an MLX directory)."""

    path: str
    #: Draft confidence (llama.cpp's draft p-min): the draft stops at the first position where
    #: its most likely token's probability is below this. 0 = off. Decided before drawing,
    #: from the draft alone: greedy output and the sampled distribution are unchanged.
    p_min: float = 0.0
    #: Draft sampling temperature. None follows the target's sampling settings; a value makes
    #: the draft sample on its own, still exact because verification uses the draft's real
    #: proposal probabilities.
    temperature: float | None = None
    #: A lookup asked first, the model only at steps where no lookup match pays and the
    #: model's own cost is repaid (``--chain ngram``); None: the model alone.
    chain: Lookup | None = None


class Runtime(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="runtime"):
    """A method the runtime spectui starts drafts with itself (``runtime:ngram-mod``)."""

    method: str
    #: the method's draft GGUF (``--draft-model``: llama-server's ``-md``)
    draft_model: str = ""
    #: the n-gram methods' key length (``--lookup``); 0 = the runtime's default
    lookup: int = 0
    #: the draft confidence a method with a draft model takes (as ``Model.p_min``)
    p_min: float = 0.0
    #: the least draft length the method keeps (ngram-mod's ``-n-min``, a draft model's
    #: ``--spec-draft-n-min``); -1 = the runtime's default
    n_min: int = -1


Drafter = Lookup | Model | Runtime


class Fixed(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="fixed"):
    """Every block drafts ``k`` tokens."""

    k: int = DEFAULT_K


class CostAware(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="cost-aware"):
    """Each block's K is what pays at this step's prices, within ``k_min..k_max`` (0: no
    draft this step)."""

    k_min: int = 1
    k_max: int = 16
    #: Learn verify costs and proposal prices from the run's own timings. Off, blocks are
    #: priced by the plan's seed alone, so the blocks drafted (not only the output) repeat
    #: run to run: ``--deterministic`` turns it off.
    learn: bool = True
    #: how a proposal's chances are learned: "priced" (per proposal class and position group,
    #: ``engine/loop/draft_length.py``) or "learned" (per position, keyed by how long the copy
    #: has held too, ``engine/loop/learned_length.py``; ``--learned-k``, not the default: it
    #: does not win on the recorded traces, benchmarks/copy_bounds.py)
    rule: Literal["priced", "learned"] = "priced"


class RuntimeDefault(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="runtime-default"):
    """A runtime's method drafts as long as the runtime itself decides."""


Length = Fixed | CostAware | RuntimeDefault


class Pricing(msgspec.Struct, frozen=True, kw_only=True):
    """What a run's plan measured (or was handed) to price blocks with, before its first token.

    ``seed``: the verify-cost curve a cost-aware K starts from, the cost of evaluating n
    tokens at once in one-token evaluations for n = 1, 2, ... (``spectui tune`` measures it;
    a run takes its target's cached curve). Empty: the built-in cost model.
    ``draft_cost``: what one drafted token of a draft model costs in one-token target
    evaluations, until the run has timed its own draft forwards (0: not priced)."""

    seed: tuple[float, ...] = ()
    draft_cost: float = 0.0

    def validate(self) -> None:
        if not self.draft_cost >= 0.0:
            raise SpectuiError(f"a draft cost is >= 0 target tokens per drafted token, got {self.draft_cost}")
        if self.seed and (self.seed[0] != 1.0 or not all(c > 0 for c in self.seed)):
            raise SpectuiError("a verify-cost seed starts at 1.0 (one token) and holds positive costs")


class DraftConfig(msgspec.Struct, frozen=True, kw_only=True):
    """How drafts are made. The default is what ``spectui`` with no flags runs: n-gram lookup,
    its K cost-aware."""

    #: what proposes the tokens: a registered lookup, a draft model, or a runtime's own method
    drafter: Drafter = Lookup()
    #: how many it proposes a block: a fixed K, a cost-aware K within limits, or the runtime's own
    length: Length = CostAware()

    # -- what the drafter is ----------------------------------------------------------------

    @property
    def flag(self) -> str:
        """The ``--draft`` value naming the drafter: ``ngram``, a model's path, ``runtime:ngram-mod``."""
        d = self.drafter
        if isinstance(d, Lookup):
            return d.name
        return d.path if isinstance(d, Model) else RUNTIME_PREFIX + d.method

    @property
    def has_model(self) -> bool:
        """A draft model that spectui loads drafts (not a lookup, not a runtime's method)."""
        return isinstance(self.drafter, Model)

    @property
    def is_runtime(self) -> bool:
        """A runtime's own method drafts (``runtime:ngram-mod``), not spectui's loop."""
        return isinstance(self.drafter, Runtime)

    @property
    def runtime_method(self) -> str:
        """The runtime's method: ``ngram-mod`` ("" for spectui's drafters)."""
        return self.drafter.method if isinstance(self.drafter, Runtime) else ""

    @property
    def lookup_part(self) -> Lookup | None:
        """The lookup that drafts: the drafter itself, or a model's chain in front of it."""
        d = self.drafter
        return d if isinstance(d, Lookup) else d.chain if isinstance(d, Model) else None

    @property
    def chain(self) -> str:
        """The lookup chained in front of a draft model ("": none)."""
        return self.drafter.chain.name if isinstance(self.drafter, Model) and self.drafter.chain else ""

    @property
    def kind(self) -> str:
        """``ngram``, ``suffix`` (a lookup's name), ``model`` or ``runtime``, as recordings and telemetry name it."""
        d = self.drafter
        return d.name if isinstance(d, Lookup) else "model" if isinstance(d, Model) else "runtime"

    @property
    def drafter_label(self) -> str:
        """``n-gram``, ``suffix``, ``draft model``, ``n-gram, then draft model`` or a runtime's method."""
        if isinstance(self.drafter, Runtime):
            return self.drafter.method
        return lookup_label(self.drafter.name) if isinstance(self.drafter, Lookup) else self._chained("draft model")

    def _chained(self, model: str) -> str:
        """``model`` named after the lookup chained in front of it, where one is."""
        return f"{lookup_label(self.chain)}, then {model}" if self.chain else model

    # -- how long its drafts are ------------------------------------------------------------

    @property
    def cost_aware(self) -> bool:
        return isinstance(self.length, CostAware)

    @property
    def fixed_k(self) -> int | None:
        """The K every block drafts, where it is fixed (None: cost-aware, or the runtime's own)."""
        return self.length.k if isinstance(self.length, Fixed) else None

    @property
    def k_range(self) -> tuple[int, int]:
        """The smallest and largest K a block can draft (0, 0: the runtime decides)."""
        n = self.length
        return (n.k, n.k) if isinstance(n, Fixed) else (n.k_min, n.k_max) if isinstance(n, CostAware) else (0, 0)

    @property
    def priced_range(self) -> tuple[int, int]:
        """The Ks a run's blocks are judged over (which K would have paid best): a cost-aware
        K's limits, else the default ones (a fixed K's run is judged against every K it could
        have drafted)."""
        limits = self.length if isinstance(self.length, CostAware) else CostAware()
        return limits.k_min, limits.k_max

    def k_label(self) -> str:
        """``K=4``, ``K=1..16 adaptive`` or ``K=runtime default``."""
        n = self.length
        if isinstance(n, Fixed):
            return f"K={n.k}"
        return f"K={n.k_min}..{n.k_max} adaptive" if isinstance(n, CostAware) else "K=runtime default"

    def label(self, *, model: str = "draft model") -> str:
        """``n-gram K=4`` or ``draft model K=4``; ``model`` names a draft model (its file, say)."""
        return f"{self._chained(model) if self.has_model else self.drafter_label} {self.k_label()}"

    # -- the one rule for changing them -----------------------------------------------------

    def drafting_with(
        self, drafter: Drafter, *, fixed_k: int | None = None, cost_aware: bool | None = None, p_min: float | None = None,
        chain: str | None = None,
    ) -> DraftConfig:
        """These settings with ``drafter`` drafting (a ``--draft`` string is read into one where
        it is typed, ``spectui.engine.drafters.parse_drafter``): the one rule for every
        caller (the flags, the dashboard's model picker, sweeps, tune). A lookup costs nothing
        to ask, so unless a K is fixed its K is cost-aware (a fixed K=4 halves the speed of prose
        on a CPU); a draft model keeps a fixed K unless the cost-aware one is asked for (None:
        as these settings chose for a draft model); a runtime's method with no K drafts as the
        runtime decides. ``p_min`` None keeps theirs; ``chain`` None keeps a model's chain
        (the lookup settings carry over as they are, into or out of a chain; a kind's own
        ``options`` only while the kind stays: another kind declares others). Of ``drafter``
        only what names it is read (a lookup's name, a model's path, a runtime's method): the
        settings are these ones."""
        lookup = self.lookup_part or Lookup()
        old_p_min = self.drafter.p_min if isinstance(self.drafter, Model | Runtime) else 0.0
        p_min = old_p_min if p_min is None else p_min
        if isinstance(drafter, Lookup):
            drafter = _renamed(lookup, drafter.name)
        elif isinstance(drafter, Model):
            keep = self.drafter if isinstance(self.drafter, Model) else None
            chain = (keep.chain.name if keep is not None and keep.chain else "") if chain is None else chain
            drafter = Model(path=drafter.path, p_min=p_min, temperature=keep.temperature if keep else None,
                            chain=_renamed(lookup, chain) if chain else None)
        else:
            keep_rt = self.drafter if isinstance(self.drafter, Runtime) else Runtime(method="")
            drafter = msgspec.structs.replace(keep_rt, method=drafter.method, p_min=p_min)
        if cost_aware is None:
            cost_aware = self.cost_aware and self.has_model
        limits = self.length if isinstance(self.length, CostAware) else CostAware()
        length: Length
        if fixed_k is not None:
            length = Fixed(k=fixed_k)
        elif isinstance(drafter, Runtime):
            length = RuntimeDefault()
        elif cost_aware or isinstance(drafter, Lookup) or drafter.chain is not None:
            length = limits
        else:
            length = Fixed()
        return DraftConfig(drafter=drafter, length=length)

    def with_length(self, length: Length) -> DraftConfig:
        return msgspec.structs.replace(self, length=length)

    def stepped(self, delta: int) -> DraftConfig:
        """K moved by ``delta`` (the dashboard's ``+``/``-``), as K means in this mode: a fixed K
        within 1..MAX_DRAFT_LENGTH; a cost-aware K's limit (``k_max``) within k-min..MAX_DRAFT_LENGTH
        (the run chooses every K itself, so the limit is the one setting of it a person moves);
        a runtime's own K is the runtime's, unchanged."""
        n = self.length
        if isinstance(n, CostAware):
            return self.with_length(msgspec.structs.replace(n, k_max=min(MAX_DRAFT_LENGTH, max(n.k_min, n.k_max + delta))))
        if isinstance(n, Fixed):
            return self.with_length(Fixed(k=min(MAX_DRAFT_LENGTH, max(1, n.k + delta))))
        return self

    def learning(self, learn: bool) -> DraftConfig:
        """A cost-aware K that learns from its own timings or not (``--deterministic``, tune's replays)."""
        if not isinstance(self.length, CostAware):
            return self
        return self.with_length(msgspec.structs.replace(self.length, learn=learn))

    def replayable(self) -> DraftConfig:
        """These settings as ``spectui tune`` replays them: a suffix drafter without its memory
        of earlier outputs (a replay must see only the prompt and the output it replays)."""
        d = self.drafter
        if isinstance(d, Lookup):
            return msgspec.structs.replace(self, drafter=msgspec.structs.replace(d, memory=False))
        if isinstance(d, Model) and d.chain is not None:
            chain = msgspec.structs.replace(d.chain, memory=False)
            return msgspec.structs.replace(self, drafter=msgspec.structs.replace(d, chain=chain))
        return self

    def validate(self) -> None:
        n, d = self.length, self.drafter
        ks = (("k", n.k),) if isinstance(n, Fixed) else (("k-min", n.k_min), ("k-max", n.k_max)) if isinstance(n, CostAware) else ()
        for name, value in ks:
            if not 1 <= value <= MAX_DRAFT_LENGTH:
                raise SpectuiError(f"draft length {name} must be between 1 and {MAX_DRAFT_LENGTH}, got {value}")
        if isinstance(n, CostAware) and n.k_min > n.k_max:
            raise SpectuiError(f"a cost-aware draft length needs k-min <= k-max, got {n.k_min} > {n.k_max}")
        if isinstance(n, RuntimeDefault) and not isinstance(d, Runtime):
            raise SpectuiError(f"only a runtime's method drafts as long as the runtime decides; --draft {self.flag} takes --k or a cost-aware K")
        if isinstance(n, CostAware) and isinstance(d, Runtime):
            raise SpectuiError(f"a runtime's method drafts with a fixed --k or the runtime's own K, "
                               f"not spectui's cost-aware one (--draft {self.flag})")
        lookup = self.lookup_part
        if lookup is not None and not 1 <= lookup.ngram_min <= lookup.ngram_max <= 16:
            raise SpectuiError(f"n-gram sizes need 1 <= min <= max <= 16, got {lookup.ngram_min}..{lookup.ngram_max}")
        if isinstance(d, Model) and d.temperature is not None and not d.temperature >= 0.0:
            raise SpectuiError(f"draft temperature must be >= 0, got {d.temperature}")
        if isinstance(d, Model | Runtime) and not 0.0 <= d.p_min < 1.0:
            raise SpectuiError(f"draft p-min must be in [0, 1), got {d.p_min}")
        if isinstance(d, Runtime) and d.lookup < 0:
            raise SpectuiError(f"--lookup must be >= 1 (0: the runtime's default), got {d.lookup}")


def lookup_label(name: str) -> str:
    """How reports name the lookup ``name``: ``n-gram`` for ``ngram``, a plugin's by its name."""
    return BUILT_IN_LABELS.get(name, name)


def _renamed(lookup: Lookup, name: str) -> Lookup:
    """``lookup``'s settings for the kind ``name``: its options belong to its own kind alone
    (another kind declares others), the built-ins' fields carry over."""
    return msgspec.structs.replace(lookup, name=name, options=lookup.options if name == lookup.name else {})


def migrate_config(config: object) -> dict[str, object] | None:
    """A ``RunConfig`` map written before 2.0 (a recording's header, a sweep's manifest),
    its ``draft`` typed in place; returns the ``Pricing`` map it held (None: nothing to migrate,
    not a map or already typed)."""
    if not isinstance(config, dict):
        return None
    draft = config.get("draft")
    if isinstance(draft, dict) and "drafter" in draft:
        return None
    config["draft"], pricing = migrate_v1(draft)
    return pricing


def migrate_v1(draft: object) -> tuple[dict[str, object], dict[str, object]]:
    """A 1.x recording's (or sweep manifest's) ``config.draft`` map, as the typed
    ``DraftConfig`` reads it, and the ``Pricing`` it held: before 2.0 one flat struct named the
    drafter with a string (``source``), said ``adaptive`` beside a ``k`` it then ignored, and
    carried what the plan measured (``cost_seed``, ``draft_cost``). Missing keys take 1.x's
    defaults (a fixed K=4 n-gram drafter)."""
    old: dict[str, object] = dict(draft) if isinstance(draft, dict) else {}

    def get(key: str, default: object) -> object:
        value = old.get(key, default)
        return default if value is None and default is not None else value

    source, adaptive = str(get("source", "ngram")), bool(get("adaptive", False))
    lookup = {"kind": "lookup", "ngram_min": get("ngram_min", 1), "ngram_max": get("ngram_max", 4), "memory": get("memory", True)}
    drafter: dict[str, object]
    if source.startswith(RUNTIME_PREFIX):
        drafter = {"kind": "runtime", "method": source.removeprefix(RUNTIME_PREFIX), "draft_model": get("draft_model", ""),
                   "lookup": get("lookup", 0), "p_min": get("p_min", 0.0)}
    elif source in BUILT_IN_LABELS:  # 1.x knew no plugins
        drafter = {**lookup, "name": source}
    else:
        chain = str(get("chain", "") or "")
        drafter = {"kind": "model", "path": source, "p_min": get("p_min", 0.0), "temperature": old.get("temperature"),
                   "chain": {**lookup, "name": chain} if chain else None}
    length: dict[str, object]
    if adaptive and drafter["kind"] == "runtime":
        length = {"kind": "runtime-default"}
    elif adaptive:
        length = {"kind": "cost-aware", "k_min": get("k_min", 1), "k_max": get("k_max", 16), "learn": get("learn_cost", True)}
    else:
        length = {"kind": "fixed", "k": get("k", DEFAULT_K)}
    seed = old.get("cost_seed")
    pricing = {"seed": list(seed) if isinstance(seed, list | tuple) else [], "draft_cost": get("draft_cost", 0.0)}
    return {"drafter": drafter, "length": length}, pricing
