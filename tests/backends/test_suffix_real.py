"""The suffix drafter on the real model: memory across requests, and a bad memory file.

(Its exactness at every K, fixed and cost-aware, is in ``test_exactness``; its sampling in
``test_sampling_real``. Its index and memory on their own: ``tests/unit/test_suffix_drafter``.)
"""

from __future__ import annotations

import warnings

import pytest

from spectui.config import RunConfig
from spectui.drafting import CostAware, DraftConfig, Lookup
from spectui.engine.drafters.suffix_memory import DraftMemoryWarning
from spectui.metrics.stats import summarize
from spectui.recording.schema import Step

PROMPT = "List the planets of the solar system in order, one per line, with one fact about each."


@pytest.fixture
def fresh_memory(engine, tmp_path, monkeypatch):
    """An empty cache dir: the engine opens its suffix memory anew from there."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    engine._suffix_memory = None
    yield tmp_path
    engine._suffix_memory = None


def run(engine, **draft) -> tuple[list[int], object]:  # noqa: ANN001
    # K priced by the cost model alone (learn_cost off): what it drafts must not depend on how
    # this machine's timings fall
    config = RunConfig(target=engine.config.target, backend=engine.config.backend, prompt=PROMPT, max_tokens=96,
                       draft=DraftConfig(drafter=Lookup(name="suffix", **draft), length=CostAware(learn=False)))
    events = list(engine.run(config, memory_interval_s=None))
    return [t for e in events if type(e) is Step for t in e.tokens], summarize(events)


def test_a_second_identical_request_drafts_more_and_stays_exact(engine, fresh_memory):
    config = RunConfig(target=engine.config.target, backend=engine.config.backend, prompt=PROMPT, max_tokens=96, mode="ar")
    ar = [t for e in engine.run(config, memory_interval_s=None) if type(e) is Step for t in e.tokens]
    first_tokens, first = run(engine)
    second_tokens, second = run(engine)
    assert first_tokens == ar and second_tokens == ar
    assert second.accepted > first.accepted and second.accepted >= 0.6 * len(ar), (first.accepted, second.accepted)
    assert second.draft_blocks < first.draft_blocks + first.n_tokens  # fewer, longer steps
    assert any(fresh_memory.rglob("draft-memory/*.msgpack"))  # kept under the user cache dir
    # opted out: the memory is not read (nor written)
    _, alone = run(engine, memory=False)
    assert alone.accepted < second.accepted


def test_a_corrupt_memory_file_is_ignored_with_one_warning(engine, fresh_memory):
    run(engine)  # writes the memory file
    (path,) = fresh_memory.rglob("*.msgpack")
    path.write_bytes(b"\x93not msgpack at all")
    engine._suffix_memory = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tokens, summary = run(engine)
    relevant = [w for w in caught if issubclass(w.category, DraftMemoryWarning)]
    assert len(relevant) == 1 and "\n" not in str(relevant[0].message)
    config = RunConfig(target=engine.config.target, backend=engine.config.backend, prompt=PROMPT, max_tokens=96, mode="ar")
    assert tokens == [t for e in engine.run(config, memory_interval_s=None) if type(e) is Step for t in e.tokens]
