"""``spectui tune --runtime`` without a server: which settings its measured pass runs, the flags
each becomes (the launcher's own, per method), the command it prints, and the embedded tune
advising nothing for a runtime it did not run. The pass on a real llama-server:
tests/runtime/test_runtime_sweep_tune.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

from spectui.config import RUNTIMES, BackendConfig, RunConfig
from spectui.drafting import DraftConfig, Runtime
from spectui.prompts import PromptSpec
from spectui.runtime.methods import METHODS
from spectui.runtime.session import method_of
from spectui.tune.report import format_text as embedded_text
from spectui.tune.result import TuneResult
from spectui.tune.runtime import (
    MEASURED_METHODS,
    TUNE_KS,
    Candidate,
    Measured,
    RuntimeTune,
    candidates,
    format_text,
    paste_command,
    to_json,
)

STORED = Path(__file__).resolve().parents[1] / "data" / "tune-result.json"
BASE = RunConfig(prompt="x", backend=BackendConfig(name="llama-server"), draft=DraftConfig().drafting_with(Runtime(method="ngram-mod")))
SPEC = PromptSpec(name="p", tier="copy", max_tokens=400, text="Copy this.")


def test_the_pass_runs_every_ngram_method_at_the_k_values_it_reads():
    methods = MEASURED_METHODS["llama-server"]
    assert set(methods) == {n for n in METHODS if n.startswith("ngram")}
    cands = candidates(methods, TUNE_KS)
    assert [c for c in cands if c.method == "ngram-cache"] == [Candidate("ngram-cache")]  # it fixes its own K: once
    for method in set(methods) - {"ngram-cache"}:
        assert [c.k for c in cands if c.method == method] == [None, *TUNE_KS]
    assert candidates(["ngram-simple"], (6,), runtime_default=False) == [Candidate("ngram-simple", 6)]  # --k: that K alone


def test_each_setting_runs_with_the_flags_its_method_reads():
    for cand in candidates(MEASURED_METHODS["llama-server"], TUNE_KS):
        config = cand.config(BASE, SPEC, 32)
        assert config.max_tokens == 32 and config.mode == "spec"
        args = method_of(config).args()
        info = METHODS[cand.method]
        assert args[:2] == ["--spec-type", cand.method]
        assert "--spec-draft-n-max" not in args  # no n-gram method reads it
        if cand.k is not None:
            assert args[args.index(info.k_flag) + 1] == str(cand.k)
        elif info.k_flag:
            assert info.k_flag not in args  # the runtime's own K: no flag
    assert method_of(Candidate("").config(BASE, SPEC, 32)).args() == []  # AR: a server without --spec-type


def test_the_printed_command_is_the_launchers_without_its_host_and_port():
    line = ("/cache/llama-server -m /m/x.gguf -c 1024 -t 1 -tb 1 -fa on -np 1 --metrics --no-slots --no-webui "
            "--host 127.0.0.1 --port 41234 --spec-type ngram-simple --spec-ngram-simple-size-m 8")
    assert paste_command(line) == ("/cache/llama-server -m /m/x.gguf -c 1024 -t 1 -tb 1 -fa on -np 1 --metrics --no-slots "
                                   "--no-webui --spec-type ngram-simple --spec-ngram-simple-size-m 8")


def _tune(ratios: dict[Candidate, list[float]]) -> RuntimeTune:
    settings = [Measured(Candidate(""), command="llama-server -m x.gguf")]
    for cand, values in ratios.items():
        settings.append(Measured(cand, command=f"llama-server -m x.gguf --spec-type {cand.method}", ratios={"p": values},
                                 drafted_on={"p": 10}, drafted=10, accepted=8, same_output=len(values), runs=len(values)))
    return RuntimeTune(runtime="llama-server", version="b1", model="x", threads="1", max_tokens=32, rounds=2,
                       prompts={"p": "copy"}, settings=settings, elapsed_s=3.0)


def test_the_advice_is_the_best_measured_setting_or_ar():
    fast, slow = Candidate("ngram-mod", 8), Candidate("ngram-simple", 4)
    tune = _tune({fast: [1.4, 1.3], slow: [0.9, 1.0]})
    best, _ = tune.best("copy")
    assert best.candidate == fast and math.isclose(best.speedup(), 1.35)
    text = format_text(tune)
    assert "copy: ngram-mod K=8: 1.35x AR, accepted 0.80" in text
    assert "llama-server -m x.gguf --spec-type ngram-mod" in text and "2 rounds, at most 32 tokens each" in text
    assert json.loads(json.dumps(to_json(tune)))["best"]["copy"]["k"] == 8

    none_pays = _tune({slow: [1.01, 1.0]})
    assert none_pays.best("copy")[0].candidate.ar
    assert "copy: AR: no setting beat AR by 3% (best ngram-simple K=4 1.00x)" in format_text(none_pays)

    # a setting that drafted nothing ran as AR: faster only by the machine's noise, never advised
    idle = _tune({fast: [1.2]})
    idle.settings[1].drafted_on = {"p": 0}
    assert idle.best("copy") == (idle.settings[0], None)


def test_the_embedded_tune_advises_no_runtime_setting_it_did_not_run():
    text = embedded_text(TuneResult.from_json(json.loads(STORED.read_text())))
    settings = text.split("settings to use\n", 1)[1].split("\n\n", 1)[0]
    assert "--spec-" not in settings and "--num-draft-tokens" not in settings
    for name in RUNTIMES:
        assert f"--runtime {name}" in settings
    assert "spectui tune --runtime llama-server" in settings
