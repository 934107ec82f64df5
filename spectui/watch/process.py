"""The process behind a loopback server's port, and its RSS, CPU and threads at each reading.

A watch of ``http://127.0.0.1:PORT`` (or ``localhost``) watches a server on this machine: the
process listening on that TCP port is found with psutil (``net_connections``, which reads
``/proc/net/tcp*`` and maps each socket to the process holding it; where that is refused,
each process's own ``net_connections``, ``connections`` before psutil 6.0), and each reading takes its resident memory, CPU since
the previous reading and thread count. Reading another user's process may be refused: the
watch then says so once and goes on without these numbers. A listener that is ``ssh`` (a
tunnel ``ssh -L``) or a container proxy is named as it is: its numbers are not the server's.

The process is looked up again when it is gone (the server restarted on the same port).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import psutil

from spectui.recording.watch_records import ProcessSample
from spectui.server.client import is_loopback, is_wildcard
from spectui.watch.listeners import listening_inodes, socket_inodes

#: listeners whose numbers would not be the server's: the server runs behind them
FORWARDERS = ("ssh", "docker-proxy", "kubectl", "socat", "rootlessport", "gvproxy", "vpnkit")


@dataclass(frozen=True)
class Listener:
    """What holds the port: its pid (None when another user's process holds it and this one
    may not look), or why nothing was found."""

    pid: int | None
    note: str = ""


def _takes_loopback_connections(ip: str) -> bool:
    """A listening address a connection to 127.0.0.1 or ::1 can reach: a loopback one or a
    wildcard. It finds the process behind a watched URL's port; whether a server listens
    beyond this machine is ``beyond_loopback``'s question (every wildcard does)."""
    return is_wildcard(ip) or is_loopback(ip)


def beyond_loopback(sockets: Iterable[tuple[str, int]]) -> list[str]:
    """The addresses among listening ``sockets`` (``listening_sockets``'s pairs) that accept
    connections from beyond this machine: a wildcard or any address but loopback ("*" for none)."""
    return sorted({ip or "*" for ip, _ in sockets if not is_loopback(ip)})


def _exposure(ip: str, port: int) -> str:
    """Said once when the server listens on every interface: it is reachable beyond this machine
    (spectui's own runtimes bind 127.0.0.1 only)."""
    return "" if is_loopback(ip) else f"port {port} listens on all interfaces ({ip or '*'}): the server is reachable beyond this machine"


def own_connections(proc: psutil.Process, kind: str = "tcp") -> list:
    """``proc``'s sockets: ``Process.net_connections`` (psutil 6.0 and later), else the
    ``connections`` it was called before (psutil 5.9, still a distribution's package)."""
    read = getattr(proc, "net_connections", None) or proc.connections
    return list(read(kind=kind))


def listening_sockets(pid: int) -> list[tuple[str, int]] | None:
    """The (address, port) pairs process ``pid`` and its children listen on for TCP (a server
    may serve from a child); None where any of them could not be read: a caller that must
    know where a server listens cannot take what it did not see for nothing."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except (psutil.Error, OSError):
        return None
    listening = listening_inodes()  # Linux: the kernel's listeners alone, not its whole table
    out: list[tuple[str, int]] = []
    for proc in procs:
        try:
            if listening is not None:
                try:
                    held = socket_inodes(proc.pid)
                except FileNotFoundError:
                    continue  # /proc/PID gone: a child gone since it was listed
                out += [listening[i] for i in held if i in listening]
                continue
            out += [(c.laddr.ip, c.laddr.port) for c in own_connections(proc) if c.status == psutil.CONN_LISTEN and c.laddr]
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue  # a child gone since it was listed, or exited and not yet reaped, listens nowhere
        except (psutil.Error, OSError):
            return None  # refused, or the OS's tables could not be read: not seen is not "nowhere"
    return out


def find_listener(port: int) -> Listener:
    """The process listening on TCP ``port`` for loopback connections."""
    hidden = False
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and _takes_loopback_connections(conn.laddr.ip):
                if conn.pid is not None:
                    return Listener(conn.pid, _exposure(conn.laddr.ip, port))
                hidden = True  # the socket is there; its owner is not ours to see
    except (psutil.AccessDenied, PermissionError):
        pass  # macOS without root: ask each process instead
    for proc in psutil.process_iter():
        try:
            for own in own_connections(proc):
                if own.status == psutil.CONN_LISTEN and own.laddr and own.laddr.port == port and _takes_loopback_connections(own.laddr.ip):
                    return Listener(proc.pid, _exposure(own.laddr.ip, port))
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess, PermissionError):
            continue
    if hidden:
        return Listener(None, f"the process listening on port {port} belongs to another user: no permission to read its RSS, CPU or threads")
    return Listener(None, f"no process here listens on port {port} (the server runs elsewhere): no process stats")


class ProcessProbe:
    """The server's process: ``read`` gives its numbers now (CPU since the previous read).

    ``label`` names it (``llama-server pid 1234``); ``note`` says once why there are no numbers
    (not found, no permission, a forwarder holds the port). ``read`` never raises: a process
    gone is looked up again by port, and None is returned until one is found."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.label = ""
        self.note = ""
        self._proc: psutil.Process | None = None
        self._attach()

    def _attach(self) -> None:
        found = find_listener(self.port)
        if found.pid is None:
            self._proc, self.note = None, found.note
            return
        try:
            proc = psutil.Process(found.pid)
            name = proc.name()
            proc.cpu_percent(None)  # the first call only starts the clock: the next is since now
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            self._proc, self.note = None, f"the process on port {self.port} exited as it was found"
            return
        except psutil.AccessDenied:
            self._proc, self.note = None, f"pid {found.pid} listens on port {self.port}: no permission to read its RSS, CPU or threads"
            return
        self.label = f"{name} pid {found.pid}"
        if any(name.lower().startswith(f) for f in FORWARDERS):
            self._proc = None
            self.note = f"port {self.port} is held by {self.label}, a forwarder: the server runs behind it, so no process stats"
            return
        self._proc, self.note = proc, found.note

    @property
    def found(self) -> bool:
        return self._proc is not None

    def read(self) -> ProcessSample | None:
        proc = self._proc
        if proc is None:
            return None
        try:
            with proc.oneshot():
                return ProcessSample(rss_bytes=proc.memory_info().rss, cpu_pct=round(proc.cpu_percent(None), 1), threads=proc.num_threads())
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            self._attach()  # a restart on the same port: the next reading takes the new process
            return None
        except psutil.AccessDenied:
            self._proc, self.note = None, f"{self.label}: no permission to read its RSS, CPU or threads"
            return None


def open_probe(host: str, port: int) -> ProcessProbe | None:
    """The probe for a server at ``host:port``; None when the host is not this machine."""
    return ProcessProbe(port) if is_loopback(host) else None
