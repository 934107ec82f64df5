"""Comparing recordings, headless (no UI imports):

* ``spectui.compare.diff``: ``diff_recordings(baseline, candidate)`` -> ``RunDiff``, and its
  text and markdown formatters.
* ``spectui.compare.gate``: ``gate(baselines, candidates, thresholds)`` -> ``Verdict``.
* ``spectui.compare.thresholds``: ``GateThresholds`` alone, so the CLI can show its defaults
  without importing numpy.

Nothing is re-exported here: importing the package stays free.
"""
