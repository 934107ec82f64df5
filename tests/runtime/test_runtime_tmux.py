"""In a real terminal: ``spectui compare --runtime llama-server --draft runtime:ngram-mod`` runs
AR and ngram-mod on two llama-servers that spectui starts (one after the other), streams both
into the compare screen and ends with the outputs' verdict; quitting leaves no server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import psutil
import pytest

from spectui.recording.reader import read_recording
from spectui.recording.schema import Step
from tests.conftest import REPO
from tests.ui.test_tmux_e2e import Tmux, words
from tests.ui.test_tmux_walkthrough import OUTPUTS_VERDICT, compare_state

pytestmark = [pytest.mark.slow, pytest.mark.server, pytest.mark.ui,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


def servers() -> set[int]:
    return {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "llama-server"}


def test_compare_streams_both_runtime_columns_and_says_whether_outputs_match(llama_server_binary, tmp_path):
    tmux = Tmux(f"spectui-rt-{os.getpid()}")
    recordings = tmp_path / "recordings"
    status = tmp_path / "exit-status"
    before = servers()
    argv = (f"{sys.executable} -m spectui compare --runtime llama-server --llama-server {llama_server_binary.path}"
            " --draft runtime:ngram-mod --k 8 --lookup 2 --prompt-name copy-quote-paragraph --max-tokens 64"
            " --threads 1 --flash-attn on --ctx 1024")
    try:
        tmux.start(argv, cwd=REPO, status_file=status, env=f"SPECTUI_RECORDINGS={recordings}", size=(120, 36))
        screen = tmux.wait_for(lambda s: compare_state(s) == "done" and OUTPUTS_VERDICT.search(words(s)),
                               "the runtime compare pair", timeout=300)
        verdict = OUTPUTS_VERDICT.search(words(screen)).group(1)
        assert verdict == "identical", screen  # one thread, flash attention on: exact, not a near-tie
        assert "candidate: spec llama-server ngram-mo" in words(screen), screen  # the column may cut the label
        files = sorted(recordings.glob("*.spectui"))
        assert len(files) == 2, files
        recs = [read_recording(f) for f in files]
        assert {r.header.config.mode for r in recs} == {"ar", "spec"}
        for rec in recs:
            assert rec.header.config.backend.name == "llama-server"
            assert rec.complete and any(type(e) is Step for e in rec.events)
        tmux.quit()
        assert status.read_text().strip() == "0", tmux.screen()
        deadline = time.monotonic() + 15
        while servers() - before and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not servers() - before, "a llama-server outlived the compare"
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=30)
