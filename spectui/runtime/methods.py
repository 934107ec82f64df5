"""llama-server's speculative methods (``--spec-type``), spectui's K and p-min mapped onto the
flags each one actually reads, and what cannot work refused before a server starts.

The vendored llama.cpp (its ``common/speculative.cpp`` and ``common/arg.cpp``) has one
draft length per family, not one for all:

* the model drafters (draft-simple, draft-eagle3, draft-mtp, draft-dflash, draft-dspark) read
  ``--spec-draft-n-max`` / ``-n-min`` / ``-p-min``; draft-mtp clamps n-max to its nextn layers
  when it chains several heads, draft-dflash/dspark to the draft's trained block size;
* ngram-simple, ngram-map-k and ngram-map-k4v draft their m-gram, ``--spec-ngram-<type>-size-m``
  (default 48), after a ``size-n`` key (default 12); ``--spec-draft-n-max`` is not read;
* ngram-mod reads ``--spec-ngram-mod-n-max`` / ``-n-min`` (defaults 64 / 48) after an
  ``n-match`` key (default 24); a draft that breaks off before n-min is dropped, so with its
  own n-min (48) and a K below it only full blocks of K are drafted, as they would be for a
  person who passes that n-max by hand: spectui leaves the runtime's n-min unless one is given
  (``describe`` says so), and a given one is capped at K, as for the model drafters;
* ngram-cache drafts 8 tokens, fixed in this revision (no flag).

Every method ignores what it does not read, and ``RuntimeMethod.ignored`` says so rather than
pass a flag that changes nothing. A comma list runs in llama.cpp's fixed priority (n-gram
types first, then the model drafters), whatever order it is written in.

Refused up front, in one line, from the GGUF headers (``spectui.models.gguf``): draft-mtp
without nextn layers in the target (``<arch>.nextn_predict_layers`` and the first nextn block's
``blk.{block_count - n}.nextn.eh_proj.weight``: the key alone is left by a conversion with
``--no-mtp``); draft-eagle3 / draft-dflash / draft-dspark without a draft of architecture
``eagle3`` / ``dflash``; a trained head given to another method than its own, or made for
a target of another shape (``spectui.models.heads``: hidden size, extract layers, width);
draft-simple without a draft or with a vocabulary llama.cpp would not
pair (``spectui.models.vocab``); a draft-dspark p-min on a draft without a confidence head; a
type the binary does not list in its ``--help``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from spectui.errors import SpectuiError
from spectui.models.gguf import GGUFInfo, read_gguf
from spectui.models.heads import head_of, misfit, wrong_method
from spectui.models.vocab import VocabFacts, draft_incompatibility

#: The ``--draft`` prefix that names a runtime's method (``--draft runtime:ngram-mod``).
PREFIX = "runtime:"


@dataclass(frozen=True)
class MethodInfo:
    """What one ``--spec-type`` reads."""

    name: str
    k_flag: str = ""  # the flag spectui's K maps onto ("" = none: K is not configurable)
    n_min_flag: str = ""
    p_min_flag: str = ""
    lookup_flag: str = ""  # the n-gram key length
    draft_arch: tuple[str, ...] = ()  # a draft model of one of these architectures is needed
    needs_nextn: bool = False
    fixed_k: int = 0  # a draft length the method fixes itself
    runtime_k: int = 0  # the runtime's default draft length, when K is not given
    #: what ``spectui tune --workload`` tries of this method: each knob (a ``RuntimeMethod``
    #: field: k, n_min, p_min, lookup) with its values, None being the runtime's own default
    space: tuple[tuple[str, tuple[float | int | None, ...]], ...] = ()

    @property
    def draft_model(self) -> bool:
        return bool(self.draft_arch)


#: The knobs tune tries per family, beside the runtime's defaults (None), spread over the range
#: where each was seen to matter: draft lengths well under the runtime's long n-gram blocks (a
#: rejected block of 48 costs more than it saves on short answers), keys shorter than its 12 and
#: 24 (more matches, more of them wrong), ngram-mod's n-min far under its 48 (which drafts
#: nothing on a short answer), and a draft model's n-max around its 3 with a confidence floor.
NGRAM_MAP_SPACE: tuple[tuple[str, tuple[float | int | None, ...]], ...] = (("k", (None, 8, 16)), ("lookup", (None, 4, 6, 8)))
NGRAM_MOD_SPACE: tuple[tuple[str, tuple[float | int | None, ...]], ...] = (
    ("k", (None, 16, 32)), ("n_min", (None, 2, 8)), ("lookup", (None, 8, 12, 16)))
DRAFT_SPACE: tuple[tuple[str, tuple[float | int | None, ...]], ...] = (("k", (None, 2, 5, 8)), ("p_min", (None, 0.5, 0.8)))


def _model_drafter(name: str, *, draft_arch: tuple[str, ...] = (), needs_nextn: bool = False) -> MethodInfo:
    return MethodInfo(name, k_flag="--spec-draft-n-max", n_min_flag="--spec-draft-n-min", p_min_flag="--spec-draft-p-min",
                      draft_arch=draft_arch, needs_nextn=needs_nextn, runtime_k=3, space=DRAFT_SPACE)


def _ngram_map(name: str) -> MethodInfo:
    return MethodInfo(name, k_flag=f"--spec-{name}-size-m", lookup_flag=f"--spec-{name}-size-n", runtime_k=48, space=NGRAM_MAP_SPACE)


#: Every ``--spec-type`` of llama.cpp 0c1e570 (the revision llama-cpp-python 0.3.36 vendors).
METHODS: dict[str, MethodInfo] = {
    m.name: m
    for m in (
        MethodInfo("none"),
        _model_drafter("draft-simple", draft_arch=("*",)),  # any architecture with the target's vocabulary
        _model_drafter("draft-eagle3", draft_arch=("eagle3",)),
        _model_drafter("draft-mtp", needs_nextn=True),  # the target's own nextn layers
        _model_drafter("draft-dflash", draft_arch=("dflash",)),
        _model_drafter("draft-dspark", draft_arch=("dflash",)),
        _ngram_map("ngram-simple"),
        _ngram_map("ngram-map-k"),
        _ngram_map("ngram-map-k4v"),
        MethodInfo("ngram-mod", k_flag="--spec-ngram-mod-n-max", n_min_flag="--spec-ngram-mod-n-min",
                   lookup_flag="--spec-ngram-mod-n-match", runtime_k=64, space=NGRAM_MOD_SPACE),
        MethodInfo("ngram-cache", fixed_k=8),
    )
}
#: ngram-mod's own n-min default (common/common.h)
NGRAM_MOD_N_MIN = 48
#: mlx_lm.server's one method (``spectui.runtime.mlx_lm_server``): named under llama-server, it
#: gets a line that says whose it is
MLX_LM_METHODS = ("draft-model",)


@dataclass(frozen=True)
class RuntimeMethod:
    """One server configuration's speculation: its types and spectui's settings for them.

    ``k``, ``n_min``, ``p_min``, ``lookup``: None leaves the runtime's default. ``draft_model``:
    the draft GGUF of the model drafters (``-md``)."""

    types: tuple[str, ...]
    k: int | None = None
    n_min: int | None = None
    p_min: float | None = None
    lookup: int | None = None
    draft_model: str | None = None

    @classmethod
    def parse(
        cls, text: str, *, k: int | None = None, n_min: int | None = None, p_min: float | None = None,
        lookup: int | None = None, draft_model: str | None = None,
    ) -> RuntimeMethod:
        """``ngram-mod``, ``runtime:draft-simple``, ``ngram-mod,draft-mtp``; unknown names are one line."""
        body = text[len(PREFIX):] if text.startswith(PREFIX) else text
        names = tuple(n.strip() for n in body.split(",") if n.strip())
        if not names:
            raise SpectuiError(f"no runtime method in {text!r}: expected one of {', '.join(METHODS)}")
        unknown = [n for n in names if n not in METHODS]
        if unknown and unknown[0] in MLX_LM_METHODS:
            raise SpectuiError(f"{unknown[0]} is mlx_lm.server's method (--runtime mlx-lm); llama-server drafts with a "
                               "draft model as draft-simple (--draft runtime:draft-simple --draft-model FILE.gguf)")
        if unknown:
            raise SpectuiError(f"unknown llama-server method {unknown[0]!r}: expected one of {', '.join(METHODS)} or a comma list")
        if "none" in names and len(names) > 1:
            raise SpectuiError("'none' cannot be combined with another method")
        method = cls(types=tuple(dict.fromkeys(names)), k=k, n_min=n_min, p_min=p_min, lookup=lookup, draft_model=draft_model)
        method.validate()
        return method

    @property
    def name(self) -> str:
        return ",".join(self.types)

    @property
    def speculative(self) -> bool:
        return self.types != ("none",)

    @property
    def infos(self) -> list[MethodInfo]:
        return [METHODS[t] for t in self.types]

    @property
    def uses_draft_model(self) -> bool:
        return any(i.draft_model for i in self.infos)

    def validate(self) -> None:
        if self.k is not None and self.k < 1:
            raise SpectuiError(f"K must be at least 1 (got {self.k})")
        if self.n_min is not None and self.n_min < 0:
            raise SpectuiError(f"the least draft length must be 0 or more (got {self.n_min})")
        if self.p_min is not None and not 0.0 <= self.p_min <= 1.0:
            raise SpectuiError(f"p-min must be between 0 and 1 (got {self.p_min:g})")
        if self.lookup is not None and not 1 <= self.lookup <= 1024:
            raise SpectuiError(f"the n-gram lookup length must be 1-1024 (got {self.lookup})")
        if self.draft_model and not self.uses_draft_model:
            raise SpectuiError(f"{self.name} takes no draft model (the draft drafters: draft-simple, draft-eagle3, draft-dflash, draft-dspark)")

    def args(self) -> list[str]:
        """llama-server's flags for this method (the model, threads and context are the launcher's)."""
        if not self.speculative:
            return []
        out = ["--spec-type", self.name]
        flags: dict[str, str] = {}
        for info in self.infos:
            if self.k is not None and info.k_flag:
                flags[info.k_flag] = str(self.k)
            if info.n_min_flag:
                n_min = self._n_min(info)
                if n_min is not None:
                    flags[info.n_min_flag] = str(n_min)
            if self.p_min is not None and info.p_min_flag:
                flags[info.p_min_flag] = f"{self.p_min:g}"
            if self.lookup is not None and info.lookup_flag:
                flags[info.lookup_flag] = str(self.lookup)
        for flag, value in flags.items():
            out += [flag, value]
        if self.draft_model:
            out += ["-md", self.draft_model]
        return out

    def _n_min(self, info: MethodInfo) -> int | None:
        """The least draft length to pass: None leaves the runtime's own; never above K."""
        if self.n_min is None:
            return None
        return min(self.n_min, self.k) if self.k is not None else self.n_min

    def ignored(self) -> list[str]:
        """The settings given that a type reads no flag for, one phrase each."""
        out = []
        for info in self.infos:
            if info.name == "none":
                given = [s for s, v in (("K", self.k), ("p-min", self.p_min), ("lookup length", self.lookup)) if v is not None]
                if given:
                    out.append(f"none (no speculation) ignores {', '.join(given)}")
                continue
            for setting, value, flag in (("K", self.k, info.k_flag), ("least draft length", self.n_min, info.n_min_flag),
                                         ("p-min", self.p_min, info.p_min_flag), ("lookup length", self.lookup, info.lookup_flag)):
                if value is not None and not flag:
                    why = f" (it drafts {info.fixed_k} tokens, fixed)" if setting == "K" and info.fixed_k else ""
                    out.append(f"{info.name} ignores {setting}{why}")
        return out

    def describe(self) -> str:
        """One line: what runs, with which draft length, and what is ignored."""
        if not self.speculative:
            return "none (autoregressive)"
        parts = []
        for info in self.infos:
            if info.fixed_k:
                parts.append(f"{info.name} ({info.fixed_k} tokens, fixed)")
            elif info.k_flag:
                k = self.k if self.k is not None else info.runtime_k
                part = f"{info.name} ({info.k_flag} {k}{'' if self.k is not None else ', its default'}"
                if info.name == "ngram-mod" and self.n_min is None and k <= NGRAM_MOD_N_MIN:
                    part += f"; its n-min {NGRAM_MOD_N_MIN}: only full blocks of {k}"
                parts.append(part + ")")
        line = ", ".join(parts)
        ignored = self.ignored()
        return line + (f"; {'; '.join(ignored)}" if ignored else "")

    # -- what cannot work -----------------------------------------------------------------

    def check(self, target: str, *, accepted: Sequence[str] = ()) -> None:
        """Refuse, in one line, what cannot work with ``target`` (and ``draft_model``), from
        their GGUF headers; ``accepted``: the binary's ``--spec-type`` values (empty: not checked)."""
        if accepted:
            missing = [t for t in self.types if t not in accepted]
            if missing:
                raise SpectuiError(f"this llama-server does not accept --spec-type {missing[0]} (it lists {', '.join(accepted)})")
        infos = self.infos
        if any(i.needs_nextn for i in infos):
            why = no_nextn_reason(read_gguf(target))
            if why:
                raise SpectuiError(f"draft-mtp needs multi-token-prediction (nextn) layers in the target: {why}")
        wants_draft = [i for i in infos if i.draft_model]
        if not wants_draft:
            return
        names = ", ".join(i.name for i in wants_draft)
        draft_path = self.draft_model
        if not draft_path:
            raise SpectuiError(f"{names} needs a draft model (--draft-model FILE.gguf)")
        draft = read_gguf(draft_path)
        head = head_of(draft)
        if head is not None:  # a trained head runs as one method, for targets of one shape
            for info in wants_draft:
                refusal = wrong_method(head, info.name)
                if refusal:
                    raise SpectuiError(refusal)
            refusal = misfit(head, read_gguf(target))
            if refusal:
                raise SpectuiError(f"{head.name} cannot draft for {os.path.basename(target)}: {refusal}")
        for info in wants_draft:
            if "*" not in info.draft_arch and draft.architecture not in info.draft_arch:
                raise SpectuiError(
                    f"{info.name} needs a draft of architecture {' or '.join(info.draft_arch)} made for the target; "
                    f"{os.path.basename(draft_path)} is {draft.architecture or 'of no architecture'}"
                )
        if any(i.name == "draft-dspark" for i in wants_draft) and (self.p_min or 0) > 0:
            if str(draft.metadata.get("dflash.has_confidence_head", "true")).lower() != "true":
                raise SpectuiError("draft-dspark with p-min needs a draft with a confidence head; this one has none (use p-min 0)")
        if any(i.name == "draft-simple" for i in wants_draft):
            mismatch = draft_incompatibility(
                VocabFacts.from_gguf(read_gguf(target).metadata), VocabFacts.from_gguf(draft.metadata),
                os.path.basename(target), os.path.basename(draft_path),
            )
            if mismatch:
                raise SpectuiError(f"{os.path.basename(draft_path)} cannot draft for {os.path.basename(target)}: {mismatch}")


def nextn_layers(info: GGUFInfo) -> int:
    """How many nextn (MTP) blocks the GGUF declares (``<arch>.nextn_predict_layers``)."""
    try:
        return int(info.metadata.get(f"{info.architecture}.nextn_predict_layers", 0) or 0)
    except (TypeError, ValueError):
        return 0


def no_nextn_reason(info: GGUFInfo) -> str:
    """Why llama.cpp would find no MTP head in this target, or "" when it has one."""
    name = os.path.basename(info.path)
    n = nextn_layers(info)
    if n <= 0:
        return f"{name} ({info.architecture or 'no architecture'}) declares none ({info.architecture}.nextn_predict_layers is absent or 0)"
    blocks = int(info.metadata.get(f"{info.architecture}.block_count", 0) or 0)
    probe = f"blk.{blocks - n}.nextn.eh_proj.weight"
    if probe not in info.tensor_shapes:
        return f"{name} declares {n} but holds no {probe} (converted without its MTP weights?)"
    return ""
