"""End to end in a real terminal: ``spectui run`` (the dashboard) in a tmux pane, driven by keys.

A 100x30 pane with TERM=xterm-256color and no COLORTERM (no truecolor), on a private tmux
socket. The test reads the screen as a person would (``capture-pane``): the dashboard comes
up idle, ``r`` streams tokens, ``s`` stops, ``q`` quits with exit status 0 and the terminal
back on its normal screen. Every wait is bounded; the tmux server is killed in ``finally``.

Every wait is for what the screen means, not for where text happens to fall: the run state the
header shows on purpose (``header_state``), a screen's title, a verdict read with wrapped lines
joined (``words``). Measured figures are as wide as the host makes them, and a line that wraps
after them (``outputs`` at a row's end, ``identical`` on the next) never matches a wait for
text across the wrap.
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

from spectui.metrics.stats import summarize
from spectui.recording.reader import read_recording
from spectui.recording.schema import Step

from .conftest import REPO, WAIT_S

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

#: the header's state line: a mark and the run state (``widgets.header``), then its detail
_STATE_LINE = re.compile(r"^ *[○◌▶◼✔✖▷] (idle|starting|loading|running|stopping|done|interrupted|error|replay)\b(.*)$", re.M)


def header_state(screen: str) -> str:
    """The run state the dashboard's header shows (``idle``, ``running``, ``done`` ...), "" on
    a screen without the header."""
    m = _STATE_LINE.search(screen)
    return m.group(1) if m else ""


def header_detail(screen: str) -> str:
    """What the header says after the state: ``12/256 tokens``, ``40 tokens (length)``, an error."""
    m = _STATE_LINE.search(screen)
    return m.group(2).strip() if m else ""


def words(screen: str) -> str:
    """The screen's words in reading order, wrapped lines joined: for a verdict or a message
    whose line breaks fall where the figures before it push them."""
    return " ".join(screen.split())


def finished(path: Path) -> bool:
    """The recording at ``path`` exists and has its end record: its run is over."""
    try:
        return read_recording(path).complete
    except Exception:  # noqa: BLE001 - not there yet, or its header half written
        return False


class Tmux:
    def __init__(self, socket: str) -> None:
        self.socket = socket

    def __call__(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True, timeout=30
        )
        if out.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)} failed: {out.stderr.strip()}")
        return out.stdout

    def start(self, argv: str, *, cwd, status_file, env: str = "", size: tuple[int, int] = (100, 30)) -> None:  # noqa: ANN001
        """Run the shell command line ``argv`` in a new session ``e2e`` of ``size`` in ``cwd``,
        in a 256-colour terminal without truecolor, with ``env`` (``NAME=value ...``) set.

        Textual draws on stderr: it must stay the pane's terminal, so nothing is redirected.
        The exit status goes through ``status_file``: a tmux server whose SIGCHLD is blocked by
        whatever started it (seen on this build machine) never reaps the pane's process, and
        then #{pane_dead_status} stays empty. The shell waits for the app itself."""
        command = f"sh -c 'env -u COLORTERM TERM=xterm-256color {env} {argv}; echo $? > {status_file}'"
        self("new-session", "-d", "-s", "e2e", "-x", str(size[0]), "-y", str(size[1]), "-c", str(cwd), command)
        self("set-option", "-t", "e2e", "remain-on-exit", "on")

    def screen(self, *, escapes: bool = False) -> str:
        return self("capture-pane", "-p", *(["-e"] if escapes else []), "-t", "e2e")

    def pane(self, fmt: str) -> str:
        return self("display-message", "-p", "-t", "e2e", fmt).strip()

    def quit(self) -> None:
        """``q``, then wait for the pane's process to end."""
        self("send-keys", "-t", "e2e", "q")
        deadline = time.monotonic() + WAIT_S
        while self.pane("#{pane_dead}") != "1":
            if time.monotonic() > deadline:
                raise AssertionError(f"the app did not quit; the screen was:\n{self.screen()}")
            time.sleep(0.2)

    def wait_for(self, predicate, what: str, timeout: float = WAIT_S) -> str:  # noqa: ANN001
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if predicate(screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}; the screen was:\n{screen}")


def test_dashboard_in_tmux(tmp_path, calibrations):  # the session cache, calibrated (tests/conftest.py)
    tmux = Tmux(f"spectui-test-{os.getpid()}")
    recordings = tmp_path / "recordings"
    status_file = tmp_path / "exit-status"
    try:
        tmux.start(f"{sys.executable} -m spectui.ui", cwd=REPO, status_file=status_file, env=f"SPECTUI_RECORDINGS={recordings}")

        # up and idle, on the embedded model, with the keys in the footer
        screen = tmux.wait_for(lambda s: header_state(s) == "idle" and "Quit" in s, "the dashboard")
        assert "spectui" in screen and "llama.cpp" in screen and "SmolLM2" in screen
        assert "REC" in screen and "tokens" in screen and "stats" in screen
        assert tmux.pane("#{alternate_on}") == "1"  # a full-screen app, on the alternate screen

        tmux("send-keys", "-t", "e2e", "r")
        screen = tmux.wait_for(
            lambda s: header_state(s) == "running" and re.match(r"[1-9]\d*/\d+ tokens", header_detail(s))
            or header_state(s) == "done",
            "tokens to arrive",
        )
        tmux("send-keys", "-t", "e2e", "s")
        screen = tmux.wait_for(lambda s: header_state(s) in ("interrupted", "done"), "the run to stop")
        # the header names the recording; the stream shows the text the model wrote
        files = sorted(recordings.glob("*.spectui"))
        assert len(files) == 1, files
        assert files[0].name[-30:] in screen, screen
        rec = read_recording(files[0])
        assert rec.complete and rec.events[-1].reason in ("interrupted", "length", "stop")
        text = b"".join(p for e in rec.events if type(e) is Step for p in e.pieces).decode("utf-8", "replace")
        first_words = " ".join(text.split()[:2])
        assert first_words and first_words in " ".join(screen.split())
        # 256 colours and no truecolor: tmux stores what the app sent
        colours = tmux.screen(escapes=True)
        assert "38;5;" in colours or "48;5;" in colours
        assert "38;2;" not in colours and "48;2;" not in colours

        tmux.quit()
        after = tmux.screen()
        assert status_file.read_text().strip() == "0", after
        assert tmux.pane("#{alternate_on}") == "0"  # the terminal is back on its normal screen
        assert "Traceback" not in after and "Quit" not in after  # no error, no dashboard left
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=30)


def _launch(tmux: Tmux, tmp_path, recordings, *args: str, env: str = "") -> Path:  # noqa: ANN001
    """``spectui run args`` (the dashboard) in a 110x34 pane, up and idle; ``env``: more
    ``NAME=value`` settings for it. The file its exit status will be written to."""
    status_file = tmp_path / "exit-status"
    command = (
        f"sh -c 'env -u COLORTERM TERM=xterm-256color SPECTUI_RECORDINGS={recordings} {env} "
        f"{sys.executable} -m spectui run {' '.join(args)}; echo $? > {status_file}'"
    )
    tmux("new-session", "-d", "-s", "e2e", "-x", "110", "-y", "34", "-c", str(REPO), command)
    tmux("resize-window", "-t", "e2e", "-x", "110", "-y", "34")  # a tmux that made it 80x24 (seen once in CI)
    tmux("set-option", "-t", "e2e", "remain-on-exit", "on")
    tmux.wait_for(lambda s: header_state(s) == "idle" and "Quit" in s, "the dashboard")
    return status_file


def _paste(tmux: Tmux, tmp_path, text: str) -> None:  # noqa: ANN001
    """Paste as a terminal does: bracketed (-p: the app asked for it), line ends as CR."""
    buffer = tmp_path / "paste.txt"
    buffer.write_text(text)
    tmux("load-buffer", "-b", "e2e", str(buffer))
    tmux("paste-buffer", "-p", "-b", "e2e", "-t", "e2e")


def _compose(tmux: Tmux, tmp_path, *, paste: str | None = None, typed: str | None = None) -> None:  # noqa: ANN001
    tmux("send-keys", "-t", "e2e", "e")
    tmux.wait_for(lambda s: "Compose" in s and "ctrl+s send" in s, "the composer")
    if paste is not None:
        _paste(tmux, tmp_path, paste)
    if typed is not None:
        tmux("send-keys", "-t", "e2e", "-l", typed)  # typed, key by key
        # send once the text shows whole, as a person would (typing at once is tested below)
        tmux.wait_for(lambda s: typed in words(s), "the typed text in the composer", timeout=30)
    time.sleep(0.5)  # let the pane deliver the keys before the send
    tmux("send-keys", "-t", "e2e", "C-s")
    tmux.wait_for(lambda s: "ctrl+s send" not in s, "the composer to close")


def _turn_files(recordings) -> list[Path]:  # noqa: ANN001
    return sorted(recordings.glob("chat-*/turn-*.spectui"))


def _replied(screen: str, recordings, n: int) -> bool:  # noqa: ANN001
    """Turn ``n`` is over: its recording has its end record and the header says ``done``. (The
    header alone still says the last turn's ``done`` for a moment after a send; the word
    ``done`` alone may be the model's or the prompt's.)"""
    turns = _turn_files(recordings)
    return len(turns) == n and finished(turns[-1]) and header_state(screen) == "done"


def test_a_chat_in_tmux_pastes_a_file_and_follows_up(tmp_path, calibrations):
    """Type a prompt with e and ctrl+s, follow up with a request to repeat the reply, paste a
    3,000-token file, and have one longer than the context refused in one line."""
    from spectui.recording.schema import Prefill
    from spectui.sessions.conversation import rerun_paths, turn_paths

    tmux = Tmux(f"spectui-chat-{os.getpid()}")
    recordings = tmp_path / "recordings"
    source = (REPO / "spectui" / "ui" / "controller.py").read_text()
    try:
        # a fixed K, as tests/ui/test_chat.py says why: the conversation feeding the drafter is tested
        status = _launch(tmux, tmp_path, recordings, "--threads", "1", "--max-tokens", "56", "--k", "4")
        _compose(tmux, tmp_path, paste="Write a Python function that returns the squares of a list of numbers.")
        tmux.wait_for(lambda s: _replied(s, recordings, 1), "the first reply")
        follow_up = "Repeat the function you just wrote exactly, word for word."
        _compose(tmux, tmp_path, typed=follow_up)
        # the turn's recording says what was sent: the user's line on screen scrolls away under
        # a reply as long as the pane is short (one CI host drew the pane 80x24, not 110x34)
        tmux.wait_for(lambda s: _replied(s, recordings, 2), "the second reply")
        assert read_recording(_turn_files(recordings)[-1]).header.config.prompt == follow_up
        (chat,) = {p.parent for p in _turn_files(recordings)}

        # a new conversation, opened with a pasted file of about 3,000 tokens
        tmux("send-keys", "-t", "e2e", "n")
        _compose(tmux, tmp_path, paste="Summarise this file:\n\n" + source[:12000])
        tmux.wait_for(lambda s: _replied(s, recordings, 3), "the reply to the pasted file")
        (pasted,) = [p for p in _turn_files(recordings) if p.parent != chat]
        rec = read_recording(pasted)
        last_def = [line for line in source[:12000].splitlines() if line.lstrip().startswith("def ")][-1]
        assert last_def in rec.header.config.prompt and "\r" not in rec.header.config.prompt  # the paste came whole
        assert next(e for e in rec.events if type(e) is Prefill).n_tokens >= 3000

        # a file longer than the context: one line with the numbers, no run, no recording
        tmux("send-keys", "-t", "e2e", "n")
        _compose(tmux, tmp_path, paste="Summarise this file:\n\n" + source)
        # the header's state and its detail, the error's one line (the notification holds it
        # too, wrapped where its width falls)
        screen = tmux.wait_for(lambda s: header_state(s) == "error" and "context holds 4096" in header_detail(s), "the refusal")
        assert re.search(r"the prompt is \d{4} tokens but", header_detail(screen)), screen
        assert len(_turn_files(recordings)) == 3

        tmux.quit()
        assert status.read_text().strip() == "0", tmux.screen()
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=30)

    # the same conversation re-run AR (the dashboard is gone: one llama.cpp process at a time)
    first, second = turn_paths(chat)
    out = subprocess.run(
        [sys.executable, "-m", "spectui", "chat", "--rerun", str(chat), "--threads", "1"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
        env={**os.environ, "SPECTUI_RECORDINGS": str(recordings)},
    )
    assert out.returncode == 0, out.stderr
    ar = sorted(rerun_paths(chat))
    assert [read_recording(p).header.config.mode for p in ar] == ["ar", "ar"]

    def tokens(path) -> list[int]:  # noqa: ANN001
        return [t for e in read_recording(path).events if type(e) is Step for t in e.tokens]

    assert [tokens(p) for p in ar] == [tokens(first), tokens(second)]  # greedy speculation is exact, turn by turn
    p1, p2 = (next(e for e in read_recording(p).events if type(e) is Prefill) for p in (first, second))
    assert p1.n_cached == 0 and p2.n_cached > p1.n_tokens and p2.n_evaluated < 40
    s1, s2 = (summarize(read_recording(p).events) for p in (first, second))
    assert s2.accepted / s2.n_tokens > s1.accepted / s1.n_tokens, (s1.accepted, s2.accepted)  # the reply's share from drafts


def test_keys_typed_at_once_after_e_on_a_fresh_cache_are_what_is_sent(tmp_path):
    """A person's first minute: a fresh cache (so the first run calibrates), e, a sentence
    typed at once with no pause for the composer to appear, ctrl+s. The turn's recording says
    that sentence was sent: nothing glued to the previous prompt, no key lost on the way (the
    keys typed right after e once reached the dashboard instead, and ctrl+s sent the text
    before the keys still in flight to it)."""
    tmux = Tmux(f"spectui-typed-{os.getpid()}")
    recordings = tmp_path / "recordings"
    fresh = " ".join(f"{name}={tmp_path / folder}" for name, folder in (
        ("XDG_CACHE_HOME", "cache"), ("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state"), ("XDG_CONFIG_HOME", "config"),
    ))
    # dashboard keys among its letters (r, s, m, q, p, o, h, t, v): one that went astray shows
    typed = "Fix the typos: the quik brown fox jumps ovr the lazy dog, then stop."
    try:
        status = _launch(tmux, tmp_path, recordings, "--threads", "1", "--max-tokens", "16",
                         env=f"{fresh} SPECTUI_EMBEDDED_WEIGHTS=shipped")
        tmux("send-keys", "-t", "e2e", "e")
        tmux("send-keys", "-t", "e2e", "-l", typed)
        tmux("send-keys", "-t", "e2e", "C-s")
        tmux.wait_for(lambda s: _replied(s, recordings, 1), "the reply (after the first run's calibration)")
        (turn,) = _turn_files(recordings)
        assert read_recording(turn).header.config.prompt == typed
        assert (tmp_path / "cache").is_dir()  # the cache the run calibrated into was the fresh one
        tmux.quit()
        assert status.read_text().strip() == "0", tmux.screen()
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=30)
