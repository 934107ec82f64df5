"""The one interface every energy counter implements (RAPL, NVML, Apple's IOReport), so the
sampler in ``spectui.metrics.energy`` reads them all the same way."""

from __future__ import annotations


class NotAvailable(Exception):
    """This machine offers no such counter, or not to this user: the message says why, in words
    a person can act on ("no RAPL counters under /sys/class/powercap", "not Apple silicon")."""


class EnergyReader:
    """Cumulative joules per domain (a package, DRAM, a GPU) since the reader opened.

    A constructor that finds nothing to read raises ``NotAvailable``. ``domains`` lists what
    ``read_joules`` returns; ``counted`` the domains whose sum is the machine's energy (a part
    already inside another domain, such as RAPL's ``core`` inside its package, is read but not
    counted twice). ``read_joules`` may raise ``OSError`` (a counter vanished); the sampler
    counts that as a failed reading.
    """

    #: the counter's family, for a reader of the results: "RAPL", "NVML", "Apple IOReport"
    source = ""
    domains: tuple[str, ...] = ()
    counted: tuple[str, ...] = ()

    def read_joules(self) -> dict[str, float]:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the reader holds (NVML's handle); reading after it is an error."""
