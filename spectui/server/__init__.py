"""Measuring a running server (llama.cpp's ``llama-server``, ``python -m llama_cpp.server``,
``mlx_lm.server`` or any OpenAI-compatible endpoint) instead of the embedded engine.

Headless and standard library only: ``client`` speaks HTTP and server-sent events, ``wire``
reads what the servers send, ``probe`` asks a server what it is, ``vocabulary`` turns streamed
text back into token ids with a local copy of the model's vocabulary, and ``session`` offers
the ``EngineProtocol`` surface (``run`` yielding the one event stream) so the CLI, the dashboard, the
recorder and ``spectui diff`` treat a server session like any other; ``report`` and
``compare`` hold what ``spectui report`` and ``spectui diff`` say about a server recording.

May import ``spectui.metrics``, ``spectui.models``, ``spectui.recording``, ``spectui.prompts``,
``spectui.config``, ``spectui.quality``, ``spectui.format`` and ``spectui.errors``; never the
embedded engine (its sibling). Above it sit ``sessions`` (which picks the engine or a server),
``lab | compare | telemetry | report``, then only ``cli`` and ``ui``.
"""
