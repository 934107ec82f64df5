"""``record_session``, ``open_engine`` and ``EngineCache`` on the real embedded model.

Every caller (run, quality, sweep, soak, the dashboard) records through ``record_session``, so
its promises are tested once here: no file for refused input, every yielded event on disk, the
interleaved clock, and engines reused only while they fit.
"""

from __future__ import annotations

import threading
import time

import pytest

from spectui.config import BackendConfig, RunConfig
from spectui.drafting import DraftConfig, Fixed, Model
from spectui.errors import SpectuiError
from spectui.recording.output import output_text
from spectui.recording.reader import read_recording
from spectui.recording.schema import INTERLEAVED_CLOCK, End, Header, Step
from spectui.sessions.open import EngineCache, open_engine
from spectui.sessions.protocol import EngineProtocol
from spectui.sessions.record import record_session


def config_for(engine, **overrides) -> RunConfig:  # noqa: ANN001
    base = dict(target=engine.config.target, backend=engine.config.backend, prompt="Name three colours.", max_tokens=12)
    return RunConfig(**{**base, **overrides})


def test_the_embedded_engine_is_an_engine(engine):
    assert isinstance(engine, EngineProtocol)


def test_refused_input_leaves_no_file(engine, tmp_path):
    path = tmp_path / "refused.spectui"
    too_long = config_for(engine, prompt="word " * 4000, chat=False)
    started = []
    with pytest.raises(SpectuiError, match="context holds"):
        next(record_session(engine, too_long, path, on_start=started.append))
    assert not path.exists() and not started
    with pytest.raises(SpectuiError, match="context holds"):
        engine.check(too_long)  # the same refusal, before anything runs


def test_every_yielded_event_is_on_disk_in_order(engine, tmp_path):
    path = tmp_path / "run.spectui"
    started: list = []
    events = []
    for ev in record_session(engine, config_for(engine, mode="spec"), path, on_start=started.append):
        if not events:
            assert started == [path] and path.exists()  # the file exists before the header is shown
        events.append(ev)
    rec = read_recording(path)
    assert rec.complete and rec.events == events
    assert type(events[0]) is Header and type(events[-1]) is End and events[0].clock == "wall"
    assert output_text(rec.events)


def test_record_to_may_name_the_file_from_the_config(engine, tmp_path):
    config = config_for(engine, mode="ar", max_tokens=4)
    events = list(record_session(engine, config, lambda c: tmp_path / f"{c.mode}.spectui"))
    assert read_recording(tmp_path / "ar.spectui").events == events
    assert list(record_session(engine, config, None))[-1].reason == "length"  # no recording at all


def test_stopping_ends_the_recording_with_an_interrupted_end(engine, tmp_path):
    stop = threading.Event()
    path = tmp_path / "stopped.spectui"
    for ev in record_session(engine, config_for(engine, max_tokens=64), path, stop=stop):
        if type(ev) is Step:
            stop.set()
    assert read_recording(path).events[-1].reason == "interrupted"


def test_abandoning_the_generator_still_closes_the_file(engine, tmp_path):
    path = tmp_path / "abandoned.spectui"
    session = record_session(engine, config_for(engine, max_tokens=32), path)
    for ev in session:
        if type(ev) is Step:
            break
    session.close()
    rec = read_recording(path)
    assert not rec.truncated and any(type(e) is Step for e in rec.events)


def test_the_interleaved_clock_leaves_out_the_time_away(engine, tmp_path):
    """Suspended between steps (another session's turn), a session's timestamps skip that time."""
    path = tmp_path / "interleaved.spectui"
    away_s = 0.05
    started = time.perf_counter()
    steps = 0
    for ev in record_session(engine, config_for(engine, mode="ar", max_tokens=10), path, interleaved=True):
        if type(ev) is Step:
            steps += 1
            time.sleep(away_s)  # the other session's step
    wall_us = (time.perf_counter() - started) * 1e6
    rec = read_recording(path)
    assert rec.header.clock == INTERLEAVED_CLOCK
    assert steps >= 5
    # every sleep but the last (after the final step nothing is timed any more) is left out
    assert 0 < rec.events[-1].t_us < wall_us - 0.8 * (steps - 1) * away_s * 1e6


def test_the_engine_cache_reuses_what_fits_and_closes_what_does_not(model_path):
    cache = EngineCache()
    small = BackendConfig(n_ctx=256)
    ar = RunConfig(target=model_path, mode="ar", prompt="hi", backend=small)
    first = cache.get(ar)
    assert cache.get(RunConfig(target=model_path, mode="spec", prompt="hi", backend=small)) is first  # n-gram: same models
    assert cache.loads == 1
    loads = []
    drafted = RunConfig(target=model_path, mode="spec", prompt="hi", draft=DraftConfig(drafter=Model(path=model_path), length=Fixed()), backend=small)
    second = cache.get(drafted, before_load=lambda: loads.append("loading"))
    assert second is not first and cache.loads == 2 and loads == ["loading"]
    assert first.target.ctx is None  # closed before the second load: one set of weights at a time
    assert cache.get(ar) is second  # a draft-model engine runs AR of the same target too
    cache.close()
    assert cache.engine is None


def test_open_engine_refuses_a_server_without_a_url():
    with pytest.raises(SpectuiError, match="needs a URL"):
        open_engine(RunConfig(prompt="x", backend=BackendConfig(name="server")))
