"""``spectui compare --hosts node-a,node-b``: the same session on two nodes of the loopback SSH
server (``tests/remote/conftest.py``), side by side: headless as ``spectui diff`` prints, and in
the dashboard's compare screen in a real terminal (tmux), each column naming its node. Both
"nodes" are this machine, so under greedy decoding their outputs must agree token for token."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys

import pytest

from spectui.errors import SpectuiError
from spectui.recording.reader import read_recording
from spectui.recording.schema import Step
from tests.conftest import REPO, seed_calibrations
from tests.remote.conftest import second_home
from tests.remote.test_remote import TIMEOUT_S, spectui
from tests.ui.test_tmux_e2e import Tmux

pytestmark = [pytest.mark.server, pytest.mark.slow]

SESSION = ("--mode", "spec", "--draft", "ngram", "--k", "3", "--max-tokens", "12", "--threads", "1", "--prompt", "Name a colour.")


def tokens(path) -> list[int]:  # noqa: ANN001
    return [t for e in read_recording(path).events if type(e) is Step for t in e.tokens]


def complete(path) -> bool:  # noqa: ANN001
    try:
        return read_recording(path).complete
    except (OSError, SpectuiError):  # not made yet, or its header not written yet
        return False


def test_two_nodes_side_by_side_headless(node, tmp_path):
    out = tmp_path / "pair"
    proc = spectui(node, "compare", "--hosts", "node-a,node-b", "--headless", *SESSION, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    a, b = out / "node-a.spectui", out / "node-b.spectui"
    assert [read_recording(p).header.node for p in (a, b)] == ["node-a", "node-b"]
    assert tokens(a) == tokens(b) and tokens(a)
    assert "node-a.spectui" in proc.stdout and "node-b.spectui" in proc.stdout  # the baseline and candidate columns
    assert f"identical: {len(tokens(a))} tokens" in proc.stdout and "speed" in proc.stdout
    doc = json.loads(spectui(node, "compare", "--hosts", "node-a,node-b", "--json", "--no-record", *SESSION).stdout)
    assert doc["outputs"]["identical"] and doc["baseline"]["file"].endswith("node-a.spectui")


def test_bad_hosts_are_one_line(node):
    for hosts, words in (("node-a", "name two nodes"), ("node-a,node-a", "name two nodes")):
        proc = spectui(node, "compare", "--hosts", hosts, "--headless")
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and words in proc.stderr, proc.stderr
    proc = spectui(node, "compare", "--hosts", "node-a,node-b", "--host", "node-a", "--headless")
    assert proc.returncode == 2 and "not both" in proc.stderr


@pytest.mark.ui
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_compare_screen_streams_node_a_then_node_b_live(node, tmp_path, calibrations):
    """In a terminal the pair runs inside the dashboard: node A's run streams into the baseline
    column while node B's waits, then node B's into the candidate column; ``r`` there runs the
    pair again live (the ``-2`` recordings, made by the dashboard)."""
    tmux = Tmux(f"spectui-compare-nodes-{id(tmp_path)}")
    env = " ".join(f"{k}={shlex.quote(node.environ()[k])}" for k in ("SPECTUI_SSH", "SPECTUI_REMOTE_COMMAND"))
    seed_calibrations(calibrations, second_home(node.folder)[0])  # node-a's home is the session cache
    session = [*SESSION[:-4], "--max-tokens", "64", *SESSION[-2:]]  # long enough to be seen mid-stream
    out = tmp_path / "pair"
    argv = shlex.join([sys.executable, "-m", "spectui", "compare", "--hosts", "node-a,node-b", *session, "--out", str(out)])
    script = tmp_path / "compare.sh"  # the quoted settings in a file: Tmux.start wraps its line in sh -c '...'
    script.write_text(f"exec env {env} {argv}\n")
    status = tmp_path / "exit-status"
    seen: list[str] = []

    def both_done(screen: str) -> bool:
        seen.append(screen)
        return "node A then node B · done" in screen and "outputs identical" in screen

    try:
        tmux.start(f"sh {script}", cwd=REPO, status_file=status, size=(140, 32))
        screen = tmux.wait_for(both_done, "both nodes' runs", timeout=TIMEOUT_S)
        assert "baseline: spec n-gram K=3 @ node-a" in screen and "candidate: spec n-gram K=3 @ node-b" in screen, screen
        # live, not opened from files: the pair was on screen while it ran
        assert any("node A then node B · " in s and "· done" not in s for s in seen), seen[-1]
        assert sorted(p.name for p in out.glob("*.spectui")) == ["node-a.spectui", "node-b.spectui"]
        tmux("send-keys", "-t", "e2e", "r")
        again = (out / "node-a-2.spectui", out / "node-b-2.spectui")
        tmux.wait_for(lambda s: all(complete(p) for p in again) and "outputs identical" in s, "the pair run again",
                      timeout=TIMEOUT_S)
        tmux.quit()
        assert status.read_text().strip() == "0", tmux.screen()
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=30)
    a, b = (out / "node-a.spectui", out / "node-b.spectui")
    assert [read_recording(p).header.node for p in (a, b)] == ["node-a", "node-b"]
    assert tokens(a) == tokens(b) == tokens(out / "node-a-2.spectui") and len(tokens(a)) > 12
