"""Watching a server that is already serving other people's traffic, sending it nothing but
reads: ``GET /metrics`` at a steady rate (and, on llama-server, ``GET /props`` once and
``GET /slots`` each time when it answers). It never sends a completion request.

``source`` finds out what the server is and whether it can be watched (a server without
``/metrics`` gets one line saying how to turn it on) and reads one sample; ``sampler`` is the
thread that polls on a fixed grid and folds the readings through
``spectui.metrics.watch_rates``; ``text`` says a sample in words (the headless lines, the JSON
lines, the notes a dashboard shows for what a server does not report). ``process`` finds the
process behind a loopback server's port and reads its RSS, CPU and threads at each reading;
``record`` writes a watch in the recording format and reads one back through the same fold;
``feed`` hands samples to a consumer from a live watch or a recording; ``node`` runs the watch on
a node over SSH (``--host``) and reads its stream; ``board`` is what the watch dashboard shows
(series, rows, notes: no Textual); ``summary`` is a recorded watch summed up (``report``,
``history``).

Sits above ``spectui.server`` and ``spectui.remote`` in the layers: it uses the server client
(``spectui.server.client``) and the SSH channel (``spectui.remote``), and may import
``spectui.metrics``, ``spectui.models``, ``spectui.recording``, ``spectui.config``,
``spectui.format`` and ``spectui.errors``; ``sessions``, ``report``, ``history``, ``cli`` and
``ui`` may import it.
"""
