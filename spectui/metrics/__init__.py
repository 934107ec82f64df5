"""Statistics of events: what a run measured, computed from the event stream only, so a live
run, its replay and a diff of its recording agree to the bit.

Owns ``stats`` (a run's summary, and the estimators every multi-run report shares: medians,
percentiles, the bootstrap, a trend's slope), ``live`` (the same figures folded a step at a
time for the dashboard), ``memory`` (the memory / swap / pressure sampler) and ``predict``
(the speedup a K should give, from measured costs).

May import ``spectui.recording``, ``spectui.config``, ``spectui.errors`` and ``spectui.format``;
never the engine, the UI or anything above (the layers contract in pyproject.toml).
"""
