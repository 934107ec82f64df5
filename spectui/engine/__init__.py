"""The embedded engine, in four parts behind one front door.

* ``embedded.Engine`` (the front door): loads a configuration's models through the backend
  registry, builds the run plan once (``plan.RunPlan``: the recorded configuration, the drafter,
  the draft length, the policy) and runs it as one event stream.
* ``backends/``: one model and its KV cache behind ``protocol.Backend`` (llama.cpp, MLX), and
  the registry ``--backend`` reads (``backends.register``).
* ``drafters/``: what proposes tokens, one file each, and the registry ``--draft``, ``--chain``,
  tune's replay and the dashboard's model picker read (``drafters.register``).
* ``loop/``: the AR / speculative decode loop written once against the protocols, sampling and
  verification, the draft length K, the fallback policy.
* ``host/``: what is measured about this machine: the weight type the embedded model runs in,
  requantized copies, the verify-cost curve, batch-shape noise.

Inside the engine, imports run down: the front door, plan and openers > host > drafters |
backends > loop > protocol (import-linter's ``engine-parts`` contract in pyproject.toml). The
engine may import ``spectui.metrics``, ``spectui.models``, ``spectui.recording``,
``spectui.prompts``, ``spectui.config`` and ``spectui.errors``; never the server client (its
sibling), the sessions layer, the UI toolkit or anything above (the ``layers`` contract).
"""
