"""The old home of the CLI's shared helpers, kept for the scripts in ``benchmarks/`` that still
import ``config_from_args`` and ``StopOnSignal`` from here. The CLI imports them from where they
live now: ``cli/run_flags.py`` (the run flags and the configuration they describe) and
``cli/signals.py`` (a clean stop on Ctrl-C, hangup or ``kill``); with ``cli/parsing.py``,
``cli/host_flag.py`` and ``cli/inputs.py`` they replace what this module held.
"""

from __future__ import annotations

from spectui.cli.run_flags import config_from_args
from spectui.cli.signals import StopOnSignal

__all__ = ["StopOnSignal", "config_from_args"]
