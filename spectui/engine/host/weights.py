"""Weight types measured on this machine, and the one the embedded default runs in.

On a CPU the weight format decides whether verifying a block of tokens is cheap (ggml batches
some types' rows, and which ones depends on the instruction set: ARCHITECTURE.md, "Weight
types"), so a speculative default is only as good as the format it verifies in. The probe
requantizes a model with llama.cpp's quantize API to each type (``engine.quantize``, cached)
and measures each copy's verify-cost curve here.

``spectui tune --weights`` runs the full probe and reports it. The embedded default
(SmolLM2-135M, shipped as Q4_1) runs in the type the probe chose for this machine: the choice
is stored per host and settings (``embedded-weights.json`` in the user cache), made by
``tune --weights`` or, on the first run that needs it, by a shorter probe of the same kind.
``SPECTUI_EMBEDDED_WEIGHTS`` overrides it: ``shipped`` (the file as shipped), a type such as
``Q8_0``, or ``auto`` (the default). ``--target PATH`` always runs exactly that file.
"""

from __future__ import annotations

import datetime as dt
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from spectui import storage
from spectui.config import BackendConfig
from spectui.engine.backends.llamacpp import LlamaCppBackend, default_threads
from spectui.engine.host.quantize import PROBE_TYPES, cached_copy, copy_path, ftype
from spectui.engine.host.verify_cost import CURVE_SIZES, Curve, measure_curve
from spectui.errors import SpectuiError
from spectui.format import EMBEDDED_MODEL_ALIASES, model_name
from spectui.metrics.host.load import OtherLoad
from spectui.models.artifacts import file_sha256
from spectui.models.cost_curves import curve_key, merge_run_curve
from spectui.models.gguf import read_gguf
from spectui.models.json_cache import cache_path, read_entries, read_entry, write_entry
from spectui.models.registry import embedded_model_path, resolve_model
from spectui.prompts import find_prompt

#: rows verified per one-token cost at n = 16 from which a type counts as batched here
BATCHED_ROWS_PER_COST = 3.0
#: the block the choice is made on: K = 8 drafted tokens and the pending one, at full acceptance
CHOICE_BLOCK = 9
#: a type replaces the shipped one only when it verifies that block this much faster...
FASTER_BY = 1.10
#: ...and its single token (what AR and a rejected block pay) is at most this much slower
TOKEN_SLOWER_AT_MOST = 1.10
#: types within this much of the fastest block count as a tie, which the most faithful one wins
TIE = 1.05
#: the types the embedded default may run in, most faithful to the shipped weights first: F16
#: and Q8_0 hold a 4-bit model's values nearly exactly. Never a second 4-bit rounding: Q4_0
#: made from the shipped Q4_1 verifies fastest on x86 but passed 4 of the 10 quality checks
#: against the shipped file's 7 (F16 and Q8_0: 7), and its greedy outputs part from the shipped
#: file's within 0-7 tokens (``spectui quality``, 2026-11-26); ``SPECTUI_EMBEDDED_WEIGHTS=Q4_0``
#: still runs it for whoever wants that trade
EMBEDDED_CANDIDATES = ("F16", "Q8_0")
#: the types whose CPU kernels give a block the same logits as single tokens bit for bit with one
#: thread and flash attention (``--deterministic``), measured on x86 (``noise.require_invariant``):
#: F16 and the K-quants are not (F16 differed on this repository's AVX-512 host), so a
#: deterministic run of the embedded default never runs in them unless a person names them
INVARIANT_TYPES = ("Q8_0", "Q4_0", "Q4_1")
ENV = "SPECTUI_EMBEDDED_WEIGHTS"
CACHE_NAME = "embedded-weights.json"
#: the prompt the probes measure at (its depth is a typical short run's)
PROBE_PROMPT = "medium-reasoning"
#: a type whose measurement saw other processes busier than the quietest type's by this many
#: points (percent of all cores) is measured again: types are timed one after another, so a
#: burst elsewhere lands on one of them and makes it look slower than it is (a first run beside
#: a test collection timed the shipped Q4_1 at 123.5 ms a token, about 8x its usual, and chose
#: F16 on it, 2026-11-28). Load that stays on through every type slows them alike.
DISTURBED_BY = 20
#: measurements again of a disturbed type, at most (its quietest is kept)
REMEASURES = 2


@dataclass
class WeightRow:
    quant: str
    path: str
    size_bytes: int
    curve: Curve
    source: str = ""  # the model file the probe was made from
    #: percent of all cores other processes kept busy while this type was measured (None: unknown)
    other_load: int | None = None

    @property
    def rows_per_cost(self) -> float:
        return 16 / self.curve.cost(16)

    @property
    def batched(self) -> bool:
        return self.rows_per_cost >= BATCHED_ROWS_PER_COST

    def ideal_speedup(self, k: int = 8) -> float:
        """Speedup at full acceptance with K drafted tokens: K + 1 tokens for one block."""
        return (k + 1) / self.curve.cost(k + 1)

    @property
    def block_us(self) -> float:
        """What a block of ``CHOICE_BLOCK`` tokens takes here, in microseconds."""
        return self.curve.unit_us * self.curve.cost(CHOICE_BLOCK)


def probe_file(quant: str, source: str | None = None) -> str:
    """``source`` (the embedded model when None) in ``quant``: the file itself when it is of
    that type already, or a cached requantized copy."""
    src = source or embedded_model_path()
    return src if read_gguf(src).quant.upper() == quant.upper() else str(cached_copy(src, quant))


def probe_weights(
    backend: BackendConfig,
    text: str,
    *,
    types: Sequence[str] = PROBE_TYPES,
    progress: Callable[[str], None] = lambda _m: None,
    source: str | None = None,
    sizes: Sequence[int] = CURVE_SIZES,
    rounds: int = 5,
) -> list[WeightRow]:
    """The probe's curve in every weight type, at the depth ``text`` reaches; the probe is
    ``source`` (a model file) or, when None, the embedded model."""
    config = BackendConfig(n_ctx=max(512, min(backend.n_ctx, 2048)), n_batch=backend.n_batch, n_threads=backend.n_threads,
                           n_gpu_layers=backend.n_gpu_layers)

    def measure(quant: str) -> WeightRow:
        progress(f"probe weights: {quant}")
        path = probe_file(quant, source)
        llama = LlamaCppBackend.open(path, config)
        load = OtherLoad()
        try:
            tokens = llama.tokenize(text, add_bos=True)
            load.read()
            curve = measure_curve(llama, tokens, depth=len(tokens), sizes=sizes, rounds=rounds)
            other = load.read()
        finally:
            llama.close()
        return WeightRow(quant=quant, path=path, size_bytes=Path(path).stat().st_size, curve=curve,
                         source=source or embedded_model_path(), other_load=other)

    rows = [measure(quant) for quant in types]
    for _ in range(REMEASURES):
        again = disturbed(rows)
        if not again:
            break
        for i in again:
            row = measure(rows[i].quant)
            if (row.other_load or 0) < (rows[i].other_load or 0):
                rows[i] = row
    return rows


def disturbed(rows: Sequence[WeightRow]) -> list[int]:
    """The rows whose measurement saw other processes busier than the quietest row's by
    ``DISTURBED_BY`` points or more: compared with the others, they look slower than they are."""
    loads = [r.other_load for r in rows]
    known = [x for x in loads if x is not None]
    if len(known) < 2:
        return []
    quietest = min(known)
    return [i for i, x in enumerate(loads) if x is not None and x - quietest >= DISTURBED_BY]


# -- the embedded default's weight type ---------------------------------------------------------


class WeightChoice(msgspec.Struct, frozen=True, kw_only=True):
    """The weight type the embedded default runs in on this host, and the numbers behind it."""

    quant: str
    shipped: str
    #: per type probed: one token, and a block of ``CHOICE_BLOCK``, in microseconds
    token_us: dict[str, float]
    block_us: dict[str, float]
    #: "spectui tune --weights" or "first run" (the shorter probe)
    by: str = ""
    measured_at: str = ""

    def reason(self) -> str:
        q, s = self.quant, self.shipped
        if q == s:
            return (f"no type verifies a block of {CHOICE_BLOCK} over {FASTER_BY:.2f}x faster than the shipped {s} here "
                    f"without a slower single token ({self.by})")
        return (f"a block of {CHOICE_BLOCK} tokens {self.block_us[q] / 1000:.1f} ms against the shipped {s}'s "
                f"{self.block_us[s] / 1000:.1f}, one token {self.token_us[q] / 1000:.1f} against {self.token_us[s] / 1000:.1f} ms "
                f"({self.by})")


def choose_weights(rows: Sequence[WeightRow], shipped: str, *, by: str) -> WeightChoice:
    """The type a speculative default should verify in, from rows that include ``shipped``:
    the fastest block of ``CHOICE_BLOCK`` among types whose single token is not slower than
    ``TOKEN_SLOWER_AT_MOST`` x the shipped one's, if it beats the shipped block by
    ``FASTER_BY``; types that tie with it go to the most faithful (``EMBEDDED_CANDIDATES``)."""
    token_us = {r.quant.upper(): r.curve.unit_us for r in rows}
    block_us = {r.quant.upper(): r.block_us for r in rows}
    return WeightChoice(
        quant=_rule(token_us, block_us, shipped.upper(), EMBEDDED_CANDIDATES), shipped=shipped.upper(),
        token_us={q: round(v, 1) for q, v in token_us.items()},
        block_us={q: round(v, 1) for q, v in block_us.items()},
        by=by, measured_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    )


def _rule(token_us: dict[str, float], block_us: dict[str, float], shipped: str, candidates: Sequence[str]) -> str:
    """``choose_weights``' rule over measured numbers (upper-case type -> microseconds), the
    types allowed besides ``shipped`` being ``candidates``, most faithful first."""
    eligible = [q for q in token_us if (q == shipped or q in candidates) and token_us[q] <= token_us[shipped] * TOKEN_SLOWER_AT_MOST]
    fastest = min(block_us[q] for q in eligible)
    fidelity = {q: i for i, q in enumerate(candidates)}  # the shipped file itself first (-1)
    best = sorted((q for q in eligible if block_us[q] <= fastest * TIE), key=lambda q: fidelity.get(q, -1))[0]
    return shipped if best != shipped and block_us[best] * FASTER_BY > block_us[shipped] else best


def deterministic_pick(choice: WeightChoice) -> str:
    """The type a ``--deterministic`` run of the embedded default runs in: the probe's choice
    when its kernels are among ``INVARIANT_TYPES``, else the same rule over the same numbers
    among the invariant types (the shipped file when it is one and none beats it), Q8_0 when
    nothing invariant was measured."""
    if choice.quant in INVARIANT_TYPES:
        return choice.quant
    allowed = tuple(q for q in EMBEDDED_CANDIDATES if q in INVARIANT_TYPES)
    if choice.shipped in INVARIANT_TYPES and choice.shipped in choice.token_us and choice.shipped in choice.block_us:
        measured = {q: v for q, v in choice.token_us.items() if q in choice.block_us}
        return _rule(measured, choice.block_us, choice.shipped, allowed)
    return allowed[0]


def shipped_type() -> str:
    """The embedded default's weight type as shipped (``Q4_1``)."""
    return read_gguf(embedded_model_path()).quant.upper()


def _threads(backend: BackendConfig) -> int:
    return backend.n_threads or default_threads()


def choice_key(backend: BackendConfig) -> str:
    """The shipped file, and the settings that change which kernels run."""
    return f"{file_sha256(embedded_model_path())[:16]}|llamacpp|t{_threads(backend)}|g{backend.n_gpu_layers}"


def _allowed(choice: WeightChoice | None) -> WeightChoice | None:
    # a type the rule no longer allows (an older spectui's choice) is probed again
    return choice if choice is not None and choice.quant in (choice.shipped, *EMBEDDED_CANDIDATES) else None


def stored_choice(backend: BackendConfig) -> WeightChoice | None:
    return _allowed(read_entry(CACHE_NAME, choice_key(backend), WeightChoice))


def stored_types(shipped_sha16: str) -> set[str]:
    """The weight types some stored choice for the shipped file (sha256 prefix) runs in, under
    any settings: one thread count's probe must not delete the copy another's choice loads."""
    types = set()
    for key, raw in read_entries(CACHE_NAME).items():
        if not key.startswith(f"{shipped_sha16}|"):
            continue
        try:
            choice = _allowed(msgspec.convert(raw, WeightChoice))
        except msgspec.ValidationError:
            continue
        if choice is not None:
            types.add(choice.quant.upper())
    return types


def discard_unused_copies(rows: Sequence[WeightRow], shipped_sha16: str) -> list[Path]:
    """Delete the probe's requantized copies that no stored choice runs (a few hundred MB of
    cache nothing reads; tune --weights remakes them), and return what went. A copy that any
    stored choice names stays, whatever settings chose it: alternating ``--deterministic``
    (one thread) and plain runs would otherwise requantize on every switch."""
    keep = stored_types(shipped_sha16)
    gone = []
    for r in rows:
        if r.quant.upper() not in keep and r.path != r.source:
            Path(r.path).unlink(missing_ok=True)
            gone.append(Path(r.path))
    return gone


def store_choice(backend: BackendConfig, choice: WeightChoice) -> None:
    write_entry(CACHE_NAME, choice_key(backend), msgspec.to_builtins(choice))


def probe_embedded(backend: BackendConfig, *, say: Callable[[str], None]) -> WeightChoice:
    """The shorter probe a first run pays once: the shipped type and the candidates, blocks
    up to ``CHOICE_BLOCK``, three rounds (tune --weights measures every size, five rounds)."""
    shipped = shipped_type()
    types = (shipped, *(t for t in EMBEDDED_CANDIDATES if t != shipped))
    say(f"choosing the embedded model's weight type for this machine, once (measuring {', '.join(types)}; "
        f"spectui tune --weights shows the whole probe)")
    rows = probe_weights(backend, find_prompt(PROBE_PROMPT).text, types=types, sizes=range(1, CHOICE_BLOCK + 1), rounds=3)
    choice = choose_weights(rows, shipped, by="first run")
    if disturbed(rows):
        loads = ", ".join(f"{r.quant} {r.other_load}%" for r in rows)
        say(f"other processes kept the CPU busy while the weight types were measured ({loads} of all cores), "
            "even measured again: the choice may be off; spectui tune --weights measures them again")
    store_choice(backend, choice)
    chosen = next(r for r in rows if r.quant.upper() == choice.quant)
    # what the probe measured seeds the chosen copy's cost-aware K (as a run's own blocks would)
    key = curve_key(file_sha256(chosen.path), "llamacpp", _threads(backend), backend.n_gpu_layers)
    merge_run_curve(key, dict(enumerate(chosen.curve.relative, start=1)))
    discard_unused_copies(rows, choice_key(backend).split("|", 1)[0])  # after store_choice: the new choice is kept too
    return choice


def _probe_once(backend: BackendConfig, say: Callable[[str], None]) -> WeightChoice:
    """The first run's probe, one process at a time: a second spectui starting meanwhile
    waits, then reads the choice (and never loses a copy it is about to load to the clean-up)."""
    lock = cache_path("embedded-weights.probe")
    try:
        storage.prepare_dir(lock.parent)
    except OSError:
        pass  # no cache to write: storage.locked yields without a lock, the probe still runs
    with storage.locked(lock):
        choice = stored_choice(backend)
        if choice is None:
            choice = probe_embedded(backend, say=say)
            say(f"the embedded model runs as {choice.quant} here: {choice.reason()}; {ENV}=shipped runs the file as shipped")
        return choice


@dataclass(frozen=True)
class Target:
    """The file a configuration's target loads; when spectui made it, from which file, in
    which type, and why."""

    path: str
    made_from: str = ""
    quant: str = ""
    why: str = ""

    @property
    def origin(self) -> str:
        """``ModelArtifacts.origin``: "" for a file as given."""
        return f"the embedded {self.made_from} requantized to {self.quant}: {self.why}" if self.made_from else ""


class WeightsNotice(UserWarning):
    """A first run measures weight types (seconds, once): a note, which the CLI prints as one
    stderr line, not a fault."""


def _notice(line: str) -> None:
    warnings.warn(f"spectui: {line}", WeightsNotice, stacklevel=3)


def resolve_target(spec: str, backend: BackendConfig, *, probe: bool = True,
                   say: Callable[[str], None] = _notice) -> Target:
    """The file ``spec`` (a configuration's target) loads on llama.cpp. A path is itself; the
    embedded default is its copy in the type chosen for this machine (probed and made now when
    ``probe``; without it, nothing is measured or written: the shipped file until a run made
    the copy)."""
    if spec not in EMBEDDED_MODEL_ALIASES:
        return Target(resolve_model(spec))
    shipped_path = embedded_model_path()
    want = os.environ.get(ENV, "").strip() or "auto"
    if want.lower() == "shipped":
        return Target(shipped_path)
    shipped = shipped_type()
    if want.lower() != "auto":
        try:
            ftype(want)
        except SpectuiError as exc:
            raise SpectuiError(f"{ENV}={want}: {exc}; or 'auto' / 'shipped'") from None
        quant, why = want.upper(), f"{ENV}={want}"
    else:
        choice = stored_choice(backend)
        if choice is None and probe:
            choice = _probe_once(backend, say)
        if choice is None:
            return Target(shipped_path)
        quant, why = choice.quant, choice.reason()
        if backend.deterministic and quant not in INVARIANT_TYPES:
            # the person named no weights: run a type whose kernels hold --deterministic, rather
            # than refuse the one spectui picked for speed
            quant = deterministic_pick(choice)
            why = (f"--deterministic: {quant}'s kernels give a block the same logits as single tokens "
                   f"(measured so on x86), {choice.quant}'s (this machine's pick for speed) are not known to")
            say(f"the embedded model runs as {quant}{' (as shipped)' if quant == shipped else ''} for this run: "
                f"{why}; --target FILE runs weights of your choice")
    if quant == shipped or not (probe or copy_path(shipped_path, quant).is_file()):
        return Target(shipped_path)  # without a probe nothing is made: the copy runs once a run made it
    return Target(str(cached_copy(shipped_path, quant)), made_from=os.path.basename(shipped_path), quant=quant, why=why)


def embedded_note(backend: BackendConfig | None = None) -> str:
    """A line for ``spectui models``: what the embedded default runs as here ("" = as shipped,
    or no run has chosen yet)."""
    backend = backend or BackendConfig()
    target = resolve_target("", backend, probe=False)
    if not target.made_from:
        return ""
    return (f"smollm2 (the embedded default) runs here as {model_name(target.path)}, {target.why}; "
            f"{ENV}=shipped or --target {embedded_model_path()} runs the file as shipped")
