"""``spectui history`` lists watches by server, beside the sessions (which they leave alone), and an
index built before watches were indexed is rebuilt once. The watch recordings are written by the
watch's own recorder from readings of the metric texts of tests/data/metrics; no server, no model."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from spectui.history.index import INDEX_SCHEMA
from spectui.metrics.prometheus import LLAMA_SERVER, VLLM, parse_exposition, read_counters
from spectui.recording.watch_records import ProcessSample
from spectui.watch.record import WatchRecorder, watch_header
from spectui.watch.sampler import WatchCore
from spectui.watch.source import Poll, WatchTarget
from tests.conftest import run_cli

DATA = Path(__file__).resolve().parents[1] / "data"
METRICS = DATA / "metrics"


def record_watch(path: Path, server: str, url: str, moments: int, *, build: str = "b1") -> None:
    """A watch of ``url`` as the recorder writes it: ``moments`` readings, a second apart."""
    from spectui.watch.record import watch_info

    fam = LLAMA_SERVER if server == "llama-server" else VLLM
    target = WatchTarget(url=url, families=fam, identity={"server": fam.server, "build": build, "model": "m.gguf"})
    recorder = WatchRecorder(path, watch_header(watch_info(target, 1.0, process="llama-server pid 1")))
    core = WatchCore(0.0)
    texts = sorted(METRICS.glob(f"{server}-*.txt"))[:moments]
    for i, text in enumerate(texts):
        reading = read_counters(parse_exposition(text.read_text()), fam, float(i))
        recorder.write(core.take(Poll(reading), float(i), ProcessSample(rss_bytes=(100 + i) << 20, cpu_pct=50.0, threads=4)))
    recorder.close(core.fold.totals, "length")


@pytest.fixture
def folder(tmp_path):
    rec = tmp_path / "recordings"
    rec.mkdir()
    shutil.copy(DATA / "fixed-session.spectui", rec / "session.spectui")
    record_watch(rec / "w1.spectui", "llama-server", "http://127.0.0.1:8080", 3)
    record_watch(rec / "w2.spectui", "llama-server", "http://127.0.0.1:8080", 2, build="b2")
    record_watch(rec / "w3.spectui", "vllm", "http://127.0.0.1:8000", 2)
    return rec


def test_history_lists_watches_by_server(folder, tmp_path):
    index = str(tmp_path / "i.sqlite")
    doc = json.loads(run_cli("history", str(folder), "--index", index, "--json", timeout=120).stdout)
    kinds = [g["kind"] for g in doc["groups"]]
    assert kinds.count("sessions") == 1 and kinds.count("watch") == 2
    llama = next(g for g in doc["groups"] if g["kind"] == "watch" and g["key"]["backend"] == "llama-server")
    assert llama["key"]["prompt"] == "http://127.0.0.1:8080" and len(llama["runs"]) == 2
    assert llama["title"].startswith("watches of llama-server at http://127.0.0.1:8080 · model m.gguf")
    first = llama["runs"][0]
    assert first["watch"] == "llama-server at http://127.0.0.1:8080" and first["server_peak_rss_bytes"] == 102 << 20
    m0, m2 = (read_counters(parse_exposition((METRICS / f"llama-server-{i}.txt").read_text()), LLAMA_SERVER, 0.0) for i in (0, 2))
    assert first["acceptance"] == pytest.approx((m2.accepted_tokens - (m0.accepted_tokens or 0)) / (m2.draft_tokens - (m0.draft_tokens or 0)))
    # the server's build moved between the two watches: a marked change, as a runtime's would be
    assert [w["field"] for w in llama["changes"][0]["what"]] == ["runtime"]
    assert doc["slowdowns"] == [] and all(h["groups"] == 1 for h in doc["hosts"])  # the session's host alone

    text = run_cli("history", str(folder), "--index", index, "--no-charts", timeout=120).stdout
    assert "== watches, by server (3 watches)" in text
    assert "watches of vLLM at http://127.0.0.1:8000" in text
    assert "gen tok/s" in text and "server RSS" in text and "STALE" not in text.split("== watches")[1]


def test_an_index_from_before_watches_is_rebuilt_once(folder, tmp_path):
    index = tmp_path / "old.sqlite"
    run_cli("history", str(folder), "--index", str(index), "--json", timeout=120)
    with sqlite3.connect(index) as db:  # as the spectui before watches left it
        db.execute("UPDATE meta SET value = '4' WHERE key = 'schema'")
    doc = json.loads(run_cli("history", str(folder), "--index", str(index), "--json", timeout=120).stdout)
    assert any(f"index schema 4, this one writes {INDEX_SCHEMA}" in n for n in doc["notes"]), doc["notes"]
    assert doc["indexed"]["read"] == 4 and sum(g["kind"] == "watch" for g in doc["groups"]) == 2
    again = json.loads(run_cli("history", str(folder), "--index", str(index), "--json", timeout=120).stdout)
    assert again["notes"] == [] and again["indexed"]["read"] == 0
