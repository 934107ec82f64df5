"""The SSH channel to a node: the system OpenSSH client, run as a subprocess.

Everything SSH is the user's: ``~/.ssh/config`` (aliases, ports, jump hosts), the agent and
``known_hosts``. spectui handles no password (``BatchMode=yes``: a key that is not accepted
fails at once instead of prompting) and opens no port. ``$SPECTUI_SSH`` replaces the ``ssh``
command (with options, e.g. ``ssh -F ~/lab/ssh_config``); ``$SPECTUI_REMOTE_COMMAND`` is how
spectui is started on the node (default ``spectui``; e.g. ``~/venv/bin/python -m spectui``).
The remote command line is fixed words joined with ``shlex``: nothing the user typed goes into
it, prompts and settings travel on stdin (``spectui.remote.wire``).

Every way the connection can fail before the handshake is one line (``SpectuiError``, exit 2):
the node unreachable, the key refused, the host key unknown, no spectui on the node, another
spectui version there.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
from collections import deque

from spectui import __version__, subprocesses
from spectui.errors import SpectuiError
from spectui.recording.schema import SCHEMA_VERSION
from spectui.remote.wire import PROTOCOL_VERSION, BrokenStream, FrameReader, Hello, Request, encode_request

#: Seconds to wait for the node's handshake once connected (spectui starting there: imports,
#: the model catalogue). Connecting itself is bounded by ssh's ConnectTimeout.
HELLO_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 10
#: A node that stops answering (a cable pulled, a sleeping Mac) is declared gone after
#: ServerAliveInterval x ServerAliveCountMax seconds, so a run cannot hang on a dead link.
ALIVE_INTERVAL_S = 5
ALIVE_COUNT = 3


def ssh_base() -> list[str]:
    return shlex.split(os.environ.get("SPECTUI_SSH", "ssh")) or ["ssh"]


def remote_spectui() -> list[str]:
    return shlex.split(os.environ.get("SPECTUI_REMOTE_COMMAND", "spectui")) or ["spectui"]


def ssh_command(host: str, *words: str) -> list[str]:
    """``ssh ... -- HOST 'spectui node serve'``: the words quoted for the node's login shell."""
    check_host(host)
    options = [
        "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
        "-o", f"ServerAliveInterval={ALIVE_INTERVAL_S}",
        "-o", f"ServerAliveCountMax={ALIVE_COUNT}",
        "-T",  # no terminal: the channel carries binary frames, and a pty would mangle them
    ]  # fmt: skip
    return [*ssh_base(), *options, "--", host, shlex.join([*remote_spectui(), *words])]


def check_host(host: str) -> None:
    if not host or host.startswith("-") or any(c.isspace() for c in host):
        raise SpectuiError(f"--host {host!r} is not a node name (an ssh alias, user@host, or ssh://user@host:port)")


class NodeChannel:
    """A running ``spectui node serve`` on a node, past its handshake."""

    def __init__(
        self, host: str, proc: subprocess.Popen[bytes], hello: Hello, reader: FrameReader, stderr: tuple[deque[str], threading.Thread]
    ) -> None:
        self.host = host
        self.proc = proc
        self.hello = hello
        self.reader = reader
        self._stderr, self._drain = stderr
        self._send_lock = threading.Lock()

    @classmethod
    def connect(cls, host: str) -> NodeChannel:
        command = ssh_command(host, "node", "serve")
        try:
            # its own session: Ctrl-C in this terminal reaches spectui, which stops the node's
            # run cleanly over the channel, and not ssh, which would cut it
            proc = subprocesses.popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0, start_new_session=True
            )
        except FileNotFoundError:
            raise SpectuiError(f"no ssh client: {command[0]} not found (install OpenSSH, or set SPECTUI_SSH)") from None
        stderr, drain = _drain(proc)
        assert proc.stdout is not None
        reader = FrameReader(proc.stdout.fileno())
        try:
            first = reader.next(timeout=HELLO_TIMEOUT_S)
        except TimeoutError:
            first = None
            _stop(proc)
            stderr.append(f"no handshake within {HELLO_TIMEOUT_S:.0f} s")
        except BrokenStream:
            first = None
        if not isinstance(first, Hello):
            # its exit status tells ssh's own failure (255) from the remote command's (127: not
            # found): let it exit by itself, stopping it only if it lingers
            try:
                proc.wait(timeout=CONNECT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                _stop(proc)
            returncode = proc.wait()
            drain.join(timeout=2)  # ssh's last line may still be on its way
            raise SpectuiError(connect_failure(host, returncode, list(stderr)))
        refusal = mismatch(host, first)
        if refusal:
            _stop(proc)
            raise SpectuiError(refusal)
        return cls(host, proc, first, reader, (stderr, drain))

    def send(self, request: Request | bytes) -> bool:
        """Write a request line; False when the channel is gone."""
        line = (request if isinstance(request, bytes) else encode_request(request)) + b"\n"
        assert self.proc.stdin is not None
        with self._send_lock:
            try:
                self.proc.stdin.write(line)
                return True
            except (BrokenPipeError, OSError, ValueError):
                return False

    def lost(self) -> str:
        """Why the channel ended: ssh's last words, once it exited (waits a moment for them)."""
        try:
            rc = self.proc.wait(timeout=ALIVE_INTERVAL_S)
        except subprocess.TimeoutExpired:
            _stop(self.proc)
            rc = self.proc.wait()
        self._drain.join(timeout=2)
        lines = [line for line in self._stderr if line.strip()]
        said = lines[-1] if lines else f"ssh exited with status {rc}"
        return said.removeprefix("ssh: ")

    def close(self) -> None:
        """End the node process: end of file on its stdin, then ssh is stopped if it lingers."""
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _stop(self.proc)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def run_on_node(host: str, words: list[str]) -> int:
    """A whole command on the node (``spectui tune --host``: its measurements belong to the
    node, stored there where the node's runs read them), its output passed through here.

    The handshake comes first, so an unreachable node or another spectui is the same one line
    as for a run; the command's words are quoted with ``shlex`` for the node's shell. The exit
    status is the command's, or 255 when the link dropped (ssh's own failures)."""
    NodeChannel.connect(host).close()
    try:
        return subprocesses.run(ssh_command(host, *words), stdin=subprocess.DEVNULL).returncode
    except KeyboardInterrupt:  # ssh got the same Ctrl-C and ended the command on the node
        return 130


def _drain(proc: subprocess.Popen[bytes]) -> tuple[deque[str], threading.Thread]:
    """ssh's and the node's stderr, read in a thread (a full pipe would stall the node); the
    last lines are kept to say why a connection failed."""
    lines: deque[str] = deque(maxlen=20)

    def read() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            lines.append(raw.decode("utf-8", "replace").rstrip())

    thread = threading.Thread(target=read, name="spectui-ssh-stderr", daemon=True)
    thread.start()
    return lines, thread


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def connect_failure(host: str, returncode: int, stderr: list[str]) -> str:
    """One line for a connection that never reached the handshake, from ssh's exit status and
    last words (ssh exits 255 for its own failures, else with the remote command's status)."""
    said = [line for line in stderr if line.strip() and not line.startswith("Warning: Permanently added")]
    text = " ".join(said)
    last = said[-1].removeprefix("ssh: ") if said else f"ssh exited with status {returncode}"
    install = f"pip install spectui=={__version__}"
    if returncode == 255 or "Connection closed" in text:
        if "Permission denied" in text:
            return f"node {host} refused the SSH key ({last}): add your public key to its authorized_keys, or load it into ssh-agent"
        if "Host key verification failed" in text or "REMOTE HOST IDENTIFICATION HAS CHANGED" in text:
            return f"node {host}'s host key is not trusted ({last}): connect once with `ssh {host}` to check and accept it"
        return f"cannot reach node {host}: {last}"
    if returncode == 127 or "command not found" in text or "No such file or directory" in text:
        return (
            f"node {host} has no spectui ({shlex.join(remote_spectui())} not found there): {install} on {host},"
            " or set SPECTUI_REMOTE_COMMAND to how spectui starts there"
        )
    if "invalid choice: 'node'" in text:
        return f"node {host} runs a spectui without remote nodes: {install} on {host}"
    return f"node {host} did not start spectui ({last})"


def mismatch(host: str, hello: Hello) -> str:
    """One line refusing a node whose spectui is not this one's (same version, same schema,
    same channel), saying what to install where; "" when they match."""
    if (hello.spectui_version, hello.schema_version, hello.protocol) == (__version__, SCHEMA_VERSION, PROTOCOL_VERSION):
        return ""
    return (
        f"node {host} runs spectui {hello.spectui_version} (schema {hello.schema_version}), this machine"
        f" {__version__} (schema {SCHEMA_VERSION}): pip install spectui=={__version__} on {host}"
        f" (or spectui=={hello.spectui_version} here)"
    )
