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

from spectui.recording.reader import read_recording
from spectui.recording.schema import Step
from tests.conftest import REPO
from tests.remote.test_remote import TIMEOUT_S, spectui
from tests.ui.test_tmux_e2e import Tmux

pytestmark = [pytest.mark.server, pytest.mark.slow]

SESSION = ("--mode", "spec", "--draft", "ngram", "--k", "3", "--max-tokens", "12", "--threads", "1", "--prompt", "Name a colour.")


def tokens(path) -> list[int]:  # noqa: ANN001
    return [t for e in read_recording(path).events if type(e) is Step for t in e.tokens]


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
def test_the_compare_screen_puts_node_a_beside_node_b(node, tmp_path):
    tmux = Tmux(f"spectui-compare-nodes-{id(tmp_path)}")
    env = " ".join(f"{k}={shlex.quote(node.environ()[k])}" for k in ("SPECTUI_SSH", "SPECTUI_REMOTE_COMMAND"))
    argv = shlex.join([sys.executable, "-m", "spectui", "compare", "--hosts", "node-a,node-b", *SESSION, "--out", str(tmp_path / "pair")])
    script = tmp_path / "compare.sh"  # the quoted settings in a file: Tmux.start wraps its line in sh -c '...'
    script.write_text(f"exec env {env} {argv}\n")
    status = tmp_path / "exit-status"
    try:
        tmux.start(f"sh {script}", cwd=REPO, status_file=status, size=(140, 32))
        screen = tmux.wait_for(lambda s: "@ node-b" in s and "identical" in s, "both nodes' columns", timeout=TIMEOUT_S)
        assert "baseline: spec n-gram K=3 @ node-a" in screen and "candidate: spec n-gram K=3 @ node-b" in screen, screen
        tmux.quit()
        assert status.read_text().strip() == "0", tmux.screen()
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=30)
