"""``--learned-k`` on the real model: greedy output equals AR, the learner drafts on a copy, and
the command line refuses it where it cannot apply, in one line."""

from __future__ import annotations

from spectui.config import RunConfig
from spectui.drafting import CostAware, DraftConfig, Lookup
from spectui.recording.reader import read_recording
from spectui.recording.schema import End, Step
from tests.conftest import run_cli
from tests.prompts import ALL

COPY = ("Fix the typos and return the text unchanged otherwise: 'The quick brwon fox jumsp over the "
        "lazy dgo while the cat sleeps on the warm windowsill of the old house.'")


def run(engine, prompt: str, **overrides) -> list[Step]:
    config = RunConfig(target=engine.target.model.info.path, prompt=prompt, max_tokens=64, **overrides)
    return [ev for ev in engine.run(config) if isinstance(ev, Step)]


def test_the_learned_k_equals_ar_and_drafts_on_a_copy(engine):
    drafted = 0
    for prompt in (*ALL, COPY):
        ar = [t for s in run(engine, prompt, mode="ar") for t in s.tokens]
        draft = DraftConfig(drafter=Lookup(name="ngram", memory=False), length=CostAware(rule="learned"))
        steps = run(engine, prompt, mode="spec", draft=draft)
        assert [t for s in steps for t in s.tokens] == ar, prompt[:40]
        drafted += sum(s.drafted for s in steps)
    assert drafted > 0


def test_the_flag_runs_headless_and_is_refused_where_it_cannot_apply(tmp_path):
    path = tmp_path / "learned.spectui"
    proc = run_cli("run", "--headless", "--learned-k", "--prompt", COPY, "--max-tokens", "24", "--record", str(path))
    assert proc.returncode == 0, proc.stderr
    recording = read_recording(path)
    length = recording.header.config.draft.length
    assert isinstance(length, CostAware) and length.rule == "learned"
    end = next(e for e in recording.events if isinstance(e, End))
    assert end.decisions is not None and end.decisions.proposals > 0
    for extra in (["--k", "4"], ["--draft", "runtime:ngram-mod"]):
        refused = run_cli("run", "--headless", "--learned-k", *extra, "--prompt", "hi", "--max-tokens", "4")
        assert refused.returncode != 0 and "Traceback" not in refused.stderr
        assert refused.stderr.strip().splitlines()[-1].startswith("spectui: error: --learned-k"), refused.stderr
