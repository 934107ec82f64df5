"""A tune result is one typed object (``spectui.tune.result.TuneResult``): the JSON it is stored
as reads back into the same object, and the text ``spectui tune`` prints and the dashboard's
tune screen shows are both renderings of it (``spectui.tune.report``). No model: the result is
the real one checked in at tests/data/tune-result.json (tests/data/make_tune_result.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from spectui.tune import store
from spectui.tune.report import format_charts, format_summary, format_text, to_json
from spectui.tune.result import TuneResult

STORED = Path(__file__).resolve().parents[1] / "data" / "tune-result.json"


@pytest.fixture
def doc() -> dict:
    return json.loads(STORED.read_text())


def test_the_stored_json_reads_back_into_the_result_that_writes_it(doc):
    result = TuneResult.from_json(doc)
    assert (result.key, result.measured_at, result.model, result.threads) == (doc["key"], doc["measured_at"], doc["model"], 1)
    assert result.curve.relative == tuple(doc["curve"]["relative"]) and result.long_curve is None
    assert [t.tier for t in result.tiers] == ["copy", "short"]
    assert result.tiers[0].best.label() == doc["tiers"][0]["best"]["label"]
    # byte for byte the same document: the derived fields (agreement, settings, the spectui
    # flags, the exactness lines) are computed again from the object, not copied
    assert {"key": result.key, "measured_at": result.measured_at, **to_json(result)} == doc


def test_null_is_not_measured(doc):
    """JSON has no NaN: what was not measured is null there and NaN (or None) in the object."""
    doc["tiers"][1]["acceptance"] = None
    doc["tiers"][1]["measured"] = None
    doc["tiers"][1]["copy_ceiling"] = None
    result = TuneResult.from_json(doc)
    short = result.tiers[1]
    assert math.isnan(short.acceptance) and math.isnan(short.copy_ceiling) and short.measured is None
    again = to_json(result)["tiers"][1]
    assert (again["acceptance"], again["measured"], again["agreement"], again["copy_ceiling"]) == (None, None, None, None)
    summary = format_summary(result)
    row = next(line for line in summary.splitlines() if line.strip().startswith("short "))
    assert row.split()[-5:] == ["1.00x", "-", "-", "-", "1.45x"], row  # predicted, measured, off by, ceilings


def test_the_screen_and_the_command_render_the_same_object(doc):
    result = TuneResult.from_json(doc)
    text, summary = format_text(result), format_summary(result)
    # the same curve table and the same settings in both
    curve_table = next(line for line in text.splitlines() if line.strip().startswith("prompt depth"))
    assert curve_table in summary.splitlines()
    for tier in result.tiers:
        assert tier.verdict in text and tier.verdict in summary
    settings = text.split("settings to use\n", 1)[1].split("\n\n", 1)[0]
    assert summary.endswith(settings)
    # the screen's own: when it was measured, and the ceilings beside the plan
    assert f"measured {result.measured_at}" in summary and "copying at best" in summary
    assert "predicted speedup vs AR" in format_charts(result)


def test_a_document_that_is_no_tune_result_is_refused(doc, tmp_path):
    for bad in ({}, {"model": "m"}, {**doc, "curve": {"depth": "x"}}, {**doc, "tiers": [{"best": {}}]}):
        with pytest.raises(ValueError):
            TuneResult.from_json(bad)
    # the store reads such a file as no result (tuning again replaces it)
    path = store.result_path("k", cache=tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"key": "k", "measured_at": "now", "model": "m"}))
    assert store.load_result("k", cache=tmp_path) is None


def test_an_older_result_without_later_fields_still_reads(doc):
    for key in ("exactness", "runtime", "long_curve", "draft_cost"):
        doc.pop(key)
    for tier in doc["tiers"]:
        tier.pop("copy_ceiling")
        tier.pop("perfect_ceiling")
    result = TuneResult.from_json(doc)
    assert result.noise is None and result.runtime == {} and math.isnan(result.tiers[0].copy_ceiling)
    assert "not measured" in format_text(result)  # the exactness section says so
