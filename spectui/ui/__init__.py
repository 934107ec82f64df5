"""The terminal UI: the live dashboard and the sweep view (Textual).

What it owns:

* ``launch``: the entry points (``make_app``, ``run_dashboard``, ``run_replay``,
  ``run_compare``, ``make_sweep_app``, ``run_sweep_view``): the only names ``spectui.cli``
  imports, and it imports them inside its commands, so a headless command never loads Textual.
* ``app``: the dashboard's Textual app: keys, timers, the repaint budget, the screens.
* ``controller``: the dashboard's settings, the run on screen with its ``RunState``, AR
  baselines, and the routing of the engine thread's notes by run id to the run kinds of
  ``runs/`` (a plain run, a chat turn, a sequential or interleaved pair, a replay), which own
  their runs; ``view``: what the screens read of it; ``state``, ``labels``, ``replay``, ``chat``:
  plain data, words, the replay clock and the conversation. These import no Textual and nothing
  from ``app``, ``screens`` or ``widgets``: their tests need no terminal.
* ``screens/``, ``widgets/``, ``app.tcss``, ``themes``: what is drawn and how it looks;
  ``messages``: the engine thread's notes as Textual messages, and what a screen asks the app
  to do (typed requests, never action strings); ``sweep``: the sweep view.

What it may import: everything below it (``sessions``, ``lab``, ``compare``, ``metrics``,
``recording``, ``config``, ...) and textual, rich and plotext. Nothing imports it except
``spectui.cli`` (the layers contract in pyproject.toml holds both).
"""
