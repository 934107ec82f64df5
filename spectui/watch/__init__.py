"""Watching a server that is already serving other people's traffic, sending it nothing but
reads: ``GET /metrics`` at a steady rate (and, on llama-server, ``GET /props`` once and
``GET /slots`` each time when it answers). It never sends a completion request.

``source`` finds out what the server is and whether it can be watched (a server without
``/metrics`` gets one line saying how to turn it on) and reads one sample; ``sampler`` is the
thread that polls on a fixed grid and folds the readings through
``spectui.metrics.watch_rates``; ``text`` says a sample in words (the headless lines, the JSON
lines, the notes a dashboard shows for what a server does not report).

Sits beside ``spectui.server`` in the layers, one above it: it uses the server client
(``spectui.server.client``) and may import ``spectui.metrics``, ``spectui.recording``,
``spectui.config``, ``spectui.format`` and ``spectui.errors``; ``sessions``, ``report``,
``cli`` and ``ui`` may import it.
"""
