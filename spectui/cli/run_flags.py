"""The run flags (every knob of one session: ``run``, ``compare``, ``sweep``, ``soak``,
``quality``, ``chat`` and ``workload`` take them) and the ``RunConfig`` they describe: the
prompt (text, file or name), the drafting, sampling, backend, fallback policy and the declared
envelope, and the model names resolved to paths.

Light on purpose: ``spectui --help`` imports this through every family, so only the standard
library, ``msgspec`` (via ``spectui.config``), the backend and drafter registries (names only:
no backend's library loads) and ``spectui.errors`` load at the top.
"""

from __future__ import annotations

import argparse
import os
import sys

import msgspec

from spectui.config import (
    RUNTIME_METHODS,
    RUNTIMES,
    BackendConfig,
    EnvelopeConfig,
    PolicyConfig,
    RunConfig,
    SamplingConfig,
)
from spectui.drafting import DEFAULT_K, RUNTIME_PREFIX, CostAware, DraftConfig, Lookup, Model, Runtime
from spectui.engine.backends import backend_kind, backend_names
from spectui.engine.drafters import drafter_kind, drafter_kinds, find_drafter, parse_drafter
from spectui.engine.drafters.options import with_options
from spectui.errors import SpectuiError


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Every knob of one session: run, compare (live), sweep, soak and quality take them all."""
    d_run, d_samp, d_back, d_pol = RunConfig(), SamplingConfig(), BackendConfig(), PolicyConfig()
    d_lookup, d_limits = Lookup(), CostAware()
    backends = [backend_kind(name) for name in backend_names()]
    p.add_argument("--backend", choices=[b.name for b in backends], default=d_back.name,
                   help="the engine that runs the model: " + ", ".join(f"{b.name} ({b.label})" for b in backends)
                        + f" (default {d_back.name})")
    p.add_argument("--target", default="", metavar="MODEL",
                   help="the model to run: a GGUF path, or a name that `spectui models` lists (default: the embedded SmolLM2-135M)")
    # default None: "spec" for the embedded engine, "ar" with --server (whose drafting, if
    # any, is the server's own configuration: --mode spec only labels the run)
    p.add_argument("--mode", choices=["ar", "spec"], default=None, help=f"default: {d_run.mode}; ar with --server")
    lookups = drafter_kinds()
    p.add_argument("--runtime", choices=list(RUNTIMES), default=None,
                   help="measure a runtime's own speculation: spectui starts it on a free loopback port, runs the "
                        "session through it and stops it (its methods: --draft runtime:METHOD; mlx-lm: mlx_lm.server, "
                        "whose one method is runtime:draft-model)")
    p.add_argument("--llama-server", metavar="PATH", default="",
                   help="--runtime llama-server: this binary (default: $SPECTUI_LLAMA_SERVER, $PATH, then "
                        "`spectui runtime build`'s from the installed llama-cpp-python's llama.cpp)")
    p.add_argument("--draft", default=None,
                   help="; ".join(f"'{k.name}' ({k.summary or k.label})" for k in lookups)
                        + f"; or a draft GGUF path; with --runtime, 'runtime:METHOD' (llama-server's --spec-type, "
                          f"default {default_runtime_method('llama-server')}; mlx-lm's draft-model) (default {DraftConfig().flag})")
    p.add_argument("--lookup", type=int, default=0, metavar="N",
                   help="--runtime: the key length a runtime's n-gram methods match (llama-server's --spec-ngram-*-size-n, "
                        "ngram-mod's n-match; default: the runtime's own)")
    p.add_argument("--n-min", type=int, default=None, metavar="N",
                   help="--runtime: the least draft length a runtime's method keeps (ngram-mod's --spec-ngram-mod-n-min, "
                        "a draft model's --spec-draft-n-min; default: the runtime's own)")
    p.add_argument("--draft-model", metavar="FILE", default="",
                   help="--runtime: the draft GGUF of a runtime's model drafter (runtime:draft-simple, draft-eagle3, ...; "
                        "mlx-lm's runtime:draft-model also takes an mlx-lm directory)")
    p.add_argument("--chain", choices=[k.name for k in lookups], default=None,
                   help="with a draft model: ask this free drafter first and the model only where no match pays "
                        "and the model's own cost is repaid (cost-aware K unless --k fixes one)")
    p.add_argument("--no-draft-memory", action="store_true",
                   help="suffix drafting: this request only, no memory of earlier outputs (kept under the user cache dir)")
    p.add_argument("--draft-option", action="append", default=None, metavar="KEY=VALUE",
                   help="an option the model-free drafter (--draft, or --chain) declares, repeatable: "
                        + "; ".join(f"{k.name}: {', '.join(o.name for o in k.options)}" for k in lookups if k.options)
                        + "; a plugin's as its docs say")
    p.add_argument("--k", type=int, default=None,
                   help=f"a fixed draft length K (default: cost-aware for n-gram drafting, {DEFAULT_K} for a draft model)")
    p.add_argument("--adaptive-k", action="store_true",
                   help="choose K each step from the measured verify cost and recent acceptance (0 = no draft when none pays)")
    p.add_argument("--learned-k", action="store_true",
                   help="n-gram or suffix drafting: a cost-aware K whose chances are learned per position in this run, "
                        "keyed by how long the copy has held (experimental; the default prices by proposal class)")
    p.add_argument("--p-min", type=float, default=0.0,
                   help="draft model confidence: stop a draft where the draft's top token probability is below P (0 = off)")
    p.add_argument("--k-min", type=int, default=d_limits.k_min, help=f"the shortest draft a chosen K may be (default {d_limits.k_min})")
    p.add_argument("--k-max", type=int, default=d_limits.k_max, help=f"the longest draft a chosen K may be (default {d_limits.k_max})")
    p.add_argument("--ngram-min", type=int, default=d_lookup.ngram_min,
                   help=f"n-gram drafting: the fewest recent tokens looked up in the text so far (default {d_lookup.ngram_min})")
    p.add_argument("--ngram-max", type=int, default=d_lookup.ngram_max,
                   help=f"n-gram drafting: the most recent tokens looked up in the text so far (default {d_lookup.ngram_max})")
    p.add_argument("--draft-temperature", type=float, default=None, help="draft model's own temperature")
    p.add_argument(
        "--fallback",
        choices=["on", "off"],
        default=None,
        help="runtime fallback policy: shrink K, lighter drafter, AR, probe back (default: on in the dashboard, off headless)",
    )
    p.add_argument("--fallback-floor", type=float, default=d_pol.acceptance_floor, help="acceptance floor of the fallback policy")
    p.add_argument("--fallback-window", type=int, default=d_pol.window_blocks, help="drafted blocks per acceptance window")
    p.add_argument("--temperature", type=float, default=d_samp.temperature, help="0 = greedy")
    p.add_argument("--top-k", type=int, default=d_samp.top_k, help="sampling: only the K most likely tokens (0 = no limit)")
    p.add_argument("--top-p", type=float, default=d_samp.top_p,
                   help="sampling: only the most likely tokens whose probabilities add up to P (1 = no limit)")
    p.add_argument("--seed", type=int, default=d_samp.seed, help=f"sampling: the random seed; the same seed repeats a run (default {d_samp.seed})")
    p.add_argument("--max-tokens", type=int, default=None, help=f"token budget (default: the prompt's ceiling, else {d_run.max_tokens})")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--prompt", default=None, help="prompt text")
    src.add_argument("--prompt-file", default=None, help="read the prompt from a file ('-' for stdin)")
    src.add_argument("--prompt-name", default=None, help="a prompt from prompts/ by name (its tier and token ceiling come along)")
    p.add_argument("--raw", action="store_true", help="send the prompt as is, without the chat template")
    p.add_argument("--system", default="", help="system prompt (chat: the template's system message; --raw: text before the prompt)")
    p.add_argument("--ctx", type=int, default=d_back.n_ctx, help="context size in tokens")
    p.add_argument("--batch", type=int, default=d_back.n_batch, help="prompt evaluation batch size")
    p.add_argument("--threads", type=int, default=d_back.n_threads, help="CPU threads (0 = all cores)")
    p.add_argument("--gpu-layers", type=int, default=d_back.n_gpu_layers, help="layers to offload (-1 = all)")
    p.add_argument("--flash-attn", choices=("auto", "on", "off"), default=None, help="llama.cpp flash attention (default auto)")
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="batch-invariant settings (llama.cpp: one thread, flash attention on) and a K that ignores timings:"
        " greedy speculative output equals AR at any context length, at the cost of the other cores",
    )
    p.add_argument(
        "--server",
        metavar="URL",
        default=None,
        help="measure a running OpenAI-compatible server (llama-server, llama_cpp.server, mlx_lm.server), not the embedded engine",
    )
    p.add_argument("--api-key-env", metavar="VAR", default="", help="environment variable holding the server's API key (never recorded)")
    add_envelope_arguments(p)


def add_envelope_arguments(p: argparse.ArgumentParser, *, override: bool = False) -> None:
    """The declared memory and machine envelope (``EnvelopeConfig``), recorded in the header.
    ``override``: for ``gate``, every default is None (each recording's own envelope)."""
    d = EnvelopeConfig()
    g = p.add_argument_group(
        "envelope: the machine limits a run must stay within (memory, swap, pressure, heat, power)"
        + ("; these override the recordings' own" if override else "")
    )

    def default(value: float | None, text: str) -> tuple[float | None, str]:
        return (None, "as recorded") if override else (value, text)

    for flag, kind, value, text, about in (
        ("--min-headroom-mb", float, None, "10/24 of host memory", "headroom floor, MiB"),
        ("--max-swap-in-mb", float, d.max_swap_in_mib, f"{d.max_swap_in_mib:g}", "swap-ins allowed, MiB"),
        ("--max-red-pressure-s", float, d.max_red_pressure_s, f"{d.max_red_pressure_s:g}", "longest red (critical) memory pressure, s"),
        ("--max-throttle-events", int, d.max_throttle_events, str(d.max_throttle_events), "thermal throttle events allowed"),
        ("--max-other-cpu", float, d.max_other_cpu, f"{d.max_other_cpu:g}", "other processes' CPU share before a run is flagged"),
    ):
        value, text = default(value, text)
        g.add_argument(flag, type=kind, default=value, metavar="X", help=f"{about} (default {text})")
    if not override:
        g.add_argument("--allow-battery", action="store_true", help="do not fail on battery power or low-power mode")


def envelope_from_args(args: argparse.Namespace, *, resolve: bool = True) -> EnvelopeConfig:
    """The envelope the flags declare; an unset headroom floor is 10/24 of this host's memory."""
    import psutil

    from spectui.metrics.envelope import resolve_envelope

    d = EnvelopeConfig()
    given = getattr(args, "min_headroom_mb", None)
    env = EnvelopeConfig(
        min_headroom_mib=given if given is not None else 0.0,
        max_swap_in_mib=getattr(args, "max_swap_in_mb", d.max_swap_in_mib),
        max_red_pressure_s=getattr(args, "max_red_pressure_s", d.max_red_pressure_s),
        max_throttle_events=getattr(args, "max_throttle_events", d.max_throttle_events),
        max_other_cpu=getattr(args, "max_other_cpu", d.max_other_cpu),
        require_ac_power=not getattr(args, "allow_battery", False),
    )
    env.validate()
    return env if given is not None or not resolve else resolve_envelope(env, psutil.virtual_memory().total)


def gave_prompt(args: argparse.Namespace) -> bool:
    """Whether the user chose a prompt (text, file or name) rather than a command's own set."""
    return args.prompt is not None or args.prompt_file is not None or args.prompt_name is not None


def config_from_args(args: argparse.Namespace, *, fallback_default: bool = False) -> RunConfig:
    """The run configuration the flags describe, validated; ``fallback_default`` is whether
    the fallback policy is on when ``--fallback`` is not given (the dashboard: yes;
    measurements: no)."""
    from spectui.prompts import DEFAULT_PROMPT, find_prompt, parse_prompt

    tier = name = check = ""
    ceiling = RunConfig().max_tokens
    # --host: model names and paths are the node's, resolved there (spectui.cli.node.prepare)
    on_node = bool(getattr(args, "host", None) or getattr(args, "hosts", None))
    if args.prompt_name is not None:
        spec = find_prompt(args.prompt_name)
        prompt, tier, ceiling, name, check = spec.text, spec.tier, spec.max_tokens, spec.name, spec.check
    elif args.prompt_file is not None:
        prompt = _read_prompt_file(args.prompt_file)
        if prompt.startswith("#"):  # a prompts/-style file with a metadata header
            spec = parse_prompt(prompt, os.path.basename(args.prompt_file).rsplit(".", 1)[0], args.prompt_file)
            prompt, tier, ceiling, check = spec.text, spec.tier, spec.max_tokens, spec.check
    else:
        prompt = DEFAULT_PROMPT if args.prompt is None else args.prompt
    draft = draft_from_args(args, on_node)
    config = RunConfig(
        target=args.target if on_node else model_path(args.target),  # a catalogue name (spectui models) or a path
        mode=args.mode or ("ar" if args.server else RunConfig().mode),
        prompt=prompt,
        prompt_tier=tier,
        prompt_name=name,
        prompt_check=check,  # canonical (spectui.quality): recordings grade without the prompt file
        chat=not args.raw,
        system=args.system,
        max_tokens=ceiling if args.max_tokens is None else args.max_tokens,
        sampling=SamplingConfig(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed),
        draft=draft,
        backend=BackendConfig(
            name="server" if args.server else args.runtime or args.backend,
            n_ctx=args.ctx,
            n_batch=args.batch,
            # deterministic: the settings measured batch-invariant (spectui.engine.host.noise); a
            # contradicting --threads or --flash-attn is refused by validate in one line
            n_threads=1 if args.deterministic and args.threads == 0 else args.threads,
            flash_attn=args.flash_attn or ("on" if args.deterministic else "auto"),
            deterministic=args.deterministic,
            n_gpu_layers=args.gpu_layers,
            server_url=args.server or "",
            api_key_env=args.api_key_env,
            runtime_binary=args.llama_server,
        ),
        policy=PolicyConfig(
            enabled=fallback_default if args.fallback is None else args.fallback == "on",
            acceptance_floor=args.fallback_floor,
            window_blocks=args.fallback_window,
        ),
        # on a node, its own memory sets the undeclared headroom floor (spectui.cli.node)
        envelope=envelope_from_args(args, resolve=not on_node),
    )
    config.validate()
    return config


def draft_from_args(args: argparse.Namespace, on_node: bool) -> DraftConfig:
    """The drafting the flags ask for, typed: the drafter ``--draft`` names with the flags that
    belong to its kind (a flag for another kind is one line), its length by the one rule
    (``DraftConfig.drafting_with``)."""
    flag = draft_source(args, on_node)
    drafter = parse_drafter(flag)
    if args.chain and not isinstance(drafter, Model):
        raise SpectuiError(f"a drafter chain is ngram or suffix in front of a draft model (--draft MODEL.gguf --chain ngram), "
                           f"got --chain {args.chain} with --draft {flag}")
    if not isinstance(drafter, Runtime) and args.lookup:
        raise SpectuiError("--lookup sets a runtime's n-gram key length; spectui's own n-gram drafter takes --ngram-min/--ngram-max")
    if not isinstance(drafter, Runtime) and getattr(args, "n_min", None) is not None:
        raise SpectuiError("--n-min sets a runtime method's least draft length (with --draft runtime:METHOD)")
    if not isinstance(drafter, Runtime) and args.draft_model:
        raise SpectuiError("--draft-model is a runtime method's draft (with --draft runtime:draft-simple); "
                           "spectui's own loop takes its draft model as --draft FILE.gguf")
    base = DraftConfig(drafter=Lookup(ngram_min=args.ngram_min, ngram_max=args.ngram_max, memory=not args.no_draft_memory),
                       length=CostAware(k_min=args.k_min, k_max=args.k_max, learn=not args.deterministic,
                                        rule="learned" if getattr(args, "learned_k", False) else "priced"))
    draft = base.drafting_with(drafter, fixed_k=args.k, cost_aware=args.adaptive_k, p_min=args.p_min, chain=args.chain or "")
    if getattr(args, "learned_k", False) and (args.k is not None or draft.has_model or not draft.cost_aware):
        raise SpectuiError("--learned-k learns where a lookup's copies end: with n-gram or suffix drafting, and no --k")
    chosen = draft.drafter
    if isinstance(chosen, Model):
        chosen = msgspec.structs.replace(chosen, temperature=args.draft_temperature)
    elif isinstance(chosen, Runtime):
        model = model_path(args.draft_model) if args.draft_model and not on_node else args.draft_model
        n_min = getattr(args, "n_min", None)
        if n_min is not None and n_min < 0:
            raise SpectuiError(f"--n-min must be 0 or more (got {n_min})")
        chosen = msgspec.structs.replace(chosen, draft_model=model, lookup=args.lookup, n_min=-1 if n_min is None else n_min)
    draft = msgspec.structs.replace(draft, drafter=chosen)
    pairs = getattr(args, "draft_option", None)
    return with_draft_options(draft, pairs) if pairs else draft


def with_draft_options(draft: DraftConfig, pairs: list[str]) -> DraftConfig:
    """``draft`` with ``--draft-option KEY=VALUE`` ``pairs`` set on its model-free drafter (or
    the one chained in front of its model), parsed against what that drafter's kind declares:
    the one place their text is read; a run, a recording and the engine see typed values."""
    lookup = draft.lookup_part
    if lookup is None:
        raise SpectuiError(f"--draft-option sets an option of a model-free drafter (--draft NAME, or --chain NAME in front "
                           f"of a draft model); --draft {draft.flag} takes none")
    kind = drafter_kind(lookup.name)
    lookup = with_options(kind.name, kind.options, lookup, pairs)
    d = draft.drafter
    return msgspec.structs.replace(draft, drafter=lookup if isinstance(d, Lookup) else msgspec.structs.replace(d, chain=lookup))


def default_runtime_method(runtime: str) -> str:
    """``--runtime`` with no ``--draft``: llama-server's own default (ngram-mod, ``--spec-default``),
    mlx-lm's one method (a draft model; without one, a line says so)."""
    free, with_model = RUNTIME_METHODS[runtime]
    return free or with_model


def draft_source(args: argparse.Namespace, on_node: bool) -> str:
    """What ``--draft`` names: as given (a path made absolute here, not on a node), or the
    default: n-gram lookup, or the runtime's default method under ``--runtime``."""
    if args.draft is None:
        runtime = getattr(args, "runtime", None)
        return RUNTIME_PREFIX + default_runtime_method(runtime) if runtime else DraftConfig().flag
    if args.draft.startswith(RUNTIME_PREFIX) or on_node or find_drafter(args.draft) is not None:
        return args.draft  # a registered drafter, or an installed package's (loaded now)
    return model_path(args.draft)


def _read_prompt_file(path: str) -> str:
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpectuiError(f"cannot read prompt file {path}: {exc}") from None


def model_path(spec: str) -> str:
    """--target / --draft: a name from ``spectui models`` becomes its path; a path, "ngram" or
    the embedded model's name stays as given (the catalogue is searched only for other names)."""
    if spec in ("", "smollm2", *(k.name for k in drafter_kinds())) or os.path.exists(os.path.expanduser(spec)):
        return spec
    from spectui.models.catalogue import resolve_catalogue_name

    return resolve_catalogue_name(spec)
