"""Remote nodes: sessions run on another machine over SSH, recorded and shown here.

A remote engine is a recording that is still being written: ``spectui node serve`` on the node
(``node``) runs the engine headless and streams its events, framed as the recorder frames them
(``wire``), over the system OpenSSH client (``ssh``); ``engine.RemoteEngine`` offers the
``EngineProtocol`` surface over that stream, so the recorder, diff, history and the dashboard
take a node's run as they take a local one. docs/guide/remote.md says how to use it.

Beside ``spectui.engine`` and ``spectui.server`` (neither is imported: the node side is handed
its engine by the CLI). May import ``spectui.metrics``, ``spectui.models``,
``spectui.recording``, ``spectui.config`` and ``spectui.errors``.
"""
