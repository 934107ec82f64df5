"""The space ``spectui tune --workload`` searches: the runtime's own knobs, as each method
declares them beside its flags (``MethodInfo.space`` in ``spectui.runtime.methods``), so a new
method brings its space with it.

Which methods apply is the binary's and the models' to say: every ``--spec-type`` the binary
lists, the model drafters only with a draft of the architecture each needs (draft-mtp only
where the target has nextn layers), and chains of two of those at their defaults. A candidate
is a ``RuntimeMethod`` (its flags are the ones tune prints to paste); each method's runtime
default is a candidate too, so a tuned setting is always held against the method as shipped.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from spectui.config import RunConfig
from spectui.drafting import Runtime
from spectui.errors import SpectuiError
from spectui.runtime.methods import METHODS, RuntimeMethod


@dataclass(frozen=True)
class Candidate:
    """One runtime setting: its types (a comma list is a chain) and knobs (None: the runtime's)."""

    types: tuple[str, ...]
    k: int | None = None
    n_min: int | None = None
    p_min: float | None = None
    lookup: int | None = None

    @property
    def method(self) -> str:
        return ",".join(self.types)

    @property
    def is_default(self) -> bool:
        """The runtime's own setting of this method (every knob left to it)."""
        return self.k is None and self.n_min is None and self.p_min is None and self.lookup is None

    def runtime_method(self, draft_model: str | None = None) -> RuntimeMethod:
        wants_draft = any(METHODS[t].draft_model for t in self.types)
        return RuntimeMethod(types=self.types, k=self.k, n_min=self.n_min, p_min=self.p_min, lookup=self.lookup,
                             draft_model=draft_model if wants_draft else None)

    def label(self) -> str:
        """``ngram-mod n-max 16, n-min 2`` in the flags' own words; ``ngram-mod as shipped``."""
        if self.is_default:
            return f"{self.method} as shipped"
        words = []
        for knob, value in (("k", self.k), ("n_min", self.n_min), ("lookup", self.lookup), ("p_min", self.p_min)):
            if value is not None:
                words.append(f"{knob_word(self.types, knob)} {value:g}" if isinstance(value, float) else
                             f"{knob_word(self.types, knob)} {value}")
        return f"{self.method} {', '.join(words)}"

    def to_dict(self) -> dict[str, object]:
        return {"types": list(self.types), "k": self.k, "n_min": self.n_min, "p_min": self.p_min, "lookup": self.lookup}

    @classmethod
    def from_dict(cls, d: dict) -> Candidate:
        return cls(types=tuple(d["types"]), k=d.get("k"), n_min=d.get("n_min"), p_min=d.get("p_min"), lookup=d.get("lookup"))


def knob_word(types: Sequence[str], knob: str) -> str:
    """A knob in the words of the flag it sets on the first type that reads it (``n-max``)."""
    for t in types:
        info = METHODS[t]
        flag = {"k": info.k_flag, "n_min": info.n_min_flag, "p_min": info.p_min_flag, "lookup": info.lookup_flag}[knob]
        if flag:
            return "-".join(flag.split("-")[-2:])  # --spec-ngram-mod-n-max: n-max
    return knob


@dataclass(frozen=True)
class Applicable:
    """What decides which methods apply: the binary's ``--spec-type`` list and the models."""

    accepted: tuple[str, ...]  # the binary's types (empty: every known one)
    draft_arch: str = ""  # the draft model's architecture ("" = no draft model)
    nextn: bool = False  # the target has nextn (MTP) layers

    def applies(self, name: str) -> bool:
        info = METHODS[name]
        if name == "none" or (self.accepted and name not in self.accepted):
            return False
        if info.needs_nextn:
            return self.nextn
        if info.draft_model:
            return bool(self.draft_arch) and ("*" in info.draft_arch or self.draft_arch in info.draft_arch)
        return True


def method_space(name: str) -> list[Candidate]:
    """Every combination of the method's declared knobs (the runtime's default first)."""
    info = METHODS[name]
    knobs = [k for k, _ in info.space]
    out = []
    for values in itertools.product(*(v for _, v in info.space)):
        c = Candidate((name,), **dict(zip(knobs, values)))  # type: ignore[arg-type]  # the knob names are the fields
        if c.k is not None and c.n_min is not None and c.n_min > c.k:
            continue  # capped at K by the runtime: the same as n-min = K
        out.append(c)
    return sorted(set(out), key=lambda c: (not c.is_default, out.index(c)))


def build_space(where: Applicable, *, methods: Sequence[str] = (), chains: bool = True) -> list[Candidate]:
    """The space: each applicable method's own (``methods`` narrows to those) and chains of two
    applicable methods at their defaults, dealt in turn (every method's default, then each one's
    next setting, ...): a search whose budget ends during its first rung has tried every method,
    not the first few whole. A method named that does not apply is one line."""
    for m in methods:
        if m not in METHODS:
            raise SpectuiError(f"unknown llama-server method {m!r}: expected one of {', '.join(n for n in METHODS if n != 'none')}")
        if where.accepted and m not in where.accepted:
            raise SpectuiError(f"this llama-server does not accept --spec-type {m} (it lists {', '.join(where.accepted)})")
        if not where.applies(m):
            raise SpectuiError(f"{m} does not apply here: {_why_not(m)}")
    names = list(methods) or [n for n in METHODS if where.applies(n)]
    if not names:
        raise SpectuiError("no speculative method of this llama-server applies to this target")
    streams = [method_space(n) for n in names]
    if chains:
        streams.append([Candidate((a, b)) for a, b in itertools.combinations(names, 2)])
    return [c for turn in itertools.zip_longest(*streams) for c in turn if c is not None]


def _why_not(name: str) -> str:
    info = METHODS[name]
    if info.needs_nextn:
        return "the target has no nextn (multi-token-prediction) layers"
    if info.draft_model:
        arch = " or ".join(info.draft_arch) if "*" not in info.draft_arch else "the target's vocabulary"
        return f"it needs a draft model (--draft-model FILE.gguf) of {arch}"
    return "the binary does not list it"


def defaults_of(cands: Sequence[Candidate]) -> list[Candidate]:
    """The runtime's default of every single method among ``cands``, in their order."""
    return list(dict.fromkeys(Candidate((t,)) for c in cands for t in c.types if len(c.types) == 1))


def candidate_config(base: RunConfig, c: Candidate | None, draft_model: str = "") -> RunConfig:
    """The configuration one candidate runs with on the runtime (None: the runtime's AR)."""
    if c is None:
        draft = base.draft.drafting_with(Runtime(method="ngram-mod"))  # AR: inert, but a runtime's method is valid there
        return msgspec.structs.replace(base, mode="ar", draft=draft)
    c.runtime_method(draft_model or None).validate()
    draft = base.draft.drafting_with(Runtime(method=c.method), fixed_k=c.k, p_min=c.p_min or 0.0)
    assert isinstance(draft.drafter, Runtime)
    wants_draft = any(METHODS[t].draft_model for t in c.types)
    drafter = msgspec.structs.replace(draft.drafter, lookup=c.lookup or 0, n_min=-1 if c.n_min is None else c.n_min,
                                      draft_model=draft_model if wants_draft else "")
    config = msgspec.structs.replace(base, mode="spec", draft=msgspec.structs.replace(draft, drafter=drafter))
    config.validate()
    return config
