"""``DashboardView``: what the screens may read of the controller, and the words for it.

A screen holds a view, not the app: it reads the run to draw, the compared pair, the header's
text and the baseline of a run, and can change nothing. No Textual here, so the header's text
is tested without a terminal.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from spectui.config import RunConfig
from spectui.metrics.envelope import header_envelope
from spectui.metrics.live import LiveRun
from spectui.ui.chat import ShownTurn
from spectui.ui.labels import (
    HeaderInfo,
    artifact_label,
    backend_label,
    breach_label,
    envelope_items,
    model_label,
    prompt_label,
    recorded_label,
    run_label,
    sampling_label,
)
from spectui.ui.replay import replay_detail
from spectui.ui.state import Baseline, RunState

if TYPE_CHECKING:
    from spectui.ui.controller import DashboardController


class DashboardView:
    def __init__(self, controller: DashboardController) -> None:
        self._ctl = controller

    @property
    def live(self) -> LiveRun:
        """The run on the main screen (live or replayed)."""
        return self._ctl.live

    @property
    def compare(self) -> tuple[LiveRun, LiveRun] | None:
        """The compared pair (baseline, candidate), once there is one."""
        return self._ctl.side_by_side.pair

    def turns(self) -> list[ShownTurn] | None:
        """The conversation's turns down to the run on screen (its own last), or None when
        that run is no turn of a conversation."""
        return self._ctl.chat.shown_before(self._ctl.live)

    def shown_config(self) -> RunConfig:
        """The config of the recording on screen, else the one the next run uses."""
        ctl = self._ctl
        if ctl.replay_path is not None and ctl.live.header is not None:
            return ctl.live.header.config
        # a chat turn on screen runs its own config (the composer's message as its prompt, the
        # conversation before it): the header names that, not the prompt the dashboard opened on
        run = ctl.current
        turn = getattr(run, "config", None)
        if getattr(run, "live", None) is ctl.live and isinstance(turn, RunConfig) and turn.conversation:
            return turn
        return ctl.config

    def baseline_for(self, live: LiveRun) -> Baseline | None:
        """The AR baseline of ``live``'s setup, if this dashboard ran or opened one."""
        return self._ctl.baselines.for_run(live)

    def breach_marker(self, live: LiveRun) -> str:
        """``breach 00:42 headroom 8.1 GiB < floor 10.0 GiB``: the first limit of the declared
        envelope that ``live`` crossed, when and by what; "" while it holds (and at a new run)."""
        return breach_label(self._ctl.breaches_for(live))

    def header_info(self, now: float | None = None) -> HeaderInfo:
        ctl = self._ctl
        cfg = self.shown_config()
        live, state = ctl.live, ctl.state
        h = live.header if live.header is not None and live.header.config.target == cfg.target else None
        if h is not None:
            target, quant = artifact_label(h.artifacts.target, cfg.target)
        else:
            target, quant = ctl.models.get(cfg.target, (model_label(cfg.target), ""))
        loaded_draft = h.artifacts.draft if h is not None and h.config.draft.flag == cfg.draft.flag else None
        draft_path = loaded_draft.path if loaded_draft is not None else ""
        detail = ctl.detail
        if state in (RunState.RUNNING, RunState.STOPPING):
            detail = f"{live.n_tokens}/{cfg.max_tokens} tokens"
        elif state is RunState.REPLAY and ctl.player is not None:
            now = time.monotonic() if now is None else now
            detail = replay_detail(ctl.player, live, now, truncated=ctl.replay_truncated)
        elif state in (RunState.DONE, RunState.INTERRUPTED) and live.end is not None:
            detail = f"{live.n_tokens} tokens ({live.end.reason})"
        if ctl.replay_path is not None:
            recording, path = "replay", ctl.replay_path
        elif not ctl.record:
            recording, path = "off", ""
        else:
            recording = "rec"
            path = str(ctl.recording_path) if ctl.recording_path is not None else f"{ctl.recordings_dir}/ (on run)"
        return HeaderInfo(
            # a node's run (--host) names the node: the numbers are that machine's
            backend=backend_label(cfg.backend.name) + (f" @ {h.node}" if h is not None and h.node else ""),
            target=target,
            quant=quant,
            # the one label of a run (the compare column and the history say the same), naming
            # the draft file the run on screen loaded when it is this configuration's
            draft=run_label(cfg, draft_path),
            sampling=sampling_label(cfg.sampling),
            prompt=prompt_label(cfg),
            state=state.value,
            detail=detail,
            recording=recording,
            path=path,
            # the run's own envelope (its floor resolved for its host) once it has a header
            envelope=envelope_items(header_envelope(h) if h is not None else cfg.envelope),
            breach=self.breach_marker(live),
        )

    def compare_title(self) -> str:
        ctl = self._ctl
        if ctl.side_by_side.files is not None:
            return f"compare · files {ctl.side_by_side.files[0]}  vs  {ctl.side_by_side.files[1]}"
        if ctl.side_by_side.pair is None:
            return "compare · press r to run AR, then speculative"
        base, cand = ctl.side_by_side.pair
        if ctl.versus is not None:  # compare --hosts: node A, then node B, same settings
            which = ctl.live.header.node if ctl.live.header is not None else ""  # the side running now
            state = f"{ctl.state}: {which}" if ctl.running and which else str(ctl.state)
            return f"compare · live, node A then node B · {state}"
        if ctl.pair_in_flight or ctl.side_by_side.interleave:
            how = "live, interleaved block by block (each clock without the other's time)"
            state = str(ctl.state)
        else:
            how = "live, one after the other"
            which = "AR" if ctl.live is base else recorded_label(cand.header)
            state = f"{ctl.state}: {which}" if ctl.running else str(ctl.state)
        return f"compare · {how} · {state}"
