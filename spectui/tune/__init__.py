"""``spectui tune``: what makes speculation pay on this machine, measured, and the setting to use.

The verify-cost curve and a draft model's cost (``measure``), acceptance from greedy outputs
replayed exactly (``replay``) or a draft model's blocks, a plan per prompt tier (``plan``),
the check of every plan against real runs (``runner``), the weight-type probe (``weights``),
the result as one typed object (``result``), the latest result per target (``store``) and every
rendering of it: text, the dashboard's view, charts, JSON (``report``).

A layer-3 package beside ``lab`` and ``compare``: it may import ``sessions``, ``engine``,
``metrics``, ``models``, ``recording``, ``prompts``, ``config`` and ``format``; never the UI.
"""

