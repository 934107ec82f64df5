"""The embedded engine: backends (llama.cpp, MLX) behind one ``Backend`` protocol, drafters
(n-gram, draft model) behind ``Drafter``, sampling, the adaptive draft length, the fallback
policy, and the AR / speculative loops written once against those protocols (``decode``);
``session.Engine`` loads the models for a configuration and runs sessions as one event stream.

May import ``spectui.metrics``, ``spectui.models``, ``spectui.recording``, ``spectui.prompts``,
``spectui.config`` and ``spectui.errors``; never the server client (its sibling), the
sessions layer, the UI toolkit or anything above (the layers contract in pyproject.toml).
"""
