"""The watch dashboard in a real terminal (tmux) on a real llama-server drafting with n-grams,
while a client in this test sends it requests: the screen shows the acceptance counters move as
requests finish (per draft position too), says that llama-server counts a request when it
finishes, and ``q`` quits with exit status 0. The watch itself adds no request: the server's log
shows exactly the client's completions, and the recording's counts are the client's.

Loads a model in llama-server: run it under the shared lock (``flock /tmp/spectui-model.lock``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spectui.recording.reader import read_recording
from spectui.watch.record import read_watch
from tests.conftest import REPO
from tests.server.conftest import start_server
from tests.ui.test_tmux_e2e import Tmux, words
from tests.watch.test_watch_llama_server import complete

pytestmark = [
    pytest.mark.slow,
    pytest.mark.server,
    pytest.mark.ui,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]
WAIT_S = 120.0


@pytest.fixture
def spec_server(llama_server_binary, model_path, tmp_path):
    args = ["-m", model_path, "-c", "2048", "-t", "2", "-np", "1", "--metrics", "--no-webui", "--spec-type", "ngram-simple"]
    server = start_server(args, "/health", str(tmp_path), program=llama_server_binary.path)
    yield server
    server.stop()


def drafted_total(screen: str) -> int | None:
    """The whole watch's drafted tokens as the stats panel shows them (``accepted 70.0% of 180``)."""
    m = re.search(r"accepted +[\d.]+% of (\d+)", screen)
    return int(m.group(1)) if m else None


def test_the_watch_dashboard_shows_acceptance_move_in_tmux(spec_server, tmp_path):
    tmux = Tmux(f"spectui-watch-{os.getpid()}")
    out = tmp_path / "watch.spectui"
    status_file = tmp_path / "exit-status"
    try:
        tmux.start(f"{sys.executable} -m spectui watch {spec_server.url} --interval 0.25 -o {out}", cwd=REPO,
                   status_file=status_file, size=(110, 34))  # fmt: skip
        screen = tmux.wait_for(lambda s: "watching llama-server at" in s and "Quit" in s, "the watch dashboard", WAIT_S)
        assert "no draft counted yet" in words(screen)
        assert "counts a request's tokens and drafts when it finishes" in words(screen)
        assert re.search(r"server process: llama-server pid \d+", screen), screen  # found behind the loopback port

        timings = [complete(spec_server.url)["timings"]]
        screen = tmux.wait_for(lambda s: drafted_total(s) is not None, "the first request's drafts on screen", WAIT_S)
        first = drafted_total(screen)
        assert first == int(timings[0].get("draft_n", 0)), screen
        assert re.search(r"pos  1 █", screen), screen  # acceptance per draft position, as bars

        timings.append(complete(spec_server.url)["timings"])
        screen = tmux.wait_for(lambda s: (drafted_total(s) or 0) > (first or 0), "the counters to move on screen", WAIT_S)
        assert drafted_total(screen) == sum(int(t.get("draft_n", 0)) for t in timings), screen

        tmux.quit()
        assert status_file.read_text().strip() == "0", tmux.screen()
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=30)

    watch = read_watch(read_recording(out))
    assert watch.end is not None and watch.end.reason == "interrupted"
    assert watch.totals.draft_tokens == sum(int(t.get("draft_n", 0)) for t in timings)
    assert watch.totals.accepted_tokens == sum(int(t.get("draft_n_accepted", 0)) for t in timings)
    assert watch.totals.generated_tokens == sum(int(t["predicted_n"]) for t in timings)
    time.sleep(0.2)
    log = Path(spec_server.log).read_text(errors="replace")
    assert log.count("processing task") == len(timings), "the server ran a completion the client did not send"
