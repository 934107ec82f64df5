"""Measuring a running server (llama.cpp's ``llama-server``, ``python -m llama_cpp.server``,
``mlx_lm.server`` or any OpenAI-compatible endpoint) instead of the embedded engine.

Headless and standard library only: ``client`` speaks HTTP and server-sent events, ``wire``
reads what the servers send, ``probe`` asks a server what it is, ``vocabulary`` turns streamed
text back into token ids with a local copy of the model's vocabulary, and ``session`` offers
the ``Engine`` surface (``run`` yielding the one event stream) so the CLI, the dashboard, the
recorder and ``spectui diff`` treat a server session like any other.
"""
