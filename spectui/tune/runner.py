"""``spectui tune``'s measurements on a loaded engine: the curves, each prompt's greedy output
(or a draft model's blocks), the plans, and the check of the plans against real runs.

Everything runs on the engine the user configured (target, draft, threads, context), greedy,
one session at a time; the check alternates AR and the recommended setting per prompt, so
a burst on a shared machine lands on both sides.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import msgspec

from spectui.config import RunConfig
from spectui.drafting import DraftConfig, Model, Pricing
from spectui.engine.drafters.model import ModelDrafter, draft_sampling
from spectui.engine.embedded import Engine
from spectui.engine.host.noise import batch_noise
from spectui.engine.host.verify_cost import LONG_DEPTH, Curve, measure_curve, measure_draft_cost
from spectui.engine.loop.decode import decode
from spectui.engine.loop.length import FixedLength
from spectui.engine.loop.sampling import Sampler
from spectui.engine.protocol import Draft, DrafterBase
from spectui.errors import SpectuiError
from spectui.format import model_name
from spectui.metrics.conditions import LoadSpan, MachineLoad
from spectui.metrics.same_text import Output, speedup
from spectui.models.cost_curves import CostCurve, save_curve
from spectui.prompts import PromptSpec
from spectui.recording.reader import Recording
from spectui.recording.schema import BatchNoise, Event, Step
from spectui.tune.plan import PromptData, TierPlan, lookup_name, plan_tier
from spectui.tune.result import TuneResult

#: how long a model drafter's acceptance run drafts, when the configuration does not say
MODEL_PROBE_K = 8
#: runtime facts a tune result keeps (what its settings are labelled with)
RUNTIME_KEYS = ("backend", "llama.cpp", "llama-cpp-python", "mlx", "mlx-lm")

Progress = Callable[[str], None]


def prompt_config(base: RunConfig, spec: PromptSpec, max_tokens: int, mode: str = "ar") -> RunConfig:
    return msgspec.structs.replace(
        base, mode=mode, prompt=spec.text, prompt_tier=spec.tier, prompt_name=spec.name,
        prompt_check=spec.check, max_tokens=min(spec.max_tokens, max_tokens),
    )


def measure_curves(engine: Engine, context: Sequence[int], progress: Progress, *, long: bool = True) -> tuple[Curve, Curve | None]:
    """The verify-cost curve at the prompts' depth, and at ``LONG_DEPTH`` when the context has room."""
    progress("verify cost at the prompts' depth")
    curve = measure_curve(engine.target, context, depth=len(context))
    long_curve = None
    if long and engine.target.n_ctx > LONG_DEPTH + 32:
        progress(f"verify cost at {LONG_DEPTH} tokens of context")
        long_curve = measure_curve(engine.target, context, depth=LONG_DEPTH, rounds=3)
    engine.target.truncate(0)
    return curve, long_curve


def remember_curve(engine: Engine, curve: Curve, measured_at: str) -> None:
    """Seed later runs of this target (the cost-aware K starts from this curve)."""
    save_curve(engine.cost_key(), CostCurve(relative=curve.relative, unit_us=curve.unit_us, depth=curve.depth,
                                            source="tune", measured_at=measured_at))


def _tokens(events: Iterable[Event]) -> list[int]:
    return [t for e in events if type(e) is Step for t in e.tokens]


def collect_outputs(engine: Engine, configs: Sequence[RunConfig], progress: Progress) -> list[PromptData]:
    """Each prompt's greedy AR output: what a prompt-lookup drafter is replayed over."""
    out = []
    for config in configs:
        progress(f"AR output of {config.prompt_name}")
        _, prompt = engine.prepare_prompt(config)
        events = list(engine.run(config, memory_interval_s=None))
        out.append(PromptData(config.prompt_name, config.prompt_tier, prompt, _tokens(events), budget=config.max_tokens))
    return out


def outputs_from_recordings(recordings: Sequence[Recording], sha256: str) -> list[PromptData]:
    """Greedy runs of this target, read from recordings (AR or speculative: greedy output is
    the target's either way); other targets, sampled runs, redacted copies (token ids that are
    stand-ins, which no drafter could match) and empty ones are left out."""
    out = []
    seen = set()
    for rec in recordings:
        h = rec.header
        if h.artifacts.target.sha256 != sha256 or not h.config.sampling.greedy or h.config.backend.name == "server" or h.redaction:
            continue
        tokens = _tokens(rec.events)
        key = (h.config.prompt_name or h.prompt_text, h.config.mode)
        if len(tokens) < 2 or key in seen:
            continue
        seen.add(key)
        tier = h.config.prompt_tier or "given"
        out.append(PromptData(h.config.prompt_name or "prompt", tier, list(h.prompt_tokens), tokens, budget=h.config.max_tokens))
    return out


class _Recorder(DrafterBase):
    """A draft model drafter that keeps every proposal (its confidences) for tune."""

    free = False

    def __init__(self, inner: ModelDrafter) -> None:
        self.inner = inner
        self.name = inner.name
        self.drafts: list[Draft] = []

    def reset(self, prompt: Sequence[int]) -> None:
        self.inner.reset(prompt)

    def propose(self, history: Sequence[int], k: int) -> Draft:
        draft = self.inner.propose(history, k)
        self.drafts.append(draft)
        return draft

    def close(self) -> None:
        pass


def collect_model_blocks(engine: Engine, configs: Sequence[RunConfig], k: int, progress: Progress) -> list[PromptData]:
    """Short greedy runs with the draft model at a fixed K, p-min off, recording for every
    block the draft's confidence per token and how many tokens the target kept."""
    draft_model = engine.draft_model
    assert draft_model is not None, "collect_model_blocks needs an engine with a draft model"
    out = []
    for config in configs:
        progress(f"draft model blocks on {config.prompt_name}")
        _, prompt = engine.prepare_prompt(config)
        assert isinstance(config.draft.drafter, Model), "collect_model_blocks runs a draft model's settings"
        inner = ModelDrafter(draft_model, draft_sampling(config.sampling, config.draft.drafter))
        inner.collect_confidence = True
        recorder = _Recorder(inner)
        steps = [e for e in decode(engine.target, prompt, sampler=Sampler(config.sampling), max_tokens=config.max_tokens,
                                   drafter=recorder, draft_length=FixedLength(k)) if type(e) is Step]
        asked = [s for s in steps[1:] if s.k > 0]  # one proposal per step that asked for a draft
        blocks = [(list(d.confidence or []), s.drafted, s.accepted) for d, s in zip(recorder.drafts, asked)]
        out.append(PromptData(config.prompt_name, config.prompt_tier, prompt, _tokens(steps), blocks))
    return out


def plan_tiers(data: Sequence[PromptData], curve: Curve, base: DraftConfig, draft_cost: float) -> list[TierPlan]:
    tiers: dict[str, list[PromptData]] = {}
    for d in data:
        tiers.setdefault(d.tier, []).append(d)
    return [plan_tier(tier, items, curve.cost, base, curve.relative, draft_cost=draft_cost) for tier, items in tiers.items()]


def check(engine: Engine, plans: Sequence[TierPlan], configs: dict[str, RunConfig], curve: Curve, reps: int,
          progress: Progress) -> None:
    """Run AR and each tier's recommended setting, alternating, ``reps`` rounds per prompt;
    the measured speedup (median of the rounds' decode tok/s ratios, over the same text) goes
    beside the prediction, per prompt and per tier (median over prompts)."""
    for plan in plans:
        if plan.best.drafter == "ar":
            continue
        for name in plan.prompts:
            ar = configs[name]
            spec = msgspec.structs.replace(ar, mode="spec", draft=plan.best.draft_config(ar.draft))
            pricing = Pricing(seed=curve.relative)  # the curve tune measured, as its replays priced blocks
            ratios = []
            for r in range(reps):
                progress(f"check {plan.tier}: {name} ({r + 1}/{reps})")
                first, second = (ar, spec) if r % 2 == 0 else (spec, ar)  # a drift in speed cancels

                ratio, load = quiet_measure(functools.partial(_pair, engine, first, second, ar, spec, pricing),
                                            ar.envelope.max_other_cpu, progress)
                if load.shared:  # still shared after measuring again: said beside the figure, never as the answer
                    plan.disturbed[name] = max(plan.disturbed.get(name, 0.0), load.share or 0.0)
                if ratio > 0:
                    ratios.append(ratio)
            plan.measured_per_prompt[name] = statistics.median(ratios) if ratios else math.nan
        values = [v for v in plan.measured_per_prompt.values() if not math.isnan(v)]
        plan.measured = statistics.median(values) if values else None


def _pair(engine: Engine, first: RunConfig, second: RunConfig, ar: RunConfig, spec: RunConfig, pricing: Pricing) -> float:
    """``spec``'s speedup over ``ar``, run in the order given."""
    outputs = {id(c): Output.of(engine.run(c, memory_interval_s=None, pricing=pricing)) for c in (first, second)}
    # over the same text: a greedy pair whose outputs part is timed up to where they part
    return speedup(outputs[id(spec)], outputs[id(ar)], greedy=ar.sampling.greedy)


#: measurements again of a check taken while other processes held the CPU, at most
REMEASURES = 2


def quiet_measure(measure: Callable[[], float], limit: float, progress: Progress) -> tuple[float, MachineLoad]:
    """``measure()`` with the machine's load over it (``metrics.conditions``), measured again
    while another process held the CPU (up to ``REMEASURES`` times; the quietest kept): a pair
    timed beside a busy process is that process's answer, not this machine's."""
    span = LoadSpan(limit)
    best: tuple[float, MachineLoad] | None = None
    for attempt in range(1 + REMEASURES):
        span.start()
        value = measure()
        load = span.load()
        if best is None or (load.share or 0.0) < (best[1].share or 0.0):
            best = (value, load)
        if not load.shared:
            break
        if attempt < REMEASURES:
            progress(f"{load.text()}: measuring again")
    assert best is not None
    return best


@dataclass
class TunePlan:
    """What to tune over: prompts, budget, check rounds; acceptance from ``recordings`` when given."""

    specs: Sequence[PromptSpec]
    max_tokens: int
    reps: int
    model_k: int = MODEL_PROBE_K
    recordings: Sequence[Recording] | None = None
    source: str = "runs"

    def phases(self, config: RunConfig) -> int:
        """Progress steps ``run_tune`` reports."""
        return 3 + len(self.specs) * (1 + self.reps) + int(config.draft.has_model)


def measure_exactness(
    engine: Engine, context: Sequence[int], reach: int, unit_us: float, progress: Progress
) -> tuple[BatchNoise, BatchNoise | None, float]:
    """(noise, deterministic noise, deterministic one-token cost): what greedy exactness looks
    like at the run's settings, and what ``--deterministic`` would cost on this machine."""
    progress("batch noise (block vs one-token logits)")
    sha = engine.target.artifacts().sha256
    noise = batch_noise(engine.target, sha, reach)
    det = engine.deterministic_target()
    if det is None:
        return noise, None, 0.0
    try:
        return noise, batch_noise(det, sha, reach), measure_draft_cost(det, context, unit_us)
    finally:
        det.close()


def tune_config(config: RunConfig) -> RunConfig:
    """The configuration tune loads its engine with: the draft model too, where there is one."""
    return msgspec.structs.replace(config, mode="spec")


def run_tune(config: RunConfig, plan: TunePlan, progress: Progress) -> TuneResult:
    """Load the target (and draft) and ``tune_engine`` on it."""
    with Engine.load(tune_config(config)) as engine:
        return tune_engine(engine, config, plan, progress)


def tune_engine(engine: Engine, config: RunConfig, plan: TunePlan, progress: Progress) -> TuneResult:
    """Measure, plan every tier and check the plans on a loaded ``engine`` (one that
    ``fits(tune_config(config))``: the dashboard hands over the engine its sessions run on);
    the measured curve is stored for later runs of this target. Refuses bad input before
    measuring."""
    configs = {s.name: prompt_config(config, s, plan.max_tokens) for s in plan.specs}
    model = config.draft.has_model
    for c in configs.values():
        engine.check(c)
    runtime = engine.target.runtime_info()
    contexts = sorted((engine.prepare_prompt(c)[1] for c in configs.values()), key=len)
    context = contexts[len(contexts) // 2]  # the median prompt's depth
    curve, long_curve = measure_curves(engine, context, progress)
    remember_curve(engine, curve, dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    draft_cost = 0.0
    if model:
        progress("draft model cost per token")
        assert engine.draft_model is not None  # tune_config(config) loads the draft model it names
        draft_cost = measure_draft_cost(engine.draft_model, context, curve.unit_us)
        data = collect_model_blocks(engine, list(configs.values()), plan.model_k, progress)
    elif plan.recordings is not None:
        data = outputs_from_recordings(plan.recordings, engine.target.artifacts().sha256)
        if not data:
            raise SpectuiError(f"no greedy recording of this target in {plan.source}")
        configs = {d.name: configs[d.name] for d in data if d.name in configs}  # only prompts/ prompts are re-run
    else:
        data = collect_outputs(engine, list(configs.values()), progress)
    eog = frozenset(engine.target.eog_tokens)  # replayed as a run drafts: nothing past the end
    data = [replace(d, eog=eog) for d in data]
    reach = len(contexts[-1]) + plan.max_tokens
    noise, det_noise, det_cost = measure_exactness(engine, context, reach, curve.unit_us, progress)
    plans = plan_tiers(data, curve, config.draft, draft_cost)
    check(engine, [p for p in plans if all(n in configs for n in p.prompts)], configs, curve, plan.reps, progress)
    info = engine.target.artifacts()
    return TuneResult(
        model=model_name(info.path), quant=info.quant, threads=int(runtime.get("n_threads", "0") or 0),
        drafter=config.draft.flag if model else lookup_name(config.draft), curve=curve, long_curve=long_curve, draft_cost=draft_cost,
        tiers=plans, runtime={k: v for k, v in runtime.items() if k in RUNTIME_KEYS}, source=plan.source,
        key=engine.cost_key(), measured_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        noise=noise, deterministic_noise=det_noise, deterministic_cost=det_cost,
    )
