"""Sessions: the one place that picks an engine and runs it into a recording.

``protocol.EngineProtocol`` is what every engine offers (the embedded llama.cpp / MLX engine of
``spectui.engine`` and the server client of ``spectui.server`` both implement it, without
importing each other), and so does ``spectui.remote.engine.RemoteEngine`` (either of them on a
node over SSH); ``open.open_engine`` chooses among them from the configuration (and ``host``) and
``open.EngineCache`` keeps one loaded while it fits; ``record.record_session`` runs an engine
into a recording for every caller (the CLI, quality, sweep, soak, the dashboard);
``runner.SessionRunner`` is the long-lived engine thread behind the dashboard, posting the
plain notes of ``notes``.

Above ``spectui.engine`` and ``spectui.server``, below every multi-run package and the UI; no
UI toolkit is imported here.
"""
