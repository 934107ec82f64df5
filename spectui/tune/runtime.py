"""``spectui tune --runtime llama-server``: a runtime's own speculative settings, measured.

The embedded tune predicts from the verify-cost curve and replays spectui's drafters over the
target's outputs; a runtime's methods are its own code, which spectui cannot replay, so what
tune says about them comes from runs alone. A short pass runs the runtime's n-gram methods at
the K values each reads (``spectui.runtime.methods``: n-gram size for ngram-simple/-map-k/-map-k4v,
n-max for ngram-mod, none for ngram-cache, which runs once at its fixed 8) and at the runtime's
own default, over one prompt per tier and a small token budget, each run paired with a run of
the runtime's own AR on the same prompt just before or after it (a ratio of decode tok/s, as the
sweep's speedup; the order alternates, so a drift in the machine's speed lands on both sides).
Each setting is one server (``RuntimeEngine.fits``) and the AR server stays up beside it, so a
server starts once per setting and round, not once per run, at the price of two copies of the
weights in memory while tune runs.

What tune prints for a setting is the command line the launcher started it with
(``spectui.runtime.llama_server.LaunchSettings`` and ``RuntimeMethod.args``: the flags each method
reads), minus the loopback host and port spectui picked: the measured command, to paste.
Greedy runs of one server at one thread with flash attention on are exact; the report counts
the runs whose output equals AR's, so a setting that changes the text shows.
"""

from __future__ import annotations

import math
import shlex
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import msgspec

from spectui.config import RunConfig
from spectui.drafting import Runtime
from spectui.errors import SpectuiError
from spectui.format import model_name, num, text_table
from spectui.metrics.same_text import Output, speedup
from spectui.metrics.stats import summarize
from spectui.prompts import PromptSpec
from spectui.recording.schema import End, Event, Header, Step
from spectui.runtime.methods import METHODS
from spectui.sessions.open import EngineCache, EngineFactory, open_engine
from spectui.sessions.protocol import EngineProtocol

#: K values the pass runs for a method that reads one (beside the runtime's own default)
TUNE_KS = (4, 8)
#: the token budget of each run unless --max-tokens says otherwise: enough blocks for a ratio,
#: small enough that the whole pass takes minutes, not tens of them
RUNTIME_TOKENS = 64
#: a setting must beat the runtime's AR by this much to be advised (noise on a shared CPU)
GAIN = 1.03
#: the runtimes whose settings tune measures, with the methods it runs by default
MEASURED_METHODS: dict[str, tuple[str, ...]] = {"llama-server": tuple(n for n in METHODS if n.startswith("ngram"))}
#: what the launcher adds for itself and a person deploying would choose: left off the command to paste
_LAUNCHER_ONLY = {"--host", "--port"}

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Candidate:
    """One runtime setting: its method (a comma list runs in the runtime's priority) and K
    (None: the runtime's own draft length)."""

    method: str  # "" for AR
    k: int | None = None

    @property
    def ar(self) -> bool:
        return not self.method

    def label(self) -> str:
        if self.ar:
            return "AR"
        fixed = [METHODS[n].fixed_k for n in self.method.split(",") if n in METHODS and METHODS[n].fixed_k]
        if self.k is not None:
            return f"{self.method} K={self.k}"
        return f"{self.method} K={fixed[0]} (fixed)" if fixed else f"{self.method} (its default K)"

    def config(self, base: RunConfig, spec: PromptSpec, max_tokens: int) -> RunConfig:
        draft = base.draft if self.ar else base.draft.drafting_with(Runtime(method=self.method), fixed_k=self.k)
        config = msgspec.structs.replace(
            base, mode="ar" if self.ar else "spec", draft=draft, prompt=spec.text, prompt_tier=spec.tier, prompt_name=spec.name,
            prompt_check=spec.check, max_tokens=min(spec.max_tokens, max_tokens),
        )
        config.validate()
        return config


def reads_k(method: str) -> bool:
    return any(METHODS[n].k_flag for n in method.split(",") if n in METHODS)


def candidates(methods: Sequence[str], ks: Sequence[int], *, runtime_default: bool = True) -> list[Candidate]:
    """Every method at each K of ``ks`` and (``runtime_default``) at the runtime's own K; a
    method that reads no K once."""
    out = []
    for method in methods:
        if not reads_k(method):
            out.append(Candidate(method))
            continue
        if runtime_default:
            out.append(Candidate(method))
        out += [Candidate(method, k) for k in ks]
    return list(dict.fromkeys(out))


def flag_value(command_line: str, flag: str) -> str:
    """The value of ``flag`` on a command line ("" when absent)."""
    words = shlex.split(command_line)
    return next((words[i + 1] for i, w in enumerate(words[:-1]) if w == flag), "")


def paste_command(command_line: str) -> str:
    """The launcher's command line without the host and port it picked for itself."""
    words, out = shlex.split(command_line), []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in _LAUNCHER_ONLY:
            skip = True
        else:
            out.append(word)
    return shlex.join(out)


@dataclass
class Measured:
    """One setting over the pass: its runs' ratios to AR per prompt, what it drafted and kept,
    how many outputs equal AR's, and the command it ran as."""

    candidate: Candidate
    command: str = ""
    ratios: dict[str, list[float]] = field(default_factory=dict)  # prompt -> a ratio per round
    drafted_on: dict[str, int] = field(default_factory=dict)  # prompt -> tokens drafted over its rounds
    drafted: int = 0
    accepted: int = 0
    same_output: int = 0
    runs: int = 0

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else math.nan

    def speedup(self, prompts: Iterable[str] | None = None) -> float:
        """Median ratio over the runs of ``prompts`` (default: every prompt)."""
        keys = self.ratios if prompts is None else [p for p in prompts if p in self.ratios]
        values = [v for p in keys for v in self.ratios[p] if not math.isnan(v)]
        return statistics.median(values) if values else math.nan


@dataclass
class RuntimeTune:
    """What the pass measured: the runtime, the prompts (name -> tier), and every setting, AR first."""

    runtime: str
    version: str
    model: str
    threads: str
    max_tokens: int
    rounds: int
    prompts: dict[str, str]
    settings: list[Measured]
    elapsed_s: float = 0.0

    @property
    def tiers(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for name, tier in self.prompts.items():
            out.setdefault(tier, []).append(name)
        return out

    def best(self, tier: str) -> tuple[Measured, Measured | None]:
        """The setting to use on ``tier`` (AR when none that drafted there beats it by ``GAIN``)
        and the fastest speculative setting that drafted there."""
        names = self.tiers[tier]
        # a setting that drafted nothing there ran as AR: its ratio is the machine's noise
        spec = [m for m in self.settings
                if not m.candidate.ar and not math.isnan(m.speedup(names)) and any(m.drafted_on.get(p) for p in names)]
        top = max(spec, key=lambda m: m.speedup(names), default=None)
        if top is not None and top.speedup(names) >= GAIN:
            return top, top
        return self.settings[0], top


def measure(
    base: RunConfig, specs: Sequence[PromptSpec], cands: Sequence[Candidate], *, rounds: int, max_tokens: int,
    progress: Progress, load_engine: EngineFactory | None = None,
) -> RuntimeTune:
    """Every candidate (``candidates``) on every prompt, ``rounds`` times, each run next to an
    AR run of the same prompt (the order alternating, so a drift in speed lands on both
    sides). Every configuration is checked (``RunConfig.validate``) before a server starts."""
    measured = [Measured(Candidate("")), *(Measured(c) for c in cands)]
    ar_configs = [Candidate("").config(base, s, max_tokens) for s in specs]
    plan = [[m.candidate.config(base, s, max_tokens) for s in specs] for m in measured[1:]]
    engines = EngineCache(load_engine)
    ar_engine: EngineProtocol | None = None
    ar = measured[0]
    command = version = ""
    started = time.monotonic()
    try:
        # the AR server stays up beside each setting's (twice the model's memory while tune
        # runs): a server a run would cost a restart for every pair
        ar_engine = (load_engine or open_engine)(ar_configs[0])
        for rnd in range(rounds):
            for i, (m, configs) in enumerate(zip(measured[1:], plan)):
                for ar_config, config in zip(ar_configs, configs):
                    progress(f"{m.candidate.label()} on {config.prompt_name} (round {rnd + 1}/{rounds})")
                    engine = engines.get(config)
                    first, second = ((ar_engine, ar_config), (engine, config))[:: 1 if (rnd + i) % 2 == 0 else -1]
                    runs = {id(c): _read(list(e.run(c))) for e, c in (first, second)}
                    (ar_events, ar_tokens), (events, tokens) = runs[id(ar_config)], runs[id(config)]
                    for who, evs in ((ar, ar_events), (m, events)):
                        props = _props(evs)
                        who.command = who.command or paste_command(props.get("runtime.command_line", ""))
                        command = command or props.get("runtime.command_line", "")
                        version = version or props.get("runtime.version", "")
                    s = summarize(events)
                    # over the same text: outputs that part (a warm server's near-tie) are timed up to the parting
                    ratio = speedup(Output.of(events), Output.of(ar_events), greedy=ar_config.sampling.greedy)
                    m.ratios.setdefault(config.prompt_name, []).append(ratio)
                    m.drafted += s.drafted
                    m.drafted_on[config.prompt_name] = m.drafted_on.get(config.prompt_name, 0) + s.drafted
                    m.accepted += s.accepted
                    m.runs += 1
                    m.same_output += int(tokens == ar_tokens)
                    ar.runs += 1
    finally:
        engines.close()
        if ar_engine is not None:
            ar_engine.close()
    return RuntimeTune(
        runtime=base.backend.name, version=version, model=model_name(flag_value(command, "-m")),
        threads=flag_value(command, "-t"), max_tokens=max_tokens, rounds=rounds, prompts={s.name: s.tier for s in specs},
        settings=measured, elapsed_s=time.monotonic() - started,
    )


def _read(events: list[Event]) -> tuple[list[Event], list[int]]:
    """The run's events and output tokens; a run that failed is one line."""
    end = events[-1] if events else None
    if not isinstance(end, End) or end.reason == "error" or type(events[0]) is not Header:
        raise SpectuiError(f"a runtime run failed: {end.error if isinstance(end, End) and end.error else 'no end record'}")
    return events, [t for e in events if type(e) is Step for t in e.tokens]


def _props(events: Sequence[Event]) -> dict[str, str]:
    """What the runtime's header recorded about it (``runtime.command_line``, ``runtime.version``)."""
    header = events[0]
    server = header.artifacts.server if isinstance(header, Header) else None
    return dict(server.props) if server is not None else {}


# -- what tune prints -----------------------------------------------------------------------------


def _x(value: float) -> str:
    return num(value, ".2f", "x")


def measured_line(t: RuntimeTune) -> str:
    n = len(t.settings) - 1
    return (f"measured: {len(t.prompts)} prompt{'s' * (len(t.prompts) != 1)} (one per tier) x {n} setting{'s' * (n != 1)}"
            f" x {t.rounds} round{'s' * (t.rounds != 1)}, at most {t.max_tokens} tokens each, greedy; each run's decode tok/s"
            f" over a run of the runtime's own AR on the same prompt next to it ({t.elapsed_s:.0f} s)")


def format_text(t: RuntimeTune) -> str:
    tiers = t.tiers
    head = f"spectui tune: {t.runtime} {t.version} · {t.model} · {t.threads or '?'} thread{'' if t.threads == '1' else 's'}"
    rows = []
    for m in t.settings[1:]:
        same = f"{m.same_output}/{m.runs}"
        rows.append([m.candidate.label(), *(_x(m.speedup(names)) for names in tiers.values()), _x(m.speedup()),
                     num(m.acceptance, ".2f"), same])
    table = text_table(["setting", *tiers, "all", "accepted", "same as AR"], rows,
                       right=set(range(1, len(tiers) + 4)), rules_before={0})
    out = [head, measured_line(t), "", "speedup over the runtime's AR (median of the runs)", table, ""]
    out.append("settings to use (the measured command; llama-server picks its port unless --port)")
    for tier in tiers:
        best, top = t.best(tier)
        if best.candidate.ar:
            why = f"best {top.candidate.label()} {_x(top.speedup(tiers[tier]))}" if top is not None else "no setting drafted on these prompts"
            out.append(f"  {tier}: AR: no setting beat AR by {GAIN - 1:.0%} ({why})")
        else:
            out.append(f"  {tier}: {best.candidate.label()}: {_x(best.speedup(tiers[tier]))} AR, accepted {num(best.acceptance, '.2f')}")
        out.append(f"      {best.command or '(not recorded)'}")
    differ = [m.candidate.label() for m in t.settings[1:] if m.same_output < m.runs]
    if differ:
        out.append("")
        out.append(f"  output differs from AR in some runs of: {', '.join(differ)} (at more than one thread a block can"
                   " part from AR at a near-tie; spectui diff tells a near-tie from a defect)")
    return "\n".join(out)


def to_json(t: RuntimeTune) -> dict:
    tiers = t.tiers

    def finite(v: float) -> float | None:
        return v if math.isfinite(v) else None

    return {
        "runtime": t.runtime, "version": t.version, "model": t.model, "threads": t.threads, "max_tokens": t.max_tokens,
        "rounds": t.rounds, "prompts": t.prompts, "elapsed_s": t.elapsed_s, "measured": measured_line(t),
        "settings": [{
            "label": m.candidate.label(), "method": m.candidate.method or None, "k": m.candidate.k, "command": m.command,
            "speedup": finite(m.speedup()), "speedup_by_tier": {tier: finite(m.speedup(names)) for tier, names in tiers.items()},
            "ratios": {p: [finite(v) for v in vs] for p, vs in m.ratios.items()},
            "drafted": m.drafted, "drafted_by_prompt": m.drafted_on, "accepted": m.accepted, "acceptance": finite(m.acceptance),
            "same_output_as_ar": m.same_output, "runs": m.runs,
        } for m in t.settings],
        "best": {tier: _best_json(t, tier, names) for tier, names in tiers.items()},
    }


def _best_json(t: RuntimeTune, tier: str, names: list[str]) -> dict:
    best, _ = t.best(tier)
    speedup = 1.0 if best.candidate.ar else best.speedup(names)
    return {"label": best.candidate.label(), "method": best.candidate.method or None, "k": best.candidate.k,
            "command": best.command, "speedup": speedup if math.isfinite(speedup) else None}
