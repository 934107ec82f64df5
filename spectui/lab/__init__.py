"""The lab: long and many-run experiments on the engine, headless.

Owns ``sweep`` (a plan of prompts x knob values x repeats, run and aggregated into a table per
tier with a bootstrap interval of each speedup and the knee of the K curve), ``sweep_report``
(that table as text, CSV and charts, and the floors a runbook keeps), and the soak: ``soak``
(sessions back to back into one folder), ``soak_analysis`` (the memory trend, swap and
per-window acceptance, and the verdict) and ``soak_report`` (its text).

May import ``spectui.sessions`` (``record_session``, the engine cache), ``spectui.engine``,
``spectui.server``, ``spectui.metrics``, ``spectui.models``, ``spectui.recording``,
``spectui.prompts``, ``spectui.config``, ``spectui.quality``, ``spectui.format`` and
``spectui.errors``. Only ``spectui.cli`` and ``spectui.ui`` sit above it; ``compare``,
``telemetry`` and ``report`` are its siblings and are not imported.
"""
