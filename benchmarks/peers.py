"""spectui against its peers, side by side in one run: one table of medians and ratios.

    python benchmarks/peers.py [--reps 5] [--sections ar,ngram,repeated,draft,curve,mlx] [--json FILE]
                               [--target GGUF] [--also-quant Q4_0,Q8_0,F16]

Sections (each on the target, the embedded model unless ``--target`` names a GGUF, and
prompts from ``prompts/``, greedy, same threads):

* ``ar``: spectui's decode loop vs ``llama_cpp.Llama.generate`` vs ``llama-completion`` and
  ``llama-bench`` (text generation at the prompt's depth);
* ``ngram``: prompt-lookup speculation on the copy tier: spectui (fixed K, and its default, the
  cost-aware K that ``spectui run --mode spec`` uses) vs llama-cpp-python's
  ``LlamaPromptLookupDecoding`` vs ``llama-lookup``, same K, each against spectui AR on the
  same prompt; and spectui's suffix drafter (cost-aware K) without its memory, so it sees
  what prompt lookup sees;
* ``repeated``: the repeated tier (an agent's edit loop, a tool-call loop) sent again and again:
  AR vs the n-gram default vs the suffix drafter with and without its memory of earlier
  answers (a fresh memory per prompt: the warm-up round seeds it);
* ``draft``: a draft model, spectui vs ``llama-speculative-simple``, same pair and K;
* ``curve``: the verify-cost curve (evaluating n tokens at once, relative to one) and, for
  every speculative spectui row, the ideal speedup it implies for the blocks that run really
  drafted: measured / ideal says how much the Python loop leaves on the table;
* ``mlx``: spectui's MLX backend vs ``mlx_lm`` (AR and speculative, same pair and K); skipped,
  with a note, for a GGUF type or architecture MLX cannot load;
* ``profile``: where spectui's own time goes: the share of each session spent inside
  ``llama_decode`` (the engine) against everything Python does around it, and with
  pyinstrument installed (``pip install -e '.[bench]'``) its call tree of one n-gram session.

``--also-quant Q4_0`` requantizes the target with llama.cpp's quantize API (``quant.py``, cached)
and runs the ``ar``, ``ngram`` and ``curve`` sections on each copy too: the weight format
decides what verifying a block costs on a CPU. Ratios stay within one format (each format's
rows against its own spectui AR), and a closing summary puts the formats side by side.

llama.cpp's tools are built once from the installed llama-cpp-python source package into a
cache folder (``native_tools.py``); ``--llama-bin DIR`` uses an existing build instead.
Decode tok/s everywhere = tokens after the first over the time from the first to the last,
prefill excluded. Repetitions alternate between the peers, the first round is dropped as
warm-up, and the machines here are shared: read the ratios and medians, not single runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import msgspec
import native_tools as nt
import numpy as np
import quant
from quant import Weights

from spectui.config import BackendConfig, RunConfig
from spectui.drafting import CostAware, DraftConfig, Fixed, Lookup, Model
from spectui.engine.backends.llamacpp import default_threads
from spectui.engine.embedded import Engine
from spectui.errors import SpectuiError
from spectui.metrics.stats import summarize
from spectui.prompts import find_prompt
from spectui.recording.schema import Step

SECTIONS = ("ar", "ngram", "repeated", "draft", "curve", "mlx", "profile")
#: the sections that run again on every ``--also-quant`` copy
PER_WEIGHTS = ("ar", "ngram", "curve")
AR_PROMPTS = ("medium-reasoning", "load-code-continuation")
COPY_PROMPTS = ("load-typo-fix", "load-translation-polish", "copy-quote-paragraph", "copy-refactor-rename")
REPEATED_PROMPTS = ("repeated-edit-loop", "repeated-tool-loop")
#: the suffix drafter's row on the copy tier: no memory, so it sees what prompt lookup sees
SUFFIX_ALONE = "spectui suffix (cost-aware K, no memory)"
SUFFIX_MEMORY = "spectui suffix (cost-aware K, memory)"
N_CTX = 4096
#: the n-gram row that is what ``spectui run --mode spec`` does with no ``--k``
DEFAULT_NGRAM = "spectui n-gram default (cost-aware K)"
#: the verify-cost curve's sizes the closing summary shows
SUMMARY_SIZES = (2, 4, 8, 16)


def suffix(k: int, *, memory: bool) -> DraftConfig:
    """spectui's suffix drafter as ``--draft suffix`` runs it: cost-aware K."""
    return DraftConfig(drafter=Lookup(name="suffix", memory=memory), length=CostAware(k_max=16))


def default_ngram(k: int) -> DraftConfig:
    """spectui's default n-gram drafting: cost-aware K, seeded by the target's cached curve
    (the engine adds the seed). ``k`` is only where a fixed K would start; the cost model picks."""
    return DraftConfig(length=CostAware(k_max=16))


@dataclass
class Row:
    section: str
    prompt: str
    peer: str
    #: the weight format the row ran on (the target's quant): ratios stay within one
    weights: str = ""
    rates: list[float] = field(default_factory=list)
    acceptance: list[float] = field(default_factory=list)
    n_tokens: int = 0
    #: the peer's greedy output equals spectui AR's (None: not comparable / not checked)
    identical: bool | None = None
    #: where it first differs, when it does (token index)
    diverges_at: int | None = None
    #: for spectui speculative rows: the ideal speedup from the verify-cost curve
    ideal: list[float] = field(default_factory=list)
    #: share of the decode span spent inside the engine's evaluations, drafting, and elsewhere
    split: list[tuple[float, float, float]] = field(default_factory=list)
    #: for a peer: the spectui row it is measured against (ratio = that row / this one)
    versus: str = ""
    note: str = ""

    def compare(self, tokens: list[int], ref: list[int]) -> None:
        self.identical = tokens == ref
        self.diverges_at = next((i for i, (a, b) in enumerate(zip(tokens, ref)) if a != b), None)

    @property
    def median(self) -> float:
        return statistics.median(self.rates) if self.rates else float("nan")

    def spread(self) -> str:
        return f"{min(self.rates):.1f}-{max(self.rates):.1f}" if self.rates else "-"


# -- spectui runs -------------------------------------------------------------------------


@dataclass
class SpectuiRun:
    rate: float
    tokens: list[int]
    acceptance: float
    #: per decode step: (tokens drafted, tokens emitted); the prefill's first token is left out
    blocks: list[tuple[int, int]]
    split: tuple[float, float, float]


def run_spectui(engine: Engine, config: RunConfig) -> SpectuiRun:
    events = list(engine.run(config))
    s = summarize(events)
    steps = [ev for ev in events if type(ev) is Step]
    tokens = [t for ev in steps for t in ev.tokens]
    decode = steps[1:]  # the first token comes from the prefill
    span_us = (s.n_tokens - 1) / s.decode_tok_s * 1e6 if s.decode_tok_s > 0 else float("nan")
    verify = sum(ev.verify_us for ev in decode) / span_us
    draft = sum(ev.draft_us for ev in decode) / span_us
    return SpectuiRun(s.decode_tok_s, tokens, s.acceptance_rate, [(ev.drafted, len(ev.tokens)) for ev in decode],
                      (verify, draft, max(0.0, 1.0 - verify - draft)))


def ideal_speedup(blocks: list[tuple[int, int]], curve: dict[int, float]) -> float:
    """The speedup over AR if only the target's evaluations cost time: a step that verifies d
    drafted tokens costs ``curve[d + 1]`` one-token evaluations, AR pays one per token."""
    top = max(curve)
    cost = sum(curve[d + 1] if d + 1 in curve else curve[top] * (d + 1) / top for d, _ in blocks)
    return sum(n for _, n in blocks) / cost if cost else float("nan")


def verify_cost_curve(engine: Engine, prompt: list[int], sizes: range, reps: int) -> tuple[float, dict[int, float]]:
    """Median time to evaluate n tokens at once (all rows' logits, as verification needs),
    relative to one token, at the prompt's depth; and one token's time in ms."""
    target = engine.target
    target.truncate(0)
    target.eval(prompt, all_logits=False)
    depth = target.n_past
    tokens = (prompt * (1 + max(sizes) // max(len(prompt), 1)))[: max(sizes)]
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(reps):
        for n in sizes:
            t = time.perf_counter_ns()
            rows = target.eval(tokens[:n], all_logits=True)
            rows.argmax(axis=1)
            times[n].append(time.perf_counter_ns() - t)
            target.truncate(depth)
    base = statistics.median(times[1])
    return base / 1e6, {n: statistics.median(v) / base for n, v in times.items()}


# -- sections -----------------------------------------------------------------------------


@functools.cache
def native_bin(llama_bin: str | None) -> Path | None:
    """llama.cpp's tools, built once per process (every weight format shares them)."""
    try:
        return nt.ensure_tools(llama_bin, log=lambda m: print(m, file=sys.stderr))
    except nt.ToolError as exc:
        print(f"llama.cpp tools unavailable: {exc}", file=sys.stderr)
        return None


class Bench:
    """The sections on one weight format of the target."""

    def __init__(self, args: argparse.Namespace, weights: Weights, draft: str | None = None) -> None:
        self.args = args
        self.weights = weights
        self.model = weights.path
        self.threads = args.threads or default_threads()
        self.backend = BackendConfig(n_ctx=N_CTX, n_threads=self.threads)
        # one engine for every spectui row: the target, and ``draft`` or the same file as its
        # own draft model (shared weights, a second KV cache)
        self.draft = draft or self.model
        self.engine = Engine.load(self.config("load-typo-fix", "spec", DraftConfig(drafter=Model(path=self.draft), length=Fixed())))
        self.artifacts = self.engine.target.artifacts()
        self.tmp = tempfile.mkdtemp(prefix="spectui-peers-")
        self.rows: list[Row] = []
        self.curve: dict[int, float] = {}
        self.one_token_ms = float("nan")
        self.profile: list[str] = []
        #: one line each, for the output: a section skipped and why
        self.notes: list[str] = []
        self._llama = None

    def add(self, *rows: Row) -> None:
        for row in rows:
            row.weights = self.weights.quant
        self.rows += rows

    def run(self, sections: list[str]) -> None:
        # the curve first: the speculative rows need it for their ideal
        for name in sorted(sections, key=lambda s: s != "curve"):
            t = time.perf_counter()
            getattr(self, f"section_{name}")()
            print(f"[{self.weights.quant} {name} done in {time.perf_counter() - t:.0f} s]", file=sys.stderr)

    def close(self) -> None:
        if self._llama is not None:
            self._llama.close()
            self._llama = None
        self.engine.close()

    def config(self, prompt: str, mode: str, draft: DraftConfig | None = None) -> RunConfig:
        spec = find_prompt(prompt)
        return RunConfig(target=self.model, mode=mode, prompt=spec.text, prompt_name=spec.name,
                         max_tokens=min(spec.max_tokens, self.args.tokens), backend=self.backend,
                         draft=draft or DraftConfig())

    def prompt_file(self, config: RunConfig) -> tuple[str, str, list[int]]:
        """The chat-templated prompt as a file for the tools, its text and its tokens."""
        text, tokens = self.engine.prepare_prompt(config)
        return nt.write_prompt(text, self.tmp, config.prompt_name), text, tokens

    def same_text(self, printed: str, tokens: list[int], prompt: str) -> bool:
        """A tool printed the text of ``tokens``. Some echo the prompt first, and the
        speculative ones may run past the budget to the end of their last block: compare
        what follows the prompt, as a prefix, without the end-of-generation token."""
        t = self.engine.target
        ours = b"".join(t.piece(x) for x in tokens if x not in t.eog_tokens).decode("utf-8", "replace")
        cut = printed.find(prompt)
        generated = printed[cut + len(prompt):] if cut >= 0 else printed
        return generated.startswith(ours.rstrip())

    def native(self) -> Path | None:
        return native_bin(self.args.llama_bin)

    def llama(self, draft=None):
        import llama_cpp

        if self._llama is not None:
            self._llama.close()
        self._llama = llama_cpp.Llama(self.model, n_ctx=N_CTX, n_batch=512, n_threads=self.threads,
                                      n_threads_batch=self.threads, draft_model=draft, flash_attn=True, verbose=False)
        return self._llama

    def reference(self, row: Row, cfg: RunConfig, ref: list[int]) -> Callable[[int], None]:
        """A spectui run whose tokens become ``ref``, the output the other runners must match."""

        def run(rep: int) -> None:
            r = run_spectui(self.engine, cfg)
            ref[:] = r.tokens
            row.n_tokens = len(r.tokens)
            if rep:
                row.rates.append(r.rate)

        return run

    def speculative(self, row: Row, cfg: RunConfig, ref: list[int], ideal: bool = True) -> Callable[[int], None]:
        """A spectui speculative run, checked against ``ref``, with acceptance, time split and
        (once the curve is measured) its ideal speedup: for a free drafter only, since the
        ideal counts the target's evaluations and nothing else."""

        def run(rep: int) -> None:
            r = run_spectui(self.engine, cfg)
            row.compare(r.tokens, ref)
            row.n_tokens = len(r.tokens)
            if rep:
                row.rates.append(r.rate)
                row.acceptance.append(r.acceptance)
                row.split.append(r.split)
                if ideal and self.curve:
                    row.ideal.append(ideal_speedup(r.blocks, self.curve))

        return run

    def generated(self, row: Row, llm, prompt_tokens: list[int], ref: list[int]) -> Callable[[int], None]:
        """``Llama.generate`` (plain or with a draft model) for as many tokens as ``ref``."""

        def run(rep: int) -> None:
            rate, tokens = generate_rate(llm, prompt_tokens, len(ref))
            row.compare(tokens, ref)
            if rep:
                row.rates.append(rate)

        return run

    def tool(self, row: Row, launch: Callable[[int], nt.ToolRun], ref: list[int], prompt_text: str):
        """One of llama.cpp's programs, ``launch(n_tokens)``; nothing when they are unavailable."""

        def run(rep: int) -> None:
            if self.native() is None:
                return
            out = launch(len(ref))
            row.identical = self.same_text(out.text, ref, prompt_text)
            if rep:
                row.rates.append(out.tok_s)
                if out.drafted:
                    row.acceptance.append(out.accepted / out.drafted)

        return run

    def repeat(self, runners: dict[str, Callable[[int], None]], reps: int | None = None) -> None:
        """Alternate the runners ``reps`` times after one dropped warm-up round."""
        for rep in range((self.args.reps if reps is None else reps) + 1):
            for run in runners.values():
                run(rep)

    # -- AR ---------------------------------------------------------------------------

    def section_ar(self) -> None:
        for name in AR_PROMPTS:
            cfg = self.config(name, "ar")
            pfile, ptext, ptokens = self.prompt_file(cfg)
            ours = Row("ar", name, "spectui AR")
            gen = Row("ar", name, "Llama.generate", versus="spectui AR")
            comp = Row("ar", name, "llama-completion", versus="spectui AR")
            bench = Row("ar", name, "llama-bench tg", versus="spectui AR")
            ref: list[int] = []
            llm = self.llama()
            bin_dir = self.native()

            self.repeat({
                "ours": self.reference(ours, cfg, ref),
                "gen": self.generated(gen, llm, ptokens, ref),
                "comp": self.tool(comp, lambda n, bin_dir=bin_dir, pfile=pfile: nt.run_completion(
                    bin_dir, self.model, pfile, n=n, threads=self.threads, n_ctx=N_CTX), ref, ptext),
            })
            if bin_dir is not None:
                bench.rates = nt.run_bench(bin_dir, self.model, n=ours.n_tokens, depth=len(ptokens),
                                           threads=self.threads, reps=self.args.reps)
                bench.note = f"tg{ours.n_tokens} at depth {len(ptokens)}"
            self.add(ours, gen, comp, bench)

    # -- n-gram speculation --------------------------------------------------------------

    def section_ngram(self) -> None:
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        k = self.args.k
        fixed = DraftConfig(length=Fixed(k=k))
        adaptive = default_ngram(k)
        for name in COPY_PROMPTS:
            ar_cfg = self.config(name, "ar")
            pfile, ptext, ptokens = self.prompt_file(ar_cfg)
            ar = Row("ngram", name, "spectui AR")
            rows = {
                "fixed": Row("ngram", name, f"spectui n-gram K={k}"),
                "adaptive": Row("ngram", name, DEFAULT_NGRAM),
                "suffix": Row("ngram", name, SUFFIX_ALONE),
            }
            pld = Row("ngram", name, f"LlamaPromptLookupDecoding K={k}", versus=f"spectui n-gram K={k}")
            lookup = Row("ngram", name, f"llama-lookup K={k}", versus=f"spectui n-gram K={k}")
            ref: list[int] = []
            llm = self.llama(LlamaPromptLookupDecoding(num_pred_tokens=k))
            bin_dir = self.native()

            self.repeat({
                "ar": self.reference(ar, ar_cfg, ref),
                "fixed": self.speculative(rows["fixed"], self.config(name, "spec", fixed), ref),
                "adaptive": self.speculative(rows["adaptive"], self.config(name, "spec", adaptive), ref),
                "suffix": self.speculative(rows["suffix"], self.config(name, "spec", suffix(k, memory=False)), ref),
                "pld": self.generated(pld, llm, ptokens, ref),
                "lookup": self.tool(lookup, lambda n, bin_dir=bin_dir, pfile=pfile: nt.run_lookup(
                    bin_dir, self.model, pfile, n=n, k=k, threads=self.threads, n_ctx=N_CTX), ref, ptext),
            })
            self.add(ar, *rows.values(), pld, lookup)

    # -- the same request again: memory across requests ------------------------------------

    def section_repeated(self) -> None:
        """An agent's loop re-sends the same request: AR vs prompt lookup vs the suffix drafter
        with its memory (a fresh one per prompt, in a temporary folder: the warm-up round's
        answer seeds it, so the measured rounds are second and later identical requests) and
        without. The first request's rate with a cold memory is the row's note."""
        from spectui.engine.drafters.suffix_memory import SuffixMemory

        k = self.args.k
        vocab = self.artifacts.vocab_sha256 or self.artifacts.sha256
        for name in REPEATED_PROMPTS:
            memory = SuffixMemory(vocab, path=Path(self.tmp) / f"memory-{name}.msgpack")
            self.engine._suffix_memory = memory
            ar_cfg = self.config(name, "ar")
            ar = Row("repeated", name, "spectui AR")
            rows = {
                "ngram": Row("repeated", name, DEFAULT_NGRAM),
                "alone": Row("repeated", name, SUFFIX_ALONE),
                "memory": Row("repeated", name, SUFFIX_MEMORY),
            }
            ref: list[int] = []
            first = run_spectui(self.engine, self.config(name, "spec", suffix(k, memory=True)))  # a cold memory
            rows["memory"].note = f"first request (cold memory) {first.rate:.1f} tok/s"
            self.repeat({
                "ar": self.reference(ar, ar_cfg, ref),
                "ngram": self.speculative(rows["ngram"], self.config(name, "spec", default_ngram(k)), ref),
                "alone": self.speculative(rows["alone"], self.config(name, "spec", suffix(k, memory=False)), ref),
                "memory": self.speculative(rows["memory"], self.config(name, "spec", suffix(k, memory=True)), ref),
            })
            self.engine._suffix_memory = None
            self.add(ar, *rows.values())

    # -- draft model --------------------------------------------------------------------

    def section_draft(self) -> None:
        k = self.args.k
        name = "load-typo-fix"
        ar_cfg = self.config(name, "ar")
        spec_cfg = self.config(name, "spec", DraftConfig(drafter=Model(path=self.model), length=Fixed(k=k)))
        pfile, ptext, _ = self.prompt_file(ar_cfg)
        ar = Row("draft", name, "spectui AR")
        ours = Row("draft", name, f"spectui draft model K={k}",
                   note="the target drafting for itself (same pair on both sides)")
        simple = Row("draft", name, f"llama-speculative-simple K={k}", versus=f"spectui draft model K={k}")
        ref: list[int] = []
        bin_dir = self.native()

        self.repeat({
            "ar": self.reference(ar, ar_cfg, ref),
            "ours": self.speculative(ours, spec_cfg, ref, ideal=False),
            "simple": self.tool(simple, lambda n: nt.run_speculative_simple(
                bin_dir, self.model, self.model, pfile, n=n, k=k, threads=self.threads, n_ctx=N_CTX), ref, ptext),
        })
        self.add(ar, ours, simple)

    # -- verify-cost curve ----------------------------------------------------------------

    def section_curve(self) -> None:
        _, ptokens = self.engine.prepare_prompt(self.config("load-typo-fix", "ar"))
        self.one_token_ms, self.curve = verify_cost_curve(self.engine, ptokens, range(1, 18),
                                                          reps=max(5, 2 * self.args.reps))

    # -- MLX ------------------------------------------------------------------------------

    def skip(self, section: str, reason: str) -> None:
        self.notes.append(f"{section} section skipped: {reason}")
        print(self.notes[-1], file=sys.stderr)

    def section_mlx(self) -> None:
        reason = quant.mlx_skip_reason(self.weights)
        if reason:
            return self.skip("mlx", reason)
        try:
            import mlx.core as mx
            import mlx_vs_mlx_lm as mb
            from mlx_lm import load as mlx_lm_load
        except ImportError as exc:
            return self.skip("mlx", str(exc))
        k, n = self.args.k, self.args.mlx_tokens
        try:
            model_dir = mb.export_mlx_model(self.model, os.path.join(self.tmp, "mlx-model"))
        except (SpectuiError, ValueError, RuntimeError) as exc:  # a tensor type mx.load cannot read
            return self.skip("mlx", f"{self.weights.file_name} did not export: {str(exc).splitlines()[0]}")
        backend = BackendConfig(name="mlx", n_ctx=1024)
        ar_cfg = RunConfig(target=model_dir, mode="ar", prompt=mb.PROMPT, chat=False, max_tokens=n, backend=backend)
        spec_cfg = RunConfig(target=model_dir, mode="spec", prompt=mb.PROMPT, chat=False, max_tokens=n,
                             backend=backend, draft=DraftConfig(drafter=Model(path=model_dir), length=Fixed(k=k)))
        engine = Engine.load(spec_cfg)
        _, ptokens = engine.prepare_prompt(ar_cfg)
        # spectui's backend computes in float32 on a CPU: give mlx-lm the same dtype
        model, tokenizer = mlx_lm_load(model_dir)
        if mx.default_device() == mx.cpu:
            model.set_dtype(mx.float32)
            mx.eval(model.parameters())
        rows = {
            "ours_ar": Row("mlx", "typo sentence", "spectui MLX AR"),
            "lm_ar": Row("mlx", "typo sentence", "mlx_lm AR", versus="spectui MLX AR"),
            "ours_spec": Row("mlx", "typo sentence", f"spectui MLX draft model K={k}"),
            "lm_spec": Row("mlx", "typo sentence", f"mlx_lm speculative K={k}", versus=f"spectui MLX draft model K={k}"),
        }
        ref: list[int] = []

        def timed(row: Row, fn):
            def run(rep):
                (_, e2e), toks = fn()
                if row.peer == "spectui MLX AR":
                    ref[:] = toks
                else:
                    row.compare(toks, ref)
                row.n_tokens = len(toks)
                if rep:
                    row.rates.append(e2e)
            return run

        self.repeat({
            "ours_ar": timed(rows["ours_ar"], lambda: mb.spectui_run(engine, ar_cfg)),
            "lm_ar": timed(rows["lm_ar"], lambda: mb.mlx_lm_run(model, tokenizer, ptokens, n)),
            "ours_spec": timed(rows["ours_spec"], lambda: mb.spectui_run(engine, spec_cfg)),
            "lm_spec": timed(rows["lm_spec"], lambda: mb.mlx_lm_run(model, tokenizer, ptokens, n, model, k)),
        }, reps=self.args.mlx_reps)
        for row in rows.values():
            row.note = f"end-to-end tok/s, {n} tokens, raw prompt, {mx.default_device()}"
        engine.close()
        self.add(*rows.values())

    # -- profile ----------------------------------------------------------------------------

    def section_profile(self) -> None:
        import llama_cpp

        inside = [0]
        real = llama_cpp.llama_decode

        def timed_decode(ctx, batch):
            t = time.perf_counter_ns()
            try:
                return real(ctx, batch)
            finally:
                inside[0] += time.perf_counter_ns() - t

        ngram = self.config("load-typo-fix", "spec", default_ngram(self.args.k))
        runs = {"AR, medium-reasoning": self.config("medium-reasoning", "ar"),
                "n-gram default (cost-aware K), load-typo-fix": ngram}
        llama_cpp.llama_decode = timed_decode  # spectui's backend calls it through the module
        try:
            for label, cfg in runs.items():
                shares = []
                for _ in range(max(3, self.args.reps)):
                    inside[0] = 0
                    t = time.perf_counter_ns()
                    run_spectui(self.engine, cfg)
                    shares.append(1 - inside[0] / (time.perf_counter_ns() - t))
                self.profile.append(f"{label}: outside llama_decode {statistics.median(shares):.1%} of the session "
                                    f"(median of {len(shares)}; prefill, drafting, verification and events included)")
        finally:
            llama_cpp.llama_decode = real
        try:
            from pyinstrument import Profiler
        except ImportError:
            self.profile.append("(pyinstrument not installed: pip install -e '.[bench]' for the call tree)")
            return
        profiler = Profiler(interval=0.0005)
        with profiler:
            run_spectui(self.engine, ngram)
        self.profile.append(profiler.output_text(unicode=False, color=False, show_all=False))


def generate_rate(llm, prompt_tokens: list[int], n: int) -> tuple[float, list[int]]:
    """``Llama.generate`` greedy for ``n`` tokens (it never stops on its own)."""
    out: list[int] = []
    first = 0.0
    for tok in llm.generate(prompt_tokens, temp=0.0, reset=True):
        if not out:
            first = time.perf_counter()
        out.append(tok)
        if len(out) >= n or tok == llm.token_eos():
            break
    end = time.perf_counter()
    return (len(out) - 1) / (end - first), out


# -- output -------------------------------------------------------------------------------


def find_row(rows: list[Row], weights: str, section: str, prompt: str, peer: str) -> Row | None:
    return next((r for r in rows if (r.weights, r.section, r.prompt, r.peer) == (weights, section, prompt, peer)), None)


def x_ar(rows: list[Row], r: Row) -> float:
    """``r`` against spectui AR on the same prompt and weight format (nan for AR itself)."""
    ar = find_row(rows, r.weights, r.section, r.prompt, "spectui MLX AR" if r.section == "mlx" else "spectui AR")
    return r.median / ar.median if ar is not None and ar is not r and r.rates and ar.rates else float("nan")


def side_by_side(rows: list[Row]) -> list[Row]:
    """Rows grouped by section, then prompt, in the order they first ran, with a prompt's
    weight formats one after the other (each format's rows keep their own order)."""

    def first_seen(key) -> dict:
        return {k: i for i, k in enumerate(dict.fromkeys(map(key, rows)))}

    section, prompt, weights = (first_seen(lambda r: r.section), first_seen(lambda r: (r.section, r.prompt)),
                                first_seen(lambda r: r.weights))
    return sorted(rows, key=lambda r: (section[r.section], prompt[(r.section, r.prompt)], weights[r.weights]))


def text_table(head: tuple[str, ...], body: list[tuple[str, ...]]) -> str:
    """Columns padded to their widest cell, a rule under the header."""
    out = [head, *body]
    widths = [max(len(row[i]) for row in out) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in out]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def table(rows: list[Row]) -> str:
    head = ("section", "prompt", "weights", "runner", "tok/s", "min-max", "accept", "x AR", "spectui/peer", "ideal",
            "of ideal", "same")
    body = []
    for r in side_by_side(rows):
        versus = find_row(rows, r.weights, r.section, r.prompt, r.versus) if r.versus else None
        ideal = statistics.median(r.ideal) if r.ideal else float("nan")
        ratio = x_ar(rows, r)
        body.append((
            r.section, r.prompt, r.weights, r.peer, f"{r.median:.1f}" if r.rates else "-", r.spread(),
            f"{statistics.median(r.acceptance):.2f}" if r.acceptance else "",
            _num(ratio), _num(versus.median / r.median if versus is not None and r.rates else float("nan")),
            _num(ideal), _num(ratio / ideal, pct=True),
            {True: "yes", None: ""}.get(r.identical, f"from {r.diverges_at}" if r.diverges_at is not None else "NO"),
        ))
    return text_table(head, body)


def weights_summary(benches: list[Bench]) -> str:
    """Per weight format: spectui AR, what the default n-gram drafting gains on the copy
    prompts, and what verifying a block costs there (the curve explains the gain)."""
    head = ("weights", "file", "spectui AR tok/s", "n-gram default x AR", "min-max", "1 token",
            *(f"n={n}" for n in SUMMARY_SIZES))
    body = []
    for b in benches:
        ar = [r.median for r in b.rows if r.peer == "spectui AR" and r.section in PER_WEIGHTS and r.rates]
        gains = [g for r in b.rows if r.peer == DEFAULT_NGRAM and not math.isnan(g := x_ar(b.rows, r))]
        body.append((
            b.weights.quant, b.weights.file_name, f"{statistics.median(ar):.1f}" if ar else "-",
            _num(statistics.median(gains)) if gains else "-", f"{min(gains):.2f}-{max(gains):.2f}" if gains else "",
            f"{b.one_token_ms:.1f} ms" if b.curve else "-", *(f"{b.curve[n]:.2f}" if n in b.curve else "-" for n in SUMMARY_SIZES),
        ))
    return ("by weight format: spectui AR (median over the ar and ngram prompts), the default n-gram speedup "
            "(median over the copy prompts) and the verify cost (n tokens at once / one token)\n"
            + text_table(head, body))


def _num(x: float, pct: bool = False) -> str:
    if math.isnan(x):
        return ""
    return f"{x:.0%}" if pct else f"{x:.2f}x"


def weights_meta(bench: Bench) -> dict:
    art = bench.artifacts
    return {
        "file": bench.weights.file_name, "path": bench.weights.path, "origin": bench.weights.origin,
        "model": art.name, "quant": art.quant, "sha256": art.sha256,
        "one_token_ms": bench.one_token_ms if bench.curve else None, "curve": bench.curve, "notes": bench.notes,
    }


def meta(args: argparse.Namespace, benches: list[Bench]) -> dict:
    import llama_cpp

    from spectui import __version__
    from spectui.models.artifacts import host_info, package_version

    target = weights_meta(benches[0])
    return {
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": msgspec.to_builtins(host_info()),
        "threads": benches[0].threads,
        "model": target["model"], "quant": target["quant"], "sha256": target["sha256"], "file": target["file"],
        "weights": [target, *map(weights_meta, benches[1:])],
        "versions": {
            "spectui": __version__, "python": platform.python_version(), "llama-cpp-python": llama_cpp.__version__,
            "mlx": package_version("mlx"), "mlx-lm": package_version("mlx-lm"), "numpy": np.__version__,
        },
        "reps": args.reps, "k": args.k, "max_tokens": args.tokens,
    }


def report(args: argparse.Namespace, benches: list[Bench], info: dict) -> None:
    target, copies = benches[0].weights, [b.weights for b in benches[1:]]
    also = "".join(f"; also as {w.quant} ({w.file_name}, {w.origin})" for w in copies)
    print(f"spectui peers: {target.file_name} ({target.quant}, {target.origin}){also}; {info['host']['cpu']}, "
          f"{info['threads']} threads, {args.reps} reps, K={args.k}, llama-cpp-python "
          f"{info['versions']['llama-cpp-python']}, mlx-lm {info['versions']['mlx-lm']}")
    rows = [r for b in benches for r in b.rows]
    print(table(rows))
    for b in benches:
        if b.curve:
            print(f"verify cost, {b.weights.quant} (n tokens at once / one token; one is {b.one_token_ms:.1f} ms): "
                  + "  ".join(f"{n}:{c:.2f}" for n, c in b.curve.items()))
    for r in rows:
        if r.split:
            v, d, o = (statistics.median(x) for x in zip(*r.split))
            print(f"time split, {r.weights} {r.prompt} / {r.peer}: verification {v:.1%}, drafting {d:.1%}, "
                  f"rest of the loop {o:.1%}")
    for line in benches[0].profile:
        print(f"profile: {line}")
    for b in benches:
        for line in b.notes:
            print(f"note, {b.weights.quant}: {line}")
    for r in rows:
        if r.note:
            print(f"note, {r.weights} {r.peer}: {r.note}")
    if any(b.curve or any(r.section in PER_WEIGHTS for r in b.rows) for b in benches):
        print(weights_summary(benches))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="measured repetitions per runner (after one warm-up)")
    ap.add_argument("--tokens", type=int, default=256, help="token budget (capped by each prompt's ceiling)")
    ap.add_argument("--k", type=int, default=8, help="draft length K for the fixed-K rows")
    ap.add_argument("--mlx-tokens", type=int, default=24)
    ap.add_argument("--mlx-reps", type=int, default=2, help="MLX on a CPU is slow: fewer repetitions there")
    ap.add_argument("--threads", type=int, default=0, help="0 = one per available core")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}")
    ap.add_argument("--target", default=None, metavar="GGUF", help="the model to measure (default: the embedded one)")
    ap.add_argument("--also-quant", default="", metavar="TYPES",
                    help=f"comma-separated weight types (Q4_0,Q8_0,F16): requantize the target to each (cached) and "
                         f"run {', '.join(PER_WEIGHTS)} on it too")
    ap.add_argument("--llama-bin", default=None, help="a folder with llama.cpp's tools (default: build them once)")
    ap.add_argument("--json", default=None, help="write the results here too")
    args = ap.parse_args()
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        print(f"peers: unknown section {', '.join(unknown)} (have {', '.join(SECTIONS)})", file=sys.stderr)
        return 2
    try:
        formats = quant.weight_formats(args.target, args.also_quant, log=lambda m: print(f"peers: {m}", file=sys.stderr))
    except SpectuiError as exc:
        print(f"peers: {exc}", file=sys.stderr)
        return 2
    benches = []
    for weights in formats:
        bench = Bench(args, weights)
        # the requantized copies run the sections whose rows the weight format moves
        bench.run(sections if weights is formats[0] else [s for s in sections if s in PER_WEIGHTS])
        bench.close()
        benches.append(bench)
    info = meta(args, benches)
    report(args, benches, info)
    if args.json:
        rows = [r for b in benches for r in b.rows]
        with open(args.json, "w") as f:
            json.dump({"meta": info, "curve": benches[0].curve,
                       "profile": benches[0].profile[:-1] if benches[0].profile else [],
                       "rows": [asdict(r) | {"median": r.median} for r in rows]}, f, indent=1)
        print(f"results written to {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
