"""Comparing recordings, headless (no UI imports):

* ``spectui.compare.diff``: ``diff_recordings(baseline, candidate)`` -> ``RunDiff``, and its
  text and markdown formatters; ``headers`` (which header fields differ, and whether two runs
  compare at all) and ``speedup`` (the decode speedup and its bootstrap interval) are its parts.
* ``spectui.compare.gate``: ``gate(baselines, candidates, thresholds)`` -> ``Verdict``.
* ``spectui.compare.thresholds``: ``GateThresholds`` alone, so the CLI can show its defaults
  without importing numpy.

Nothing is re-exported here: importing the package stays free.

May import ``spectui.sessions``, ``spectui.engine``, ``spectui.server``, ``spectui.metrics``,
``spectui.models``, ``spectui.recording``, ``spectui.prompts``, ``spectui.config``,
``spectui.quality``, ``spectui.format`` and ``spectui.errors``. Only ``spectui.cli`` and
``spectui.ui`` sit above it; ``lab``, ``telemetry`` and ``report`` are its siblings.
"""
