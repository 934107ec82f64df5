"""A session: load models once, then run configured decodes that yield the event stream.

``Engine.load`` does every check that can fail on bad input (files, GGUF, vocabularies,
settings) before anything decodes, so the CLI and the dashboard can refuse early with one
line. ``Engine.run`` yields ``Header``, ``Prefill``, ``Step``..., ``End``; an engine failure
mid-run becomes an ``End`` with reason ``error`` rather than an exception, so a recording
always ends with a record saying how.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
from typing import Any

import msgspec

from spectui import __version__
from spectui.config import RunConfig
from spectui.drafting import CostAware, Pricing
from spectui.engine.backends import backend_kind
from spectui.engine.drafters import DrafterKind, DraftSources, check_options, find_drafter, make_drafter
from spectui.engine.drafters.suffix_memory import SuffixMemory
from spectui.engine.host.noise import batch_noise, require_invariant
from spectui.engine.host.proposal_prices import load_prices, prices_key, save_prices
from spectui.engine.host.verify_cost import measure_seed
from spectui.engine.loop.length_choice import length_policy
from spectui.engine.plan import RunPlan, block_sizes, draft_cost_probe, make_policy
from spectui.engine.protocol import Backend, Drafter
from spectui.errors import SpectuiError
from spectui.metrics.memory import MemorySampler
from spectui.models.artifacts import host_info
from spectui.models.chat import apply_chat_template
from spectui.models.cost_curves import CostCurve, curve_key, load_curve, merge_run_curve
from spectui.recording.schema import Artifacts, BatchNoise, End, Event, Header, MemorySample, Step


def _check_settings(config: RunConfig) -> None:
    """The settings as typed, and a drafter's options against what its kind declares."""
    config.validate()
    if config.mode == "spec":
        check_options(config.draft)


class Engine:
    """The loaded target (and draft model, if any) for a configuration."""

    def __init__(self, target: Backend, draft_model: Backend | None, config: RunConfig, *, target_origin: str = "") -> None:
        self.target = target
        self.draft_model = draft_model
        self.config = config
        #: the conversation whose turns the KV caches hold ("" = none): only its next turn
        #: keeps their prefix (see ``reuses_cache``)
        self._cache_owner = ""
        #: block sizes this engine's target and draft model have evaluated once since the load
        #: (``warm_up``), and what the warm-up for the next run cost: (ms, sizes)
        self._warm: set[tuple[str, int]] = set()
        self._warmup: tuple[float, list[int]] = (0.0, [])
        #: the suffix drafter's memory of this target's vocabulary, opened on first use (its
        #: load rebuilds an index: about a second at the default cap, paid once per engine)
        self._suffix_memory: SuffixMemory | None = None
        #: what each drafter kind keeps across this engine's requests (``DrafterKind.state``),
        #: by kind name, made on first use and closed with the engine
        self._drafter_states: dict[str, Any] = {}
        #: how spectui made the target's file, when it did (``engine.weights.Target.origin``)
        self.target_origin = target_origin
        #: the draft model last priced (``draft_cost``) and what a drafted token cost
        self._draft_priced: tuple[Backend | None, float] = (None, 0.0)

    @classmethod
    def load(cls, config: RunConfig) -> Engine:
        """Load the models ``config`` runs on, through its backend's opener (``backends``):
        every check that can fail on bad input is done before a model loads."""
        if config.mode == "spec":  # a plugin's drafter is registered before its source is read as a model
            find_drafter(config.draft.flag)
        _check_settings(config)
        if config.backend.name == "server":  # a server is spectui.sessions.open_engine's to pick
            raise SpectuiError("a server is not an embedded backend: spectui.sessions opens it")
        opened = backend_kind(config.backend.name).open(config)
        return cls(opened.target, opened.draft_model, config, target_origin=opened.target_origin)

    def close(self) -> None:
        states, self._drafter_states = self._drafter_states, {}
        try:
            for state in states.values():
                close = getattr(state, "close", None)
                if callable(close):
                    with contextlib.suppress(Exception):  # a plugin's state failing to close must not keep the models open
                        close()
        finally:
            if self.draft_model is not None:
                self.draft_model.close()
            self.target.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fits(self, config: RunConfig) -> bool:
        """Whether ``config`` runs on these models: the same target and backend settings; AR
        and n-gram runs need nothing more, a model-drafted run the draft model loaded here."""
        loaded = self.config
        if loaded.target != config.target or loaded.backend != config.backend:
            return False
        if config.mode == "spec" and config.draft.has_model:
            return self.draft_model is not None and loaded.draft.flag == config.draft.flag
        return True

    def check(self, config: RunConfig) -> None:
        """Refuse ``config`` now if it cannot run here (bad settings, a prompt too long for
        the context), so a many-run command fails before its first run, not an hour in."""
        _check_settings(config)
        self.prepare_prompt(config)

    # -- per run ------------------------------------------------------------------------

    def prepare_prompt(self, config: RunConfig) -> tuple[str, list[int]]:
        """The prompt text as the model sees it (chat template applied) and its tokens."""
        t = self.target
        if config.chat and t.chat_template:
            text = apply_chat_template(t.chat_template, config.messages(), bos_token=t.bos_token, eos_token=t.eos_token)
            tokens = t.tokenize(text, special=True)
        else:
            text = config.raw_text()
            tokens = t.tokenize(text, special=True, add_bos=True)
        if not tokens:
            raise SpectuiError("the prompt tokenized to nothing")
        if len(tokens) + 1 > t.n_ctx:
            what = f"the conversation ({config.turn} turns)" if config.history else "the prompt"
            raise SpectuiError(
                f"{what} is {len(tokens)} tokens but the context holds {t.n_ctx}; raise --ctx or shorten it"
            )
        return text, tokens

    def reuses_cache(self, config: RunConfig) -> bool:
        """Whether ``config``'s run keeps the prefix its prompt shares with the KV caches: a
        conversation's second turn on, when the caches hold that conversation's earlier turns.

        Only then: splitting a prompt's evaluation differently moves llama.cpp's logits (two
        batches vs one differed by up to 0.79 on this CPU, one thread or two), so a turn is
        comparable with a turn of another conversation (its AR baseline) only when both
        caches were built the same way, turn by turn from empty. A first turn, or a turn
        after another run used the engine, starts from an empty cache.
        """
        return bool(config.conversation and config.history) and self._cache_owner == config.conversation

    def make_drafter(self, config: RunConfig, *, reuse: bool = False) -> Drafter | None:
        """The drafter ``config`` asks for, from the drafter registry (None for AR)."""
        return make_drafter(DraftSources(config, self.draft_model, self.suffix_memory, reuse, states=self.drafter_state))

    def drafter_state(self, kind: DrafterKind) -> Any:
        """What ``kind`` keeps across this engine's requests (its ``state`` hook's object),
        made the first time a drafter of it is made here; None where it keeps nothing."""
        if kind.state is None:
            return None
        if kind.name not in self._drafter_states:
            try:
                self._drafter_states[kind.name] = kind.state()
            except Exception as exc:  # noqa: BLE001 - a plugin's hook failing is one line, before the run's first event
                raise SpectuiError(f"the {kind.name} drafter's state hook failed: {type(exc).__name__}: {exc}") from None
        return self._drafter_states[kind.name]

    def suffix_memory(self) -> SuffixMemory:
        """The suffix drafter's memory for this target's vocabulary (a bad file: one warning,
        an empty memory)."""
        if self._suffix_memory is None:
            self._suffix_memory = SuffixMemory.open(self.target.artifacts().vocab_sha256 or self.target.artifacts().sha256)
        return self._suffix_memory

    def calibrate(self, config: RunConfig, *, before: Callable[[], object] | None = None, prompt_tokens: int = 0,
                  beside: bool = False) -> BatchNoise | None:
        """The batch-shape noise a greedy run of ``config`` is judged against (None for a
        sampled one): cached, or measured now after calling ``before`` (the first greedy run
        at these settings; ~8 s on the embedded model). A ``--deterministic`` run, sampled too,
        is refused here where the noise measured is not nil (``noise.require_invariant``).
        ``beside``: what a neighbouring request in the batch moves too (a server's slots)."""
        deterministic = config.backend.deterministic
        if not config.sampling.greedy and not deterministic:
            return None
        reach = (prompt_tokens or len(self.prepare_prompt(config)[1])) + config.max_tokens
        # a conversation's caches hold its turns: measure in a second context, not in them
        scratch = (lambda: self.target.second_context(self.config.backend)) if self.reuses_cache(config) else None
        artifacts = self.target.artifacts()
        noise = batch_noise(self.target, artifacts.sha256, reach, before=before, measure_on=scratch, beside=beside)
        if deterministic:
            require_invariant(noise, f"{os.path.basename(artifacts.path) or artifacts.name} ({artifacts.quant or 'its weight type'})")
        return noise if config.sampling.greedy else None

    def warm_up(self, config: RunConfig, *, before: Callable[[], object] | None = None) -> tuple[float, list[int]]:
        """Evaluate once, from an empty cache, each block size ``config``'s run can use that this
        engine has not evaluated since the load (and one token on a draft model), so that no
        measured step pays a kernel's first use (Metal compiles a pipeline per kernel and
        shape). ``before`` is called first when there is anything to do (the dashboard says
        "warming up"). Returns the time it took in ms and the sizes; the next ``run`` records
        both in its header. A conversation's later turn keeps its caches: nothing is done."""
        if self.reuses_cache(config):
            return 0.0, []
        parts: list[tuple[str, Backend, int]] = [("target", self.target, n) for n in block_sizes(config)]
        if self.draft_model is not None and config.mode == "spec" and config.draft.has_model:
            parts.append(("draft", self.draft_model, 1))
        todo = [p for p in parts if (p[0], p[2]) not in self._warm]
        if not todo:
            return 0.0, []
        if before is not None:
            before()
        tokens = self.prepare_prompt(config)[1]
        t0 = time.perf_counter()
        for role, backend, n in todo:
            backend.truncate(0)
            backend.eval((tokens * (n // len(tokens) + 1))[:n], all_logits=n > 1)
            backend.truncate(0)
            self._warm.add((role, n))
        ms = (time.perf_counter() - t0) * 1000.0
        sizes = sorted({n for role, _, n in todo if role == "target"})
        previous_ms, previous_sizes = self._warmup
        self._warmup = (previous_ms + ms, sorted({*previous_sizes, *sizes}))
        self._cache_owner = ""  # the caches hold nothing of a conversation now
        return ms, sizes

    def draft_price(self, config: RunConfig, prompt_tokens: Sequence[int], reuse: bool) -> float:
        """What a drafted token of this engine's draft model costs in target tokens, for a
        cost-aware K: measured once per loaded draft model (``plan.draft_cost_probe``). A
        conversation's later turn does not probe (it would empty the caches the turn keeps):
        it takes the last price, if any (0: none)."""
        if not config.draft.has_model or self.draft_model is None:  # the plan asks only for a cost-aware K
            return 0.0
        if self._draft_priced[0] is not self.draft_model:
            if reuse:
                return 0.0
            self._draft_priced = (self.draft_model, round(self.draft_cost_probe(prompt_tokens), 4))
        return self._draft_priced[1]

    def draft_cost_probe(self, tokens: Sequence[int], reps: int = 3) -> float:
        assert self.draft_model is not None, "a draft price needs a draft model"
        return draft_cost_probe(self.target, self.draft_model, tokens, reps)

    def deterministic_target(self) -> Backend | None:
        """A second context over the target's weights with the batch-invariant settings
        (``--deterministic``), for measuring what they cost; None where no such setting is
        known (MLX). The caller closes it."""
        settings = self.target.batch_invariant_settings()
        return self.target.second_context(settings) if settings is not None else None

    def cost_key(self) -> str:
        """The key of this target's verify-cost curve on this host (``models.cost_curves``)."""
        runtime = self.target.runtime_info()
        return curve_key(self.target.artifacts().sha256, runtime.get("backend", ""),
                         int(runtime.get("n_threads", "0") or 0), int(runtime.get("n_gpu_layers", "0") or 0))

    def cost_curve(self, *, measure: bool = False, n_max: int = 17, context: Sequence[int] = ()) -> tuple[float, ...]:
        """This target's cached verify-cost curve on this host (relative costs; () where none).
        ``measure``: where none is cached at these settings, or the cached one stops short of
        ``n_max``, measure one now and cache it. A run that prices blocks by its seed alone
        must not price them by the curve of another thread count, nor by the built-in one;
        and a run that learns its costs only times the sizes it drafts, so sizes past the
        cached curve would stay priced by the cost model's slope, which on a CPU is several
        times steeper than the measured one past n = 10, and long copies would never draft
        them."""
        curve = load_curve(self.cost_key())
        if measure and context and _short(curve, n_max):
            merge_run_curve(self.cost_key(), measure_seed(self.target, context, n_max))
            curve = load_curve(self.cost_key())
        return tuple(curve.relative) if curve is not None else ()

    def _measures_cost(self, config: RunConfig) -> bool:
        """Whether ``config``'s run starts from the cached curve, measured where it falls short
        (a cost-aware K on fresh caches)."""
        return config.mode == "spec" and config.draft.cost_aware and not self.reuses_cache(config)

    def measure_cost(self, config: RunConfig, *, before: Callable[[], object] | None = None) -> None:
        """Measure now, after calling ``before``, the verify-cost curve ``config``'s run would
        otherwise measure as it starts (seconds, once per model and thread count): the
        dashboard says so while it waits rather than show a first step that takes seconds."""
        n_max = config.draft.k_range[1] + 1
        if not self._measures_cost(config) or not _short(load_curve(self.cost_key()), n_max):
            return
        if before is not None:
            before()
        self.cost_curve(measure=True, n_max=n_max, context=self.prepare_prompt(config)[1])

    def plan(self, config: RunConfig, prompt: tuple[str, list[int]] | None = None, pricing: Pricing | None = None) -> RunPlan:
        """The plan ``config``'s run executes (``engine.plan``), decided once: what prices its
        blocks (the cost curve a cost-aware K starts from and a draft model's price: what
        ``pricing`` gives, the rest measured), the drafter, the draft length and the policy. Call after
        the warm-up: pricing a draft model evaluates on it. From here on the caches belong to
        this run's conversation."""
        prompt_text, prompt_tokens = prompt or self.prepare_prompt(config)
        reuse = self.reuses_cache(config)
        pricing = pricing or Pricing()
        measure = not pricing.seed and self._measures_cost(config)  # before this run owns the caches
        self._cache_owner = config.conversation
        if config.mode == "spec" and config.draft.cost_aware:  # what was not given is measured
            seed = pricing.seed or self.cost_curve(measure=measure, n_max=config.draft.k_range[1] + 1, context=prompt_tokens)
            pricing = Pricing(seed=seed, draft_cost=pricing.draft_cost or self.draft_price(config, prompt_tokens, reuse))
        drafter = self.make_drafter(config, reuse=reuse)
        return RunPlan(
            config=config, pricing=pricing, prompt_text=prompt_text, prompt_tokens=prompt_tokens, reuse=reuse,
            drafter=drafter, policy=make_policy(config, drafter),
            draft_length=length_policy(config.draft.length, pricing, self.proposal_prices(config, drafter)) if drafter is not None else None,
        )

    def proposal_prices(self, config: RunConfig, drafter: Drafter) -> dict[str, tuple[float, float]] | None:
        """What proposals of this target and ``drafter`` were worth in earlier runs here
        (``engine/host/proposal_prices.py``): the calibration a cost-aware K starts from. None
        (the static prior) for a run priced by its seed alone (``CostAware.learn`` off:
        ``--deterministic``, tune's replays): its blocks then follow from its output and its
        recorded seed, whatever earlier runs left."""
        length = config.draft.length
        if not isinstance(length, CostAware) or not length.learn:
            return None
        return load_prices(prices_key(self.target.artifacts().sha256, drafter.name))

    def header(self, config: RunConfig, prompt_text: str, prompt_tokens: list[int]) -> Header:
        artifacts = Artifacts(
            target=msgspec.structs.replace(self.target.artifacts(), origin=self.target_origin),
            draft=self.draft_model.artifacts() if self.draft_model is not None and config.mode == "spec" else None,
            runtime=self.target.runtime_info(),
            host=host_info(),
        )
        runtime = artifacts.runtime
        artifacts.offload = {k: runtime.pop(k) for k in ("gpu_offload_supported", "n_gpu_layers", "n_threads") if k in runtime}
        return Header(
            spectui_version=__version__,
            started_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
            config=config,
            artifacts=artifacts,
            prompt_text=prompt_text,
            prompt_tokens=prompt_tokens,
        )

    def run(
        self,
        config: RunConfig | None = None,
        *,
        stop: threading.Event | None = None,
        memory_interval_s: float | None = 0.25,
        pricing: Pricing | None = None,
    ) -> Generator[Event, None, None]:
        """Validate, then yield the session's events. Bad input raises before the first event.
        ``pricing``: what prices a cost-aware K's blocks, handed in rather than measured (a
        test's or tune's curve; what it leaves empty is measured); the header records it.

        A memory sampler thread reads the process and system every ``memory_interval_s``
        (None turns it off); its samples join the stream between steps, so the stream stays
        one ordered sequence whoever consumes it, and one sample is taken at the start and
        one just before ``End``.
        """
        config = config or self.config
        config.validate()
        prompt = self.prepare_prompt(config)
        batch_noise = self.calibrate(config, prompt_tokens=len(prompt[1]))
        self.warm_up(config)  # nothing when a dashboard warmed this engine for the run already
        if pricing is not None:
            pricing.validate()
        plan = self.plan(config, prompt, pricing)
        header = self.header(plan.config, *prompt)  # fingerprints: not the model's time
        header.pricing = plan.pricing
        header.batch_noise = batch_noise
        header.warmup_ms, header.warmup_sizes = round(self._warmup[0], 3), self._warmup[1]
        self._warmup = (0.0, [])
        drafter, draft_length, policy = plan.drafter, plan.draft_length, plan.policy
        prompt_tokens = plan.prompt_tokens
        t0 = time.perf_counter_ns()
        yield header
        samples: deque[MemorySample] = deque()  # appended by the sampler thread, drained here
        sampler = MemorySampler(t0, samples.append, memory_interval_s) if memory_interval_s else None
        if sampler is not None:
            sampler.start()
        output: list[int] = []  # every emitted token: the error End's count, the suffix memory
        end: End | None = None
        try:
            for event in plan.decode(self.target, t0_ns=t0, stop=stop):
                while samples:
                    sample = samples.popleft()
                    if policy is not None:
                        policy.observe_memory(sample)
                    yield sample
                if type(event) is End:
                    end = event
                    break
                if type(event) is Step:
                    output.extend(event.tokens)
                yield event
        except Exception as exc:  # noqa: BLE001 - an engine failure ends the session, it does not lose it
            end = End(
                t_us=(time.perf_counter_ns() - t0) // 1000,
                reason="error",
                n_tokens=len(output),
                error=f"{type(exc).__name__}: {exc}",
            )
        finally:
            if sampler is not None:
                sampler.stop()
        learned = draft_length.learned() if draft_length is not None else None
        if learned is not None and learned.costs:  # what the draft length chose to store
            merge_run_curve(self.cost_key(), learned.costs)
        if learned is not None and learned.prices is not None and drafter is not None:
            save_prices(prices_key(self.target.artifacts().sha256, drafter.name), learned.prices)
        if drafter is not None:  # a drafter that learns from outputs (suffix memory) takes them
            drafter.finish([*prompt_tokens, *output])
        if sampler is not None:
            samples.append(sampler.sample_now())
            while samples:
                yield samples.popleft()
        if end is not None:
            yield end


def _short(curve: CostCurve | None, n_max: int) -> bool:
    """A cached curve to measure: none, or one of runs' that stops before ``n_max`` (tune's
    curve, measured on purpose, stays as it is)."""
    return curve is None or (curve.source != "tune" and len(curve.relative) < n_max)
