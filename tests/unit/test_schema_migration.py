"""Schema 2.0 typed the draft settings (``spectui.drafting``) and moved what a run's plan
measured out of them (``Header.pricing``). Every older recording still reads, replays, diffs
and gates: the committed ones, and 1.x headers of every drafting shape, written here byte for
byte as a 1.x spectui wrote them (msgpack maps with the flat ``DraftConfig``)."""

from __future__ import annotations

import zlib
from pathlib import Path

import msgspec
import pytest

from spectui.compare.diff import diff_recordings
from spectui.compare.gate import GateThresholds, gate
from spectui.drafting import CostAware, DraftConfig, Fixed, Lookup, Model, Pricing, Runtime, RuntimeDefault
from spectui.metrics.live import LiveRun
from spectui.recording.reader import read_header, read_recording
from spectui.recording.schema import SCHEMA_VERSION, Step
from spectui.recording.writer import CRC_SEED, MAGIC, RecordingWriter, encode_varint

REPO = Path(__file__).resolve().parents[2]
COMMITTED = sorted([*(REPO / "tests" / "data").glob("*.spectui"), *(REPO / "recordings").glob("*.spectui")])


def write_v1(path: Path, draft: dict[str, object], version: str = "1.8") -> Path:
    """A recording as spectui 1.x framed it: a header map (tag 1) with the flat draft settings,
    then an End (tag 5)."""
    header = {"type": 1, "schema_version": version, "config": {"mode": "spec", "prompt": "hi", "draft": draft}}
    frames = b""
    for record in (header, {"type": 5, "t_us": 10, "reason": "length"}):
        payload = msgspec.msgpack.encode(record)
        body = encode_varint(len(payload)) + payload
        frames += body + zlib.crc32(body, CRC_SEED).to_bytes(4, "little")
    path.write_bytes(MAGIC + frames)
    return path


@pytest.mark.parametrize(
    ("old", "draft", "pricing"),
    [
        ({}, DraftConfig(length=Fixed(k=4)), Pricing()),  # 1.x's default: a fixed K=4 n-gram drafter
        ({"source": "suffix", "adaptive": True, "k": 9, "k_min": 2, "k_max": 12, "memory": False,
          "cost_seed": [1.0, 1.5], "learn_cost": False},
         DraftConfig(drafter=Lookup(name="suffix", memory=False), length=CostAware(k_min=2, k_max=12, learn=False)),
         Pricing(seed=(1.0, 1.5))),
        ({"source": "/m/d.gguf", "chain": "ngram", "ngram_max": 6, "adaptive": True, "draft_cost": 0.4, "p_min": 0.3,
          "temperature": 0.7},
         DraftConfig(drafter=Model(path="/m/d.gguf", p_min=0.3, temperature=0.7, chain=Lookup(name="ngram", ngram_max=6)),
                     length=CostAware()),
         Pricing(draft_cost=0.4)),
        ({"source": "/m/d.gguf", "k": 6}, DraftConfig(drafter=Model(path="/m/d.gguf"), length=Fixed(k=6)), Pricing()),
        ({"source": "runtime:ngram-mod", "adaptive": True, "lookup": 3},
         DraftConfig(drafter=Runtime(method="ngram-mod", lookup=3), length=RuntimeDefault()), Pricing()),
        ({"source": "runtime:draft-simple", "k": 5, "draft_model": "/m/d.gguf"},
         DraftConfig(drafter=Runtime(method="draft-simple", draft_model="/m/d.gguf"), length=Fixed(k=5)), Pricing()),
    ],
    ids=["default", "suffix-cost-aware", "chain", "model-fixed", "runtime-default", "runtime-fixed"],
)
def test_a_1x_header_reads_typed(tmp_path, old, draft, pricing):
    path = write_v1(tmp_path / "old.spectui", old)
    header = read_header(path)
    assert (header.config.draft, header.pricing) == (draft, pricing)
    header.config.draft.validate()
    # written again, the copy is this schema's: it reads the same, without migrating twice
    with RecordingWriter(tmp_path / "copy.spectui") as w:
        for event in read_recording(path).events:
            w.write(event)
    again = read_header(tmp_path / "copy.spectui")
    assert again.schema_version == SCHEMA_VERSION and (again.config.draft, again.pricing) == (draft, pricing)


@pytest.mark.parametrize("path", COMMITTED, ids=[p.name for p in COMMITTED])
def test_the_committed_recordings_read_and_replay(path):
    rec = read_recording(path)
    assert rec.header.schema_version.startswith("1.") and rec.complete
    if rec.header.config.mode == "spec":
        assert rec.header.config.draft == DraftConfig(length=Fixed(k=4)) and rec.header.config.label() == "spec n-gram K=4"
    live = LiveRun()
    live.feed_many(rec.events)  # the dashboard's replay: every event through the live model
    assert live.tokens == [t for e in rec.events if type(e) is Step for t in e.tokens]


def test_the_committed_recordings_diff_and_gate():
    folder = REPO / "recordings"
    for name in ("short-control", "load-typo-fix", "medium-reasoning"):
        ar, spec = (read_recording(folder / f"{name}.{mode}.spectui") for mode in ("ar", "spec-ngram-k4"))
        d = diff_recordings(ar, spec)
        assert [f.path for f in d.configuration] == ["config.mode", "config.draft.drafter", "config.draft.length"]
        assert [(f.baseline, f.candidate) for f in d.configuration[1:]] == [(None, "ngram"), (None, "K=4")]
        verdict = gate([ar], [spec], GateThresholds())
        assert any("K=4" in c.detail for c in verdict.checks)


def test_a_sweep_folder_spectui_1x_wrote_reads_its_drafting(tmp_path):
    """``sweep.json`` holds its base configuration: a 1.x one is migrated as a header is, so the
    floors and labels it gives name the drafter it ran, not the default."""
    import json

    from spectui.config import RunConfig
    from spectui.lab.sweep import MANIFEST, SweepPlan, load_sweep
    from spectui.lab.sweep_table import SweepPoint

    plan = SweepPlan(base=RunConfig(), prompts=[], tiers={}, points=[SweepPoint("k", "6")])
    doc = {"plan": msgspec.to_builtins(plan), "runs": [], "complete": True, "elapsed_s": 1.0}
    doc["plan"]["base"]["draft"] = {"source": "/m/d.gguf", "k": 6, "p_min": 0.2}  # 1.x's flat settings
    (tmp_path / MANIFEST).write_text(json.dumps(doc))
    result, _ = load_sweep(tmp_path)
    assert result.plan.base.draft == DraftConfig(drafter=Model(path="/m/d.gguf", p_min=0.2), length=Fixed(k=6))
