"""The machine around a run, behind one interface (``Host``) with one implementation per OS.

``new_host()`` builds the implementation for this OS, chosen once at import
(``HOST_CLASS``): ``LinuxHost`` (sysfs and /proc, ``linux.py``), ``MacHost`` (Mach, the
Objective-C runtime, sysctl and pmset, ``macos.py``; its text parsers are in
``macos_text.py``), or the base ``Host``, which reports every signal as not available. The
memory sampler asks it for swap traffic, memory pressure and the GPU's working-set limit at
every sample, and for the slow signals (thermal state, throttling, fans, power) through
``HostSignals``, which refreshes them on the host's own schedule. Every reader returns ``None``
(pressure ``-1.0``) when its source is missing: a VM exposes no thermal zones, a desktop no
power supply. That is "not available", never zero, and a source found missing once is not
looked for again (a probe per sample would cost more than the reading).

Other processes' CPU load (``OtherLoad``, ``top_other_processes``) is the same on every OS:
``load.py``.
"""

from __future__ import annotations

import sys

from spectui.metrics.host.base import Host, HostReading
from spectui.metrics.host.linux import LinuxHost
from spectui.metrics.host.load import CpuSnapshot, OtherLoad, cpu_snapshot, top_other_processes
from spectui.metrics.host.macos import MacHost

__all__ = [
    "HOST_CLASS", "CpuSnapshot", "Host", "HostReading", "HostSignals", "LinuxHost", "MacHost", "OtherLoad",
    "cpu_snapshot", "host_class", "new_host", "top_other_processes",
]  # fmt: skip


def host_class(platform: str = sys.platform) -> type[Host]:
    if platform.startswith("linux"):
        return LinuxHost
    if platform == "darwin":
        return MacHost
    return Host


#: this OS's implementation, chosen once
HOST_CLASS = host_class()


def new_host() -> Host:
    """A fresh reader for this machine (each keeps its own throttle-event count). A reader
    that cannot start at all reads as not available rather than stopping the sampler."""
    try:
        return HOST_CLASS()
    except Exception:  # noqa: BLE001 - e.g. a locked-down sandbox without /sys or libc access
        return Host()


class HostSignals:
    """The slow host readings, refreshed at most every ``every_s`` (repeated in between)."""

    def __init__(self, host: Host | None = None, every_s: float | None = None) -> None:
        self.host = host if host is not None else new_host()
        self.every_s = self.host.slow_every_s if every_s is None else every_s
        self._last = HostReading()
        self._at = -1e18

    def read(self, now_s: float) -> HostReading:
        if now_s - self._at >= self.every_s:
            self._at = now_s
            try:
                self._last = self.host.slow()
            except Exception:  # noqa: BLE001 - a host reading must never stop the sampler
                self._last = HostReading()
        return self._last
