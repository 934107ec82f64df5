"""The terminal UI: the live dashboard and the sweep view (Textual).

What it owns:

* ``launch``: the entry points (``make_app``, ``run_dashboard``, ``run_replay``,
  ``run_compare``, ``make_sweep_app``, ``run_sweep_view``): the only names ``spectui.cli``
  imports, and it imports them inside its commands, so a headless command never loads Textual.
* ``app``: the dashboard's Textual app: keys, timers, the repaint budget, the screens.
* ``controller``: the dashboard's runs (note routing, outbox folding, live comparisons, AR
  baselines, replay) with a ``RunState``; ``view``: what the screens read of it; ``state``,
  ``labels``, ``replay``: plain data, words and the replay clock. These five import no Textual
  and nothing from ``app``, ``screens`` or ``widgets``: their tests need no terminal.
* ``screens/``, ``widgets/``, ``app.tcss``, ``themes``: what is drawn and how it looks;
  ``messages``: the engine thread's notes as Textual messages; ``sweep``: the sweep view.

What it may import: everything below it (``sessions``, ``lab``, ``compare``, ``metrics``,
``recording``, ``config``, ...) and textual, rich and plotext. Nothing imports it except
``spectui.cli`` (the layers contract in pyproject.toml holds both).
"""
