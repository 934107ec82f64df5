"""The dashboard's controller without Textual or Pilot: real notes, real recordings (tests/data
and recordings/), and a real ``SessionRunner`` on the embedded model for live runs.

``Host`` stands in for the app: notes queue up as in Textual's message queue (thread-safe,
never blocking the engine) and ``pump`` is the UI thread's loop: it hands each note to the
controller and drains the outboxes once per repaint tick, as the app's timer does.

Live runs load the embedded model: run this module under the shared model lock
(``flock /tmp/spectui-model.lock python3 -m pytest tests/unit/test_ui_controller.py``).
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgspec
import pytest

from spectui.config import BackendConfig, RunConfig
from spectui.drafting import DraftConfig, Fixed
from spectui.metrics.live import LiveRun
from spectui.metrics.stats import summarize
from spectui.recording.reader import read_recording
from spectui.recording.schema import INTERLEAVED_CLOCK, Step
from spectui.sessions.notes import Outbox, SessionEvents, SessionFinished, SessionStatus
from spectui.sessions.runner import SessionRunner
from spectui.ui.controller import DashboardController
from spectui.ui.replay import ReplayPlayer
from spectui.ui.state import Baseline, RunState
from spectui.ui.view import DashboardView

REPO = Path(__file__).resolve().parents[2]
FIXED_SPEC = REPO / "tests" / "data" / "fixed-session.spectui"
FIXED_AR = REPO / "tests" / "data" / "fixed-session-ar.spectui"
RECORDINGS = sorted((REPO / "recordings").glob("*.spectui"))
PROMPT = "Fix the typos and return the text otherwise unchanged: the quik brown fox jumps ovr the lazy dog."
WAIT_S = 180.0  # generous: the machine is shared; nothing asserts on time
TICK_S = 1 / 12  # the app's repaint tick (REPAINT_HZ), without importing the app
ENDED = (RunState.DONE, RunState.INTERRUPTED, RunState.ERROR, RunState.IDLE)


def real_config(**changes) -> RunConfig:  # noqa: ANN003
    """The embedded model on one llama.cpp thread (a second one spin-waits on a shared box)."""
    return RunConfig(prompt=PROMPT, backend=BackendConfig(n_threads=1), **changes)


class Host:
    """The controller's host in a test: what the app is to it, minus Textual."""

    def __init__(self) -> None:
        self.notes: queue.Queue = queue.Queue()
        self.posted: list = []
        self.notices: list[tuple[str, str, str]] = []  # (severity, title, message)
        self.replay_changes = 0

    def post_note(self, note) -> None:  # noqa: ANN001
        self.posted.append(note)
        self.notes.put(note)

    def notify(self, message: str, *, title: str = "", severity="information", timeout=None) -> None:  # noqa: ANN001
        self.notices.append((severity, title, message))

    def replay_mode_changed(self) -> None:
        self.replay_changes += 1

    def deliver(self, ctl: DashboardController) -> int:
        """Hand every queued note to the controller; how many there were."""
        n = 0
        while True:
            try:
                note = self.notes.get_nowait()
            except queue.Empty:
                return n
            ctl.on_note(note)
            n += 1

    def pump(self, ctl: DashboardController, until, what: str, timeout: float = WAIT_S) -> None:  # noqa: ANN001
        """The UI thread: notes as they come, a drain per tick, until ``until()``."""
        deadline = time.monotonic() + timeout
        next_tick = time.monotonic()
        while not until():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (state {ctl.state})")
            try:
                ctl.on_note(self.notes.get(timeout=0.005))
            except queue.Empty:
                pass
            if time.monotonic() >= next_tick:
                ctl.drain(clear_wake=True)
                next_tick += TICK_S

    def finish(self, ctl: DashboardController) -> None:
        """Until the session ended and every note of it was handled."""
        self.pump(
            ctl,
            lambda: ctl.state in ENDED and not ctl.runner.busy and self.notes.empty(),
            "the session to end",
        )


@pytest.fixture(scope="module")
def runner():
    """One real engine thread for the module: the embedded model loads once."""
    r = SessionRunner()
    thread = threading.Thread(target=r.serve, name="spectui-engine", daemon=True)
    thread.start()
    yield r
    r.shutdown()
    thread.join(60)


def controller(runner: SessionRunner, tmp_path: Path, **changes) -> tuple[DashboardController, Host]:  # noqa: ANN003
    host = Host()
    return DashboardController(real_config(**changes), host, recordings_dir=tmp_path, runner=runner), host


def recorded(path: Path) -> tuple[list[int], int]:
    events = read_recording(path).events
    return [t for e in events if type(e) is Step for t in e.tokens], len(events)


# -- live runs on the real engine -------------------------------------------------------------


def test_a_live_run_folds_every_event_of_its_recording(runner, tmp_path):
    ctl, host = controller(runner, tmp_path, max_tokens=16)
    assert ctl.state is RunState.IDLE and not ctl.running
    info = DashboardView(ctl).header_info()
    assert (info.backend, info.target, info.draft, info.sampling) == (
        "llama.cpp", "SmolLM2-135M-Instruct.Q4_1", "spec n-gram K=1..16 adaptive", "greedy"
    )
    assert (info.state, info.detail, info.recording) == ("idle", "press r to run", "rec")
    assert info.path == f"{tmp_path}/ (on run)"

    ctl.start_run()
    assert ctl.state is RunState.STARTING and ctl.running
    seen = []
    host.pump(ctl, lambda: (seen.append(ctl.state), ctl.state in ENDED)[1], "the run to end")
    host.finish(ctl)
    assert RunState.RUNNING in seen and ctl.state is RunState.DONE, ctl.detail

    (path,) = tmp_path.glob("*.spectui")
    assert ctl.recording_path == path
    tokens, n_events = recorded(path)
    assert ctl.live.tokens == tokens and ctl.live.n_events == n_events
    info = DashboardView(ctl).header_info()
    assert info.state == "done" and info.detail == f"{len(tokens)} tokens ({ctl.live.end.reason})"
    assert info.path == str(path)
    # the events came in batches: far fewer wake-ups than events
    wakeups = [n for n in host.posted if type(n) is SessionEvents]
    assert 1 <= len(wakeups) <= n_events


def test_stop_in_the_middle_ends_interrupted(runner, tmp_path):
    ctl, host = controller(runner, tmp_path, max_tokens=400)
    ctl.start_run()
    host.pump(ctl, lambda: ctl.live.n_tokens >= 2, "the first tokens")
    ctl.stop_run()
    assert ctl.state is RunState.STOPPING
    host.finish(ctl)
    assert ctl.state is RunState.INTERRUPTED and ctl.live.end.reason == "interrupted"
    (path,) = tmp_path.glob("*.spectui")
    assert read_recording(path).events[-1].reason == "interrupted"
    assert ctl.live.tokens == recorded(path)[0]


def test_a_new_run_drops_the_notes_of_the_one_it_supersedes(runner, tmp_path):
    ctl, host = controller(runner, tmp_path, max_tokens=400)
    ctl.start_run()
    host.pump(ctl, lambda: ctl.live.n_tokens >= 1, "the first run's tokens")
    first_id = ctl.run_id
    ctl.start_run(msgspec.structs.replace(ctl.config, max_tokens=12, mode="ar"))  # stops the first:
    # its last steps and its finish still arrive, under its old run id
    assert ctl.run_id == first_id + 1
    host.pump(ctl, lambda: ctl.live.end is not None, "the second run")
    host.finish(ctl)
    assert ctl.state is RunState.DONE
    assert any(type(n) is SessionFinished and n.run_id == first_id for n in host.posted)
    # the screen holds the second run only, event for event
    assert ctl.live.header.config.mode == "ar"
    assert (ctl.live.tokens, ctl.live.n_events) == recorded(ctl.recording_path)
    first = [p for p in tmp_path.glob("*.spectui") if p != ctl.recording_path]
    assert len(first) == 1 and read_recording(first[0]).events[-1].reason == "interrupted"


def test_a_settings_change_during_a_run_stops_it_for_a_restart(runner, tmp_path):
    ctl, host = controller(runner, tmp_path, max_tokens=400, draft=DraftConfig(length=Fixed(k=4)))
    assert ctl.step_k(+1) is False  # nothing runs: no restart
    assert ctl.config.draft.fixed_k == 5
    ctl.start_run()
    host.pump(ctl, lambda: ctl.state is RunState.RUNNING, "the run")
    assert ctl.step_k(+1) is True and ctl.restart_pending
    assert ctl.state is RunState.STOPPING and ctl.config.draft.fixed_k == 6
    ctl.start_run()  # what the app's debounce timer does
    assert not ctl.restart_pending
    host.pump(ctl, lambda: ctl.live.n_tokens >= 1, "the restarted run")
    ctl.stop_run()
    host.finish(ctl)
    assert ctl.live.header.config.draft.fixed_k == 6
    assert ctl.step_temperature(-0.1) is False  # greedy already: no change, nothing to restart
    assert ctl.toggle_mode() is False and ctl.config.mode == "ar"


def test_compare_runs_ar_then_speculative_and_keeps_the_baseline(runner, tmp_path):
    ctl, host = controller(runner, tmp_path, max_tokens=16)
    assert DashboardView(ctl).compare_title() == "compare · press r to run AR, then speculative"
    ctl.run_compare()
    base, cand = ctl.side_by_side.pair
    assert ctl.live is base and DashboardView(ctl).compare_title() == "compare · live, one after the other · starting: AR"
    host.pump(ctl, lambda: base.end is not None and cand.end is not None, "both runs")
    host.finish(ctl)
    assert ctl.state is RunState.DONE
    assert base.header.config.mode == "ar" and cand.header.config.mode == "spec"
    assert cand.header.started_at >= base.header.started_at  # one after the other
    n = min(len(base.tokens), len(cand.tokens))
    assert n > 0 and base.tokens[:n] == cand.tokens[:n]  # greedy: the same text
    paths = ctl.side_by_side.paths()
    assert paths is not None and [recorded(Path(p))[0] for p in paths] == [base.tokens, cand.tokens]
    baseline = DashboardView(ctl).baseline_for(cand)
    assert baseline == Baseline(base.decode_tok_s(), base.mean_ar_step_us)
    assert DashboardView(ctl).compare_title() == "compare · live, one after the other · done"


def test_compare_interleaved_runs_both_on_two_contexts(runner, tmp_path):
    ctl, host = controller(runner, tmp_path, max_tokens=12)
    ctl.toggle_interleave()
    ctl.run_compare()
    base, cand = ctl.side_by_side.pair
    host.pump(ctl, lambda: base.end is not None and cand.end is not None, "both runs")
    host.finish(ctl)
    assert ctl.state is RunState.DONE, ctl.detail
    assert "interleaved block by block" in DashboardView(ctl).compare_title()
    recs = [read_recording(Path(p)) for p in ctl.side_by_side.paths()]
    assert all(r.header.clock == INTERLEAVED_CLOCK for r in recs)
    assert [[t for e in r.events if type(e) is Step for t in e.tokens] for r in recs] == [base.tokens, cand.tokens]


def test_a_pair_runs_each_side_on_the_engine_service_it_names(runner, tmp_path):
    """``run_pair`` takes two engine sources: here the module's engine thread for the baseline
    and a second one (its own engine) for the candidate; each side's session is served by its
    own, one after the other. ``versus`` (``compare --hosts A,B`` in the dashboard) is such a
    pair: ``run_compare`` runs the same settings on the dashboard's engine service (node A) and
    then on node B's, each recorded where its namer says."""
    from spectui.ui.runs.pairs import NodePair

    other = SessionRunner()
    thread = threading.Thread(target=other.serve, name="spectui-engine-2", daemon=True)
    thread.start()
    try:
        host = Host()
        namers = tuple((lambda _cfg, n=name: tmp_path / f"{n}.spectui") for name in ("node-a", "node-b"))
        ctl = DashboardController(real_config(max_tokens=12), host, recordings_dir=tmp_path, runner=runner,
                                  versus=NodePair(other, record_to=namers))
        assert ctl.runners == (runner, other)
        ctl.run_compare()
        base, cand = ctl.side_by_side.pair
        assert ctl.live is base
        host.pump(ctl, lambda: base.end is not None and cand.end is not None, "both runs")
        host.pump(ctl, lambda: ctl.state in ENDED and not other.busy and host.notes.empty(), "the pair to end")
    finally:
        other.shutdown()
        thread.join(60)
    assert ctl.state is RunState.DONE, ctl.detail
    assert other.loads == 1  # the candidate ran on the other engine service's own engine
    assert cand.header.started_at >= base.header.started_at
    assert base.header.config == cand.header.config  # the same settings on both sides
    assert base.tokens and base.tokens == cand.tokens
    assert ctl.side_by_side.paths() == (str(tmp_path / "node-a.spectui"), str(tmp_path / "node-b.spectui"))
    assert recorded(tmp_path / "node-b.spectui")[0] == cand.tokens


def test_bad_input_is_an_error_and_one_notice(tmp_path):
    r = SessionRunner()  # its own: the failed load must not close the module's engine
    thread = threading.Thread(target=r.serve, daemon=True)
    thread.start()
    try:
        ctl, host = controller(r, tmp_path, target=str(tmp_path / "missing.gguf"))
        ctl.start_run()
        host.finish(ctl)
    finally:
        r.shutdown()
        thread.join(60)
    assert ctl.state is RunState.ERROR and "model file not found" in ctl.detail
    assert [(s, t) for s, t, _ in host.notices] == [("error", "run failed")]
    assert DashboardView(ctl).header_info().detail == ctl.detail
    assert list(tmp_path.glob("*.spectui")) == []


# -- recordings and replay (no engine) ----------------------------------------------------------


def no_engine(_config):  # noqa: ANN001, ANN201
    raise AssertionError("a recording must never load an engine")


def idle_controller() -> tuple[DashboardController, Host]:
    host = Host()
    return DashboardController(RunConfig(prompt="(replay)"), host, record=False, engine_factory=no_engine), host


@pytest.mark.parametrize("path", [FIXED_SPEC, FIXED_AR, *RECORDINGS], ids=lambda p: p.name)
def test_an_opened_recording_is_its_final_state(path):
    ctl, host = idle_controller()
    assert ctl.open_recording(path)
    events = read_recording(path).events
    assert ctl.state is RunState.REPLAY and host.replay_changes == 1
    assert ctl.live.n_events == len(events) and ctl.live.tokens == LiveRun.from_events(events).tokens
    # (as JSON: a summary holds NaN for what a run did not measure, and NaN != NaN)
    assert msgspec.json.encode(ctl.live.summary()) == msgspec.json.encode(summarize(events))
    info = DashboardView(ctl).header_info(now=0.0)
    assert (info.recording, info.path, info.state) == ("replay", str(path), "replay")
    assert info.detail.startswith("end (") and f"{ctl.live.n_tokens} tokens" in info.detail
    assert DashboardView(ctl).shown_config() == events[0].config


def test_an_ar_recording_is_the_baseline_of_its_speculative_twin():
    ctl, _ = idle_controller()
    assert ctl.open_recording(FIXED_SPEC)
    assert DashboardView(ctl).baseline_for(ctl.live) is None
    assert ctl.open_recording(FIXED_AR)
    ar = ctl.live
    assert ctl.open_recording(FIXED_SPEC)
    assert DashboardView(ctl).baseline_for(ctl.live) == Baseline(ar.decode_tok_s(), ar.mean_ar_step_us)


def test_replay_hands_events_over_through_an_outbox():
    """Playing posts one ``SessionEvents`` wake-up per batch, as the engine thread does; the
    events fold when the note arrives (or at the next tick), not before."""
    events = read_recording(FIXED_SPEC).events
    ctl, host = idle_controller()
    assert ctl.open_recording(FIXED_SPEC, play=True, speed=1.0, now=100.0)
    assert ctl.live.n_events == 0 and ctl.replay_tick(100.0)  # the start: nothing due yet
    assert ctl.replay_tick(100.0 + 1e6)  # long past the end: everything due at once
    wakeups = [n for n in host.posted if type(n) is SessionEvents]
    assert len(wakeups) == 1 and wakeups[0].run_id == ctl.run_id and len(wakeups[0].outbox) == len(events)
    assert ctl.live.n_events == 0  # handed over, not folded yet
    assert host.deliver(ctl) == 1
    assert ctl.live.n_events == len(events) and ctl.live.end is not None
    assert ctl.player.finished and ctl.state is RunState.REPLAY  # a replay's End is not the app's
    assert ctl.replay_tick(100.0 + 2e6) is False  # finished: paused, the app's timer sleeps


def test_replay_step_and_seek_back():
    steps = [e for e in read_recording(FIXED_SPEC).events if type(e) is Step]
    ctl, host = idle_controller()
    assert ctl.open_recording(FIXED_SPEC, play=True, paused=True, now=0.0)
    assert ctl.replay_control(ReplayPlayer.step_block, 0.0) is False  # stepping leaves it paused
    old_id = ctl.run_id
    wake = host.posted[-1]
    assert type(wake) is SessionEvents and wake.run_id == old_id
    ctl.drain(clear_wake=True)  # a repaint tick folds it before the note arrives
    assert ctl.live.n_tokens == len(steps[0].tokens)
    ctl.replay_control(ReplayPlayer.step_block, 0.0)
    ctl.replay_control(lambda p, now: p.seek(-60.0, now), 0.0)  # back to the start: rebuilt
    assert ctl.run_id == old_id + 1 and ctl.live.n_tokens == 0
    host.deliver(ctl)  # the second step's wake-up, for the old position: dropped
    ctl.drain(clear_wake=True)
    assert ctl.live.n_tokens == 0
    assert ctl.replay_control(ReplayPlayer.toggle_pause, 0.0) is True  # plays from here


def test_stale_notes_fold_nothing():
    """Notes of a run id the controller did not start (or has moved past) are ignored."""
    events = read_recording(FIXED_AR).events
    ctl, _ = idle_controller()
    stale = Outbox()
    stale.extend(events)
    ctl.on_note(SessionEvents(ctl.run_id + 5, stale))
    ctl.on_note(SessionStatus(ctl.run_id + 5, "running", "/tmp/x.spectui"))
    ctl.on_note(SessionFinished(ctl.run_id + 5, error="boom"))
    ctl.drain(clear_wake=True)
    assert len(stale) == len(events) and ctl.live.n_events == 0
    assert ctl.state is RunState.IDLE and ctl.recording_path is None


def test_open_failures_are_one_notice_and_change_nothing(tmp_path):
    cut = tmp_path / "not-a-recording.spectui"
    cut.write_text("hello")
    ctl, host = idle_controller()
    assert not ctl.open_recording(tmp_path / "missing.spectui")
    assert not ctl.open_recording(cut)
    assert not ctl.open_compare(FIXED_AR, cut)
    assert [(s, t) for s, t, _ in host.notices] == [("error", "cannot open recording")] * 3
    assert str(cut) in host.notices[2][2]  # the pair's notice names the file it could not read
    assert ctl.state is RunState.IDLE and ctl.player is None and ctl.side_by_side.pair is None


def test_two_recordings_side_by_side():
    ctl, _ = idle_controller()
    assert ctl.open_compare(FIXED_AR, FIXED_SPEC)
    base, cand = ctl.side_by_side.pair
    assert base.header.config.mode == "ar" and cand.header.config.mode == "spec"
    assert ctl.side_by_side.paths() == (str(FIXED_AR), str(FIXED_SPEC))
    assert DashboardView(ctl).compare_title() == f"compare · files {FIXED_AR}  vs  {FIXED_SPEC}"


def test_engine_thread_failure_is_an_error():
    ctl, host = idle_controller()
    ctl.engine_failed(RuntimeError("boom"))
    assert ctl.state is RunState.ERROR and ctl.detail == "the engine thread failed: boom"
    assert host.notices[-1][0] == "error"


def test_run_state_values_are_what_the_header_shows():
    assert [s.value for s in RunState] == [
        "idle", "starting", "loading", "running", "stopping", "done", "interrupted", "error", "replay"
    ]
    assert {s for s in RunState if s.busy} == {RunState.STARTING, RunState.LOADING, RunState.RUNNING, RunState.STOPPING}
    assert f"{RunState.DONE}" == "done" == RunState.DONE


def test_the_controller_imports_no_ui_toolkit():
    code = (
        "import sys, spectui.ui.controller, spectui.ui.view, spectui.ui.state, spectui.ui.labels, spectui.ui.replay\n"
        "import spectui.ui.chat, spectui.ui.runs.base, spectui.ui.runs.live, spectui.ui.runs.pairs, spectui.ui.runs.replay\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', 'plotext'))\n"
        "assert not bad, bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]


def test_replay_speeds_parse_as_the_cli_documents_them():
    import math

    from spectui.ui.replay import parse_speed

    assert parse_speed("max") == math.inf and parse_speed("MAX") == math.inf  # "max" ends in "x"
    assert parse_speed("2x") == 2.0 and parse_speed("0.5") == 0.5
    for bad in ("0", "-1", "fast"):
        with pytest.raises(ValueError):
            parse_speed(bad)
