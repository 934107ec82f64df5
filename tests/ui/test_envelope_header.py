"""The declared envelope in the dashboard header, and a breach marked where it happened.

Real recordings: the fixed session, and one with its memory samples replaced by
``MemorySample`` records that cross the headroom floor (written with the real writer and read
back), opened through the same controller path a live run folds through.
"""

from __future__ import annotations

import os

import msgspec
import pytest

from spectui.config import EnvelopeConfig, RunConfig
from spectui.recording.reader import read_recording
from spectui.recording.schema import End, Header, MemorySample
from spectui.ui.labels import breach_label, clock_label, envelope_items
from spectui.ui.launch import make_app
from spectui.ui.widgets.header import RunHeader
from spectui.ui.widgets.signals import SignalGroup
from tests.unit.test_diff import write_events

from .conftest import FIXED_SPEC, REPO, visible

GIB = 2**30
MIB = 2**20
ENV = EnvelopeConfig(min_headroom_mib=10 * 1024, max_swap_in_mib=200, max_red_pressure_s=60, max_throttle_events=0)


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)


def sample_at(t_s: float, headroom: int) -> MemorySample:
    return MemorySample(
        t_us=int(t_s * 1e6), rss=300 * MIB, available=headroom, headroom=headroom, pressure=0.0, swap_in_total=0,
        red_pressure_ms=0, throttle_events=0, on_ac_power=True, low_power_mode=False, other_cpu_pct=2,
    )


def breaching_recording(tmp_path, *, breach_at: float | None = 42.5):
    """The fixed session with a declared 10 GiB floor and samples every 0.5 s to 50 s; from
    ``breach_at`` on, 8.1 GiB of headroom (None: 20 GiB throughout)."""
    events = [e for e in read_recording(FIXED_SPEC).events if type(e) is not MemorySample]
    header, end = events[0], events[-1]
    assert type(header) is Header and type(end) is End
    header = msgspec.structs.replace(header, config=msgspec.structs.replace(header.config, envelope=ENV))
    samples = [
        sample_at(i / 2, int(8.1 * GIB) if breach_at is not None and i / 2 >= breach_at else 20 * GIB)
        for i in range(100)
    ]
    end = msgspec.structs.replace(end, t_us=max(end.t_us, 50_000_000))
    path = tmp_path / f"envelope-{breach_at}.spectui"
    return write_events(path, [header, *events[1:-1], *samples, end])


def test_labels():
    assert envelope_items(ENV) == (
        "headroom ≥ 10 GiB", "swap-in ≤ 200 MiB", "red ≤ 60 s", "throttle 0", "AC",
    )
    assert envelope_items(EnvelopeConfig())[0] == "headroom ≥ auto"
    assert envelope_items(EnvelopeConfig(min_headroom_mib=9728))[0] == "headroom ≥ 9.5 GiB"
    assert "AC" not in envelope_items(EnvelopeConfig(require_ac_power=False))
    assert clock_label(42.9) == "00:42" and clock_label(3725) == "1:02:05"
    assert breach_label([]) == ""


@pytest.mark.asyncio
async def test_header_shows_envelope_and_breach_marked_in_signals(tmp_path):
    path = breaching_recording(tmp_path)
    app = make_app(RunConfig(prompt="unused"), record=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.open_recording(os.path.relpath(path, REPO))
        await pilot.pause()
        app.refresh_now()
        await pilot.pause()

        info = app.view.header_info()
        assert info.envelope == envelope_items(ENV)
        assert info.breach == "breach 00:42 headroom 8.1 GiB < floor 10.0 GiB"
        assert app.screen.query_one(RunHeader).size.height == 3
        header = await visible(pilot, "RunHeader")
        line3 = header.splitlines()[2]
        # whole limits, as many as fit at 80 columns, then "…"
        assert line3.strip() == "⚠ breach 00:42 │ envelope headroom ≥ 10 GiB · swap-in ≤ 200 MiB · red ≤ 60 s …"

        signals = await visible(pilot, "SignalGroup")
        assert "⚠ breach 00:42 headroom 8.1 GiB < floor 10.0 GiB" in signals
        assert app.screen.query_one("#signal-breach").display

        # the next run (here: a recording that holds its envelope) starts with no breach marked
        assert app.open_recording(os.path.relpath(breaching_recording(tmp_path, breach_at=None), REPO))
        await pilot.pause()
        app.refresh_now()
        await pilot.pause()
        assert app.view.header_info().breach == ""
        assert "breach" not in await visible(pilot, "SignalGroup")
        assert not app.screen.query_one("#signal-breach").display
        line3 = (await visible(pilot, "RunHeader")).splitlines()[2]
        assert line3.strip() == "envelope headroom ≥ 10 GiB · swap-in ≤ 200 MiB · red ≤ 60 s · throttle 0 · AC"


@pytest.mark.asyncio
async def test_short_screen_keeps_two_header_lines():
    app = make_app(RunConfig(prompt="unused"), record=False)
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        assert app.open_recording(os.path.relpath(FIXED_SPEC, REPO))
        await pilot.pause()
        app.refresh_now()
        await pilot.pause()
        assert app.view.header_info().envelope  # in the data, not on a 12-row screen
        assert app.screen.query_one(RunHeader).size.height == 2
        assert not app.screen.query_one(SignalGroup).query_one("#signal-breach").display
