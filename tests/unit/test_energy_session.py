"""A session's energy (``spectui.metrics.energy_session``) and where it shows: the meter over a
RAPL fixture tree whose counter a thread advances (``SPECTUI_RAPL_ROOT``), the reason stored
where no counter exists, and ``report``, ``diff`` and ``gate`` (``--max-energy-ratio``) on
sample recordings given an energy record. No model: the real runs are in
tests/functional/test_energy_run.py."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import msgspec
import pytest

from spectui.compare.diff import diff_json, diff_recordings
from spectui.compare.diff_format import format_diff_markdown, format_diff_text
from spectui.compare.gate import GateThresholds, format_verdict_text, gate
from spectui.metrics.energy import EnergyProbe, EnergySampler
from spectui.metrics.energy_rapl import RaplReader
from spectui.metrics.energy_session import RAPL_ROOT_ENV, SessionMeter, energy_text, not_this_sessions, session_energy
from spectui.recording.reader import Recording, read_recording
from spectui.recording.schema import End, Header, ServerArtifacts, SessionEnergy
from spectui.report import format_report, report_json
from tests.unit.test_diff import sample, write_events
from tests.unit.test_energy import set_uj, zone

NO_COUNTER = "not available here: no RAPL counters under /x (most virtual machines have none)"


class AdvancingCounter:
    """A package zone whose energy_uj a thread raises by ``watts`` as time passes, as the kernel's would."""

    def __init__(self, root: Path, watts: float) -> None:
        self.pkg = zone(root, "intel-rapl:0", "package-0", 1_000_000)
        self.watts = watts
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        start = time.perf_counter()
        while not self._stop.wait(0.002):
            set_uj(self.pkg, 1_000_000 + int((time.perf_counter() - start) * self.watts * 1e6))

    def __enter__(self) -> AdvancingCounter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_the_meter_gives_joules_per_token_from_a_counter_that_advances(tmp_path, monkeypatch):
    monkeypatch.setenv(RAPL_ROOT_ENV, str(tmp_path / "powercap"))
    with AdvancingCounter(tmp_path / "powercap", watts=20.0):
        meter = SessionMeter().start()  # the 30 s grid never ticks here: start, first token and end are read
        time.sleep(0.1)  # the prefill
        meter.first_token()
        time.sleep(0.4)  # 40 tokens at 100 tok/s
        e = meter.finish(n_tokens=41)
    assert e.why_not == "" and "RAPL" in e.sources and e.readings == 3
    assert e.j_per_token is not None and e.decode_watts is not None and e.joules is not None and e.seconds is not None
    # 20 W over the whole machine; the ranges allow a loaded CI machine's late thread wake-ups
    assert 10 < e.decode_watts < 30 and 10 < e.watts < 30  # type: ignore[operator]
    assert e.j_per_token == pytest.approx(e.decode_joules / 40)  # type: ignore[operator]
    assert 0.1 < e.j_per_token < 0.3  # 20 W / 100 tok/s = 0.2 J/token
    assert e.joules > e.decode_joules  # type: ignore[operator] # the session includes the prefill
    assert "RAPL package-0" in e.by_domain


def test_one_token_has_no_per_token_figure_but_keeps_the_session(tmp_path, monkeypatch):
    monkeypatch.setenv(RAPL_ROOT_ENV, str(tmp_path / "powercap"))
    with AdvancingCounter(tmp_path / "powercap", watts=5.0):
        meter = SessionMeter(interval_s=0.05).start()
        meter.first_token()
        time.sleep(0.1)
        e = meter.finish(n_tokens=1)
    assert e.j_per_token is None and e.joules is not None and e.joules > 0 and "fewer than two tokens" in e.note


def test_no_counter_stores_why_never_a_number(tmp_path, monkeypatch):
    monkeypatch.setenv(RAPL_ROOT_ENV, str(tmp_path / "absent"))
    meter = SessionMeter().start()
    meter.first_token()
    e = meter.finish(n_tokens=10)
    if e.why_not == "":  # an NVIDIA GPU with its reader: a lent device, not this VM
        pytest.skip(f"a counter exists here: {e.sources}")
    assert e.why_not.startswith("not available here: ") and f"no RAPL counters under {tmp_path / 'absent'}" in e.why_not
    assert (e.joules, e.j_per_token, e.watts, e.seconds, e.readings) == (None, None, None, None, 0)


def test_sessions_whose_energy_is_not_their_own_say_so():
    assert "interleaved" in not_this_sessions(Header(), interleaved=True)
    assert not_this_sessions(Header()) == ""
    remote = Header()
    remote.artifacts.server = ServerArtifacts(url="http://gpu-box.lan:8080")
    assert "another machine (gpu-box.lan)" in not_this_sessions(remote)
    for url in ("http://127.0.0.1:8080", "http://localhost:9000/v1", "http://[::1]:8080"):
        remote.artifacts.server = ServerArtifacts(url=url)
        assert not_this_sessions(remote) == "", url
    assert SessionMeter().start("interleaved, say").finish(5) == SessionEnergy(why_not="interleaved, say")


def test_wake_reads_at_once_rather_than_at_the_next_tick(tmp_path):
    root = tmp_path / "powercap"
    zone(root, "intel-rapl:0", "package-0", 0)
    sampler = EnergySampler(time.perf_counter_ns(), EnergyProbe(readers=[RaplReader(str(root))]), interval_s=30)
    with sampler:
        deadline = time.monotonic() + 5
        while not sampler.samples and time.monotonic() < deadline:
            time.sleep(0.01)
        sampler.wake()
        while len(sampler.samples) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(sampler.samples) == 2  # a 30 s grid, and yet a second reading within moments


# -- report, diff and gate on recordings given an energy record ---------------------------------


def measured(j_per_token: float, watts: float = 12.0) -> SessionEnergy:
    return SessionEnergy(sources="RAPL", seconds=2.0, joules=watts * 2.0, watts=watts, decode_joules=j_per_token * 40,
                         decode_watts=watts, j_per_token=j_per_token, readings=9)


def with_energy(src: Path, dest: Path, energy: SessionEnergy | None) -> Recording:
    events = read_recording(src).events
    return read_recording(write_events(dest, [msgspec.structs.replace(ev, energy=energy) if type(ev) is End else ev for ev in events]))


@pytest.fixture
def pair(tmp_path):
    """AR at 0.05 J/token, speculative at 0.04 (the short-control samples)."""
    ar = with_energy(sample("short-control"), tmp_path / "ar.spectui", measured(0.05))
    spec = with_energy(sample("short-control", "spec"), tmp_path / "spec.spectui", measured(0.04, 14.0))
    return ar, spec


def test_report_shows_joules_per_token_beside_the_speed(pair):
    ar, _ = pair
    text = format_report(ar)
    line = next(x.strip() for x in text.splitlines() if x.strip().startswith("energy"))
    assert "0.05 J/token, 12.0 W decoding (RAPL)" in line and "session 24 J over 2.00 s" in line
    assert text.index("ITL p50") < text.index("energy") < text.index("-- memory")
    assert report_json(ar)["energy"]["j_per_token"] == 0.05


def test_report_says_not_available_here_and_old_recordings_keep_their_keys(tmp_path):
    rec = with_energy(sample("short-control"), tmp_path / "none.spectui", SessionEnergy(why_not=NO_COUNTER))
    assert f"  energy                   {NO_COUNTER}" in format_report(rec).splitlines()
    assert report_json(rec)["energy"] == {**msgspec.to_builtins(SessionEnergy()), "why_not": NO_COUNTER}
    old = read_recording(sample("short-control"))
    assert session_energy(old.events) is None and "energy" not in report_json(old)
    assert "not recorded" in energy_text(None)


def test_diff_puts_the_two_sides_and_their_ratio_side_by_side(pair):
    d = diff_recordings(*pair)
    assert d.energy is not None and d.energy.ratio == pytest.approx(0.8)
    text = format_diff_text(d)
    row = next(x for x in text.splitlines() if x.strip().startswith("J/token"))
    assert row.split()[1:] == ["(decode)", "0.05", "J", "0.04", "J", "0.80x"]
    assert text.index("-- speed") < text.index("-- energy") < text.index("-- acceptance")
    assert "| J/token (decode) | 0.05 J | 0.04 J | 0.80x |" in format_diff_markdown(d)
    assert diff_json(d)["energy"]["ratio"] == pytest.approx(0.8)
    old = diff_recordings(read_recording(sample("short-control")), read_recording(sample("short-control", "spec")))
    assert old.energy is None and "energy" not in diff_json(old) and "-- energy" not in format_diff_text(old)


def test_diff_says_why_a_side_has_no_figure(pair, tmp_path):
    ar, _ = pair
    spec = with_energy(sample("short-control", "spec"), tmp_path / "s.spectui", SessionEnergy(why_not=NO_COUNTER))
    text = format_diff_text(diff_recordings(ar, spec))
    assert f"candidate energy: {NO_COUNTER}" in text and "0.05 J" in text
    both = with_energy(sample("short-control"), tmp_path / "a.spectui", SessionEnergy(why_not=NO_COUNTER))
    lines = format_diff_text(diff_recordings(both, spec)).split("-- energy")[1].splitlines()
    assert lines[1] == f"  energy: {NO_COUNTER}" and "J/token" not in "\n".join(lines[:3])  # once, no empty table


def energy_check(v) -> dict:  # noqa: ANN001
    return {c.name: c for c in v.checks}["energy"]


def test_gate_energy_limit_both_ways(pair):
    ar, spec = pair
    holds = gate([ar], [spec], GateThresholds(max_energy_ratio=0.9))
    c = energy_check(holds)
    assert c.passed is True and c.value == pytest.approx(0.8) and c.threshold == 0.9
    assert "median 0.04 J/token (1 of 1 runs) vs 0.05 J/token" in c.detail
    broken = gate([ar], [spec], GateThresholds(max_energy_ratio=0.75))
    assert energy_check(broken).passed is False and not broken.passed and "energy" in format_verdict_text(broken).splitlines()[0]
    report_only = energy_check(gate([ar], [spec]))  # no limit: the figures, never a failure
    assert report_only.passed is None and report_only.value == pytest.approx(0.8) and "no limit set" in report_only.detail


def test_gate_limit_without_a_counter_fails_in_one_line_unless_optional(pair, tmp_path):
    ar, _ = pair
    spec = with_energy(sample("short-control", "spec"), tmp_path / "s.spectui", SessionEnergy(why_not=NO_COUNTER))
    c = energy_check(gate([ar], [spec], GateThresholds(max_energy_ratio=1.0)))
    assert c.passed is False and c.value is None and "\n" not in c.detail
    assert c.detail.startswith("the limit could not be checked: J/token could not be measured") and NO_COUNTER in c.detail
    assert "--energy-optional" in c.detail
    optional = energy_check(gate([ar], [spec], GateThresholds(max_energy_ratio=1.0, energy_optional=True)))
    assert optional.passed is None and "not checked (--energy-optional)" in optional.detail
    assert energy_check(gate([ar], [spec])).passed is None  # no limit: n/a, with the reason


def test_gate_without_energy_records_or_limit_has_no_energy_check():
    v = gate([read_recording(sample("short-control"))], [read_recording(sample("short-control", "spec"))])
    assert "energy" not in {c.name for c in v.checks}
    with pytest.raises(Exception, match="max-energy-ratio must be > 0"):
        GateThresholds(max_energy_ratio=0).validate()

