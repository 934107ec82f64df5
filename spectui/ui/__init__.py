"""The terminal UI (Textual): the live dashboard, and the sweep, workload and watch views.

What it owns:

* ``launch``: the entry points (``make_app``, ``run_dashboard``, ``run_replay``,
  ``run_compare``, ``make_sweep_app``, ``run_sweep_view``, ``run_workload_view``,
  ``run_watch``): the only names ``spectui.cli`` imports, and it imports them inside its commands, so a headless command never loads Textual.
* ``app``: the dashboard's Textual app: keys, timers, the repaint budget, the screens.
* ``controller``: the dashboard's settings, the run on screen with its ``RunState``, AR
  baselines, and the routing of the engine thread's notes by run id to the run kinds of
  ``runs/`` (a plain run, a chat turn, a sequential or interleaved pair, a replay), which own
  their runs; ``view``: what the screens read of it; ``state``, ``labels``, ``replay``, ``chat``:
  plain data, words, the replay clock and the conversation. These import no Textual and nothing
  from ``app``, ``screens`` or ``widgets``: their tests need no terminal.
* ``screens/``, ``widgets/``, ``app.tcss``, ``themes``: what is drawn and how it looks;
  ``messages``: every Textual message of the UI (the engine thread's notes, what a screen asks
  the app to do as typed requests, never action strings, and the views' progress and ends);
  ``remembered``: what the dashboard keeps between sessions; ``backends``: its engine switch.
* the other apps, each on a screen of ``screens/``: ``sweep`` (``spectui sweep``),
  ``workload_view`` (``spectui workload``), both on ``background``'s job in a thread worker
  that ``q`` stops, and ``watch_app`` (``spectui watch``).

What it may import: everything below it (``sessions``, ``lab``, ``compare``, ``metrics``,
``recording``, ``config``, ...) and textual, rich and plotext. Nothing imports it except
``spectui.cli`` (the layers contract in pyproject.toml holds both).
"""
