"""A real OpenSSH server on 127.0.0.1, started by the tests: the "node" is this machine.

Keys are made in a temporary folder (``ssh-keygen``); ``sshd -D`` runs with a generated
configuration (its own host key and authorized keys, loopback only, a free high port, no
passwords); the client side is a generated ``ssh_config`` whose aliases (``node-a``, ``node-b``)
point there, with the host key already in its known_hosts, handed to spectui through
``$SPECTUI_SSH``. The node's login shell does not know this test's Python, so
``$SPECTUI_REMOTE_COMMAND`` starts spectui with ``sys.executable``. The two aliases are two
spectui homes on this machine: ``node-a`` runs with the tests' data and cache folders, ``node-b``
with folders of its own (``SetEnv`` in the client's configuration, ``AcceptEnv`` in the server's).
One server serves the whole session (``node``); a test that kills its server starts its own
(``own_node``).
"""

from __future__ import annotations

import getpass
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO

START_TIMEOUT_S = 10


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sshd() -> str | None:
    return shutil.which("sshd") or next((p for p in ("/usr/sbin/sshd", "/usr/local/sbin/sshd") if os.path.exists(p)), None)


@dataclass
class Node:
    """The loopback SSH server and the environment that reaches it as ``node-a`` / ``node-b``."""

    folder: Path
    port: int
    proc: subprocess.Popen
    env: dict[str, str] = field(default_factory=dict)

    def remote_command(self) -> str:
        """How spectui starts on the node: this Python, this checkout."""
        return shlex.join(["env", f"PYTHONPATH={REPO}", f"SPECTUI_EMBEDDED_WEIGHTS={os.environ['SPECTUI_EMBEDDED_WEIGHTS']}",
                           sys.executable, "-m", "spectui"])

    def environ(self) -> dict[str, str]:
        return {**os.environ, **self.env, "SPECTUI_REMOTE_COMMAND": self.remote_command()}

    def session_processes(self) -> list[psutil.Process]:
        """What the server runs for its connections: per-session sshd processes and their commands."""
        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def kill(self) -> None:
        """The connection drops: the server and its session processes die at once (SIGKILL); the
        commands they ran are left to notice on their own."""
        sessions = [p for p in self.session_processes() if p.name().startswith("sshd")]
        for p in [psutil.Process(self.proc.pid), *sessions]:
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        self.proc.wait(timeout=5)


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, timeout=30)


def start_node(folder: Path) -> Node:
    """Keys, configurations and a running sshd in ``folder``; skips where OpenSSH is missing."""
    sshd = _sshd()
    if sshd is None or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("OpenSSH (ssh, ssh-keygen, sshd) is not installed: .ci/run installs openssh-server and openssh-client")
    for name in ("host_key", "client_key", "other_key"):
        _keygen(folder / name)
    (folder / "authorized_keys").write_text((folder / "client_key.pub").read_text())
    port = free_port()
    (folder / "sshd_config").write_text(
        f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {folder / 'host_key'}\n"
        f"AuthorizedKeysFile {folder / 'authorized_keys'}\nStrictModes no\nPidFile {folder / 'sshd.pid'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\n"
        "AllowTcpForwarding no\nX11Forwarding no\nLogLevel VERBOSE\nAcceptEnv XDG_CACHE_HOME XDG_DATA_HOME\n"
    )
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation folder
    host_key = (folder / "host_key.pub").read_text().split()
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    common = (
        f"  HostName 127.0.0.1\n  Port {port}\n  User {getpass.getuser()}\n  IdentitiesOnly yes\n  IdentityAgent none\n"
        f"  UserKnownHostsFile {folder / 'known_hosts'}\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n"
    )
    (folder / "ssh_config").write_text(
        f"Host node-a\n{common}  IdentityFile {folder / 'client_key'}\n  SetEnv {home(os.environ['XDG_CACHE_HOME'], os.environ['XDG_DATA_HOME'])}\n"
        f"Host node-b\n{common}  IdentityFile {folder / 'client_key'}\n  SetEnv {home(*second_home(folder))}\n"
        f"Host stranger\n{common}  IdentityFile {folder / 'other_key'}\n"
        f"Host nowhere\n  HostName 127.0.0.1\n  Port {free_port()}\n  UserKnownHostsFile {folder / 'known_hosts'}\n"
    )
    log = open(folder / "sshd.log", "wb")
    proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(folder / "sshd_config")], stderr=log, stdout=log)
    log.close()  # the server holds its own copy of the descriptor
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"sshd did not start: {(folder / 'sshd.log').read_text()[-500:]}")
            time.sleep(0.05)
    return Node(folder, port, proc, env={"SPECTUI_SSH": shlex.join(["ssh", "-F", str(folder / "ssh_config")])})


def stop_node(node: Node) -> None:
    """The server and whatever its sessions still run."""
    proc = node.proc
    for p in [*node.session_processes(), psutil.Process(proc.pid)] if proc.poll() is None else node.session_processes():
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    proc.wait(timeout=5)


@pytest.fixture(scope="session")
def node(tmp_path_factory) -> Node:
    """One sshd for the session's remote tests (starting one costs three key pairs); a test that
    kills its server takes ``own_node``."""
    node = start_node(tmp_path_factory.mktemp("sshd"))
    yield node
    stop_node(node)


@pytest.fixture
def own_node(tmp_path_factory) -> Node:
    """A fresh sshd for one test (the drop test kills it)."""
    node = start_node(tmp_path_factory.mktemp("sshd-own"))
    yield node
    stop_node(node)


def home(cache: str, data: str) -> str:
    return f"XDG_CACHE_HOME={cache} XDG_DATA_HOME={data}"


def second_home(folder: Path) -> tuple[str, str]:
    """node-b's cache and data folders."""
    return str(folder / "home-b" / "cache"), str(folder / "home-b" / "data")


def node_spectui_processes(node: Node) -> list[psutil.Process]:
    """``spectui node serve`` processes started through ``node`` (their environment names one
    of its two homes), wherever they were re-parented."""
    homes = {os.environ["XDG_DATA_HOME"], second_home(node.folder)[1]}
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if cmd[-2:] == ["node", "serve"]:
            try:
                if p.environ().get("XDG_DATA_HOME") in homes and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except (psutil.AccessDenied, psutil.NoSuchProcess):
                pass
    return out
