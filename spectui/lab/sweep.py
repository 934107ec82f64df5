"""``spectui sweep``: AR first, then one knob at a time, each point repeated, across prompt tiers.

A sweep is a plan (prompts x points x repeats) run in rounds: every round runs each prompt's AR
baseline and then every point, so slow drift on a shared machine hits every point alike, and
each speculative run is paired with the AR run of the same prompt in the same round. Every run
is recorded; ``sweep.json`` in the output folder (rewritten after each run, atomically) lists
the runs and the plan, so an interrupted sweep keeps what it measured and ``--analyze DIR``
rebuilds the table from the recordings alone.

The table (a row per tier and point) and the knees of its K curves are ``sweep_table``'s.

A grid (``--grid``, or several runtime methods in ``--draft``) runs every drafter of the drafter
axis at every K instead of one knob at a time: a runtime's methods read K differently (its
n-gram size, its n-max; ``ngram-cache`` fixes its own), so each method has a K curve of its own.
A runtime method that reads no K runs once, as a drafter point. On a runtime (``--runtime``)
each setting is a server of its own (``RuntimeEngine.fits``), so a round runs point by point,
every prompt of a point on one server, rather than prompt by prompt: a server starts once per
point and round, not once per run; each run is still paired with its prompt's AR run of the
same round.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from spectui import file_kinds, storage
from spectui.config import RunConfig
from spectui.drafting import RUNTIME_PREFIX, migrate_config
from spectui.engine.drafters import parse_drafter
from spectui.errors import SpectuiError
from spectui.lab.sweep_table import Knee, SweepPoint, SweepRow, SweepRun, aggregate, drafter_label
from spectui.metrics.conditions import MachineLoad, machine_load
from spectui.metrics.same_text import Output
from spectui.metrics.stats import Summary, summarize
from spectui.prompts import PromptSpec
from spectui.sessions.open import EngineCache, EngineFactory
from spectui.sessions.record import record_session

DEFAULT_K_VALUES = (2, 3, 4, 6, 8)
KNOBS = ("k", "temperature", "top_k", "drafter")
MANIFEST = "sweep.json"


AR_POINT = SweepPoint("ar", "AR")


class SweepPlan(msgspec.Struct, kw_only=True):
    base: RunConfig  # the speculative configuration the knobs vary (its prompt is unused)
    prompts: list[str]  # prompt names
    tiers: dict[str, str]  # prompt name -> tier
    points: list[SweepPoint]
    repeats: int = 3

    @property
    def total_runs(self) -> int:
        return len(self.prompts) * len(self.points) * self.repeats


class SweepResult(msgspec.Struct, kw_only=True):
    plan: SweepPlan
    folder: str
    runs: list[SweepRun]
    rows: list[SweepRow] = msgspec.field(default_factory=list)
    knees: list[Knee] = msgspec.field(default_factory=list)
    complete: bool = False
    elapsed_s: float = 0.0


class _Manifest(msgspec.Struct, kw_only=True):
    """What ``load_sweep`` trusts from ``sweep.json``: the plan and the runs (rows are rebuilt)."""

    plan: SweepPlan
    runs: list[SweepRun]
    complete: bool = False
    elapsed_s: float = 0.0


class SweepProgress(msgspec.Struct, kw_only=True):
    done: int
    total: int
    elapsed_s: float
    eta_s: float  # NaN until one run has finished
    current: str  # what runs next ("" when finished)


# -- the plan ---------------------------------------------------------------------------------


def _values(text: str, kind: type) -> list[str]:
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            kind(part)
        except ValueError:
            raise SpectuiError(f"sweep value {part!r} is not a valid {kind.__name__}") from None
        out.append(part)
    return out


def split_drafters(text: str) -> list[str]:
    """The drafter axis: comma-separated, where a runtime's comma list of methods stays one
    drafter (``runtime:ngram-mod,ngram-simple,runtime:ngram-cache`` is two: a name without the
    prefix continues the runtime drafter before it; a runtime and spectui's own drafters never
    share a sweep, as ``RunConfig.validate`` refuses a runtime with spectui's drafters)."""
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if out and out[-1].startswith(RUNTIME_PREFIX) and not part.startswith(RUNTIME_PREFIX):
            out[-1] += "," + part
        else:
            out.append(part)
    return out


def reads_k(source: str) -> bool:
    """Whether K changes what ``source`` drafts: not for a runtime's methods that fix their own
    draft length (llama-server's ``ngram-cache``); a name spectui does not know is taken to read it."""
    if not source.startswith(RUNTIME_PREFIX):
        return True
    from spectui.runtime.methods import METHODS  # llama-server's table: a name it lacks is another runtime's

    infos = [METHODS.get(name) for name in source.removeprefix(RUNTIME_PREFIX).split(",")]
    return any(info is None or bool(info.k_flag) for info in infos)


def make_points(
    *, k_values: str = "", temperatures: str = "", top_k_values: str = "", drafters: str = "", grid: bool = False,
) -> list[SweepPoint]:
    """AR first, then each knob's values (comma-separated strings, as on the command line);
    ``grid``: every drafter at every K (a drafter that reads no K once), then the other knobs."""
    points = [AR_POINT]
    ks, sources = _values(k_values, int), split_drafters(drafters)
    if grid:
        if not ks or not sources:
            raise SpectuiError("a grid runs every drafter at every K: give both --drafters (or several methods in --draft) and --k-values")
        for source in sources:
            points += [SweepPoint("k", k, source) for k in ks] if reads_k(source) else [SweepPoint("drafter", source)]
    else:
        points += [SweepPoint("k", v) for v in ks]
    points += [SweepPoint("temperature", v) for v in _values(temperatures, float)]
    points += [SweepPoint("top_k", v) for v in _values(top_k_values, int)]
    if not grid:
        points += [SweepPoint("drafter", v) for v in sources]
    points = list(dict.fromkeys(points))  # a value given twice runs once
    if len(points) == 1:
        raise SpectuiError("the sweep has no points: give --k-values, --temperatures, --top-k-values or --drafters")
    return points


def point_config(base: RunConfig, point: SweepPoint, prompt: PromptSpec, max_tokens: int | None = None) -> RunConfig:
    """The base configuration with this prompt and this one knob changed."""
    sampling, draft, mode = base.sampling, base.draft, "spec"
    if point.knob == "ar":
        mode = "ar"
    elif point.knob == "k":
        drafter = parse_drafter(point.drafter) if point.drafter else draft.drafter  # a grid's K point names its drafter
        draft = draft.drafting_with(drafter, fixed_k=int(point.value))  # a K point is that K
    elif point.knob == "temperature":
        sampling = msgspec.structs.replace(sampling, temperature=float(point.value))
    elif point.knob == "top_k":
        sampling = msgspec.structs.replace(sampling, top_k=int(point.value))
    elif point.knob == "drafter":
        draft = draft.drafting_with(parse_drafter(point.value), fixed_k=draft.fixed_k, cost_aware=draft.cost_aware)  # its length kept
    config = msgspec.structs.replace(
        base,
        mode=mode,
        prompt=prompt.text,
        prompt_tier=prompt.tier,
        prompt_name=prompt.name,
        max_tokens=max_tokens or prompt.max_tokens,
        sampling=sampling,
        draft=draft,
    )
    config.validate()
    return config


def run_order(plan: SweepPlan) -> list[tuple[int, str, SweepPoint]]:
    """(round, prompt, point) in the order they run: prompt by prompt, each prompt's points
    together; on a runtime, point by point (a server per setting: see the module docstring)."""
    if plan.base.backend.is_runtime:
        return [(r, name, point) for r in range(plan.repeats) for point in plan.points for name in plan.prompts]
    return [(r, name, point) for r in range(plan.repeats) for name in plan.prompts for point in plan.points]


def run_file(index: int, tier: str, prompt: str, point: SweepPoint, rnd: int) -> str:
    """A run's recording, named by what it ran (a name a file system takes: no '/', ':' or ',')."""
    what = f"{drafter_label(point.drafter)}-{point.value}" if point.drafter else point.value
    for c in "/:,":
        what = what.replace(c, "_")
    return f"{index:04d}-{tier}-{prompt}-{point.knob}-{what[-40:]}-r{rnd}.spectui"


def select_prompts(prompts: Sequence[PromptSpec], tiers: str = "", names: str = "") -> list[PromptSpec]:
    wanted_tiers = {t.strip() for t in tiers.split(",") if t.strip()}
    wanted_names = {n.strip() for n in names.split(",") if n.strip()}
    known_tiers = {p.tier for p in prompts}
    if unknown := wanted_tiers - known_tiers:
        raise SpectuiError(f"no prompts in tier {', '.join(sorted(unknown))} (tiers: {', '.join(sorted(known_tiers))})")
    if unknown := wanted_names - {p.name for p in prompts}:
        raise SpectuiError(f"no prompt named {', '.join(sorted(unknown))}")
    chosen = [
        p
        for p in prompts
        if (not wanted_tiers or p.tier in wanted_tiers) and (not wanted_names or p.name in wanted_names)
    ]
    if not wanted_tiers and not wanted_names:  # the quality set is graded, not swept for speed
        chosen = [p for p in chosen if p.tier != "quality"]
    if not chosen:
        raise SpectuiError("the sweep selected no prompts")
    return chosen


# -- running ------------------------------------------------------------------------------------


#: the manifest beside a sweep's recordings (it names the prompts and settings: private too)
MANIFEST_KIND = file_kinds.json_kind(
    "a spectui sweep manifest", lambda doc: isinstance(doc, dict) and "plan" in doc and "runs" in doc, private=True
)


def _write_manifest(result: SweepResult) -> None:
    """Atomic (a reader, or a kill, never sees half a manifest); a full disk is one line."""
    path = Path(result.folder) / MANIFEST
    try:
        storage.write_atomic(path, msgspec.json.format(msgspec.json.encode(result), indent=1), MANIFEST_KIND, own_dir=False)
    except OSError as exc:
        raise storage.disk_error(path, exc) from None


def run_sweep(
    plan: SweepPlan,
    prompts: Sequence[PromptSpec],
    folder: str | os.PathLike[str],
    *,
    max_tokens: int | None = None,
    stop: threading.Event | None = None,
    on_run: Callable[[SweepProgress, SweepResult], None] | None = None,
    load_engine: EngineFactory | None = None,
) -> SweepResult:
    """Run the plan, recording each run into ``folder``; ``on_run`` hears about every finished
    run (and once before the first) with the progress and the table so far."""
    by_name = {p.name: p for p in prompts}
    out = Path(folder)
    try:
        storage.prepare_dir(out, private=True)
        storage.claim(out / MANIFEST, MANIFEST_KIND)  # another kind of sweep.json: refused before any run
    except OSError as exc:
        raise storage.disk_error(out, exc) from None
    result = SweepResult(plan=plan, folder=str(out), runs=[])
    summaries: dict[int, Summary] = {}
    outputs: dict[int, Output] = {}  # greedy runs' tokens and times: speedups over the same text
    loads: dict[int, MachineLoad] = {}  # other processes' load over each run
    engines = EngineCache(load_engine)
    order = run_order(plan)
    t_start = time.monotonic()

    def progress(done: int) -> SweepProgress:
        elapsed = time.monotonic() - t_start
        eta = elapsed / done * (len(order) - done) if done else float("nan")
        nxt = "" if done >= len(order) else f"{order[done][1]} {order[done][2].label} (round {order[done][0] + 1})"
        return SweepProgress(done=done, total=len(order), elapsed_s=elapsed, eta_s=eta, current=nxt)

    try:
        if on_run is not None:
            on_run(progress(0), result)
        for i, (rnd, name, point) in enumerate(order):
            if stop is not None and stop.is_set():
                break
            spec = by_name[name]
            config = point_config(plan.base, point, spec, max_tokens)
            engine = engines.get(config)
            file = run_file(i, spec.tier, name, point, rnd)
            events = list(record_session(engine, config, out / file, stop=stop))
            if events and getattr(events[-1], "reason", "") == "interrupted":
                break  # a cut run is kept on disk but stays out of the table: it is not a measurement
            run = SweepRun(index=i, round=rnd, tier=spec.tier, prompt=name, knob=point.knob, value=point.value, file=file,
                           drafter=point.drafter)
            result.runs.append(run)
            summaries[i] = summarize(events)
            loads[i] = machine_load(events, config.envelope.max_other_cpu)
            if config.sampling.greedy:
                outputs[i] = Output.of(events)
            result.rows, result.knees = aggregate(result.runs, summaries, outputs, loads)
            result.elapsed_s = time.monotonic() - t_start
            _write_manifest(result)
            if on_run is not None:
                on_run(progress(i + 1), result)
        result.complete = len(result.runs) == len(order)
        result.elapsed_s = time.monotonic() - t_start
        _write_manifest(result)
    finally:
        engines.close()
    return result


def load_sweep(folder: str | os.PathLike[str]) -> tuple[SweepResult, dict[int, Summary]]:
    """A sweep folder re-read from its recordings: the table is recomputed, not trusted."""
    from spectui.recording.reader import read_recording

    path = Path(folder) / MANIFEST
    try:
        raw = msgspec.json.decode(path.read_bytes())
        plan = raw.get("plan") if isinstance(raw, dict) else None
        migrate_config(plan.get("base") if isinstance(plan, dict) else None)  # a sweep spectui 1.x wrote
        manifest = msgspec.convert(raw, _Manifest)
    except FileNotFoundError:
        raise SpectuiError(f"{folder} is not a sweep folder (no {MANIFEST})") from None
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise SpectuiError(f"{path}: cannot read the sweep manifest: {exc}") from None
    result = SweepResult(
        plan=manifest.plan, folder=str(folder), runs=manifest.runs, complete=manifest.complete, elapsed_s=manifest.elapsed_s
    )
    summaries = {}
    outputs = {}
    loads = {}
    for run in result.runs:
        file = Path(folder) / run.file
        if not file.is_file():
            raise SpectuiError(f"{file}: recording listed in the sweep is missing")
        rec = read_recording(file)
        summaries[run.index] = summarize(rec.events)
        loads[run.index] = machine_load(rec.events, rec.header.config.envelope.max_other_cpu)
        if rec.header.config.sampling.greedy:
            outputs[run.index] = Output.of(rec.events)
    result.rows, result.knees = aggregate(result.runs, summaries, outputs, loads)
    return result, summaries
