"""Runtimes: an engine spectui starts, measures and stops (llama-server, mlx_lm.server).

People turn speculation on in a runtime (``llama-server --spec-type ...``), not in spectui's own
loop; this package lets spectui run that runtime as it is deployed:

* ``build``: which llama-server runs (``--llama-server PATH``, ``$PATH``, or a build made once
  per llama-cpp-python version from the llama.cpp it vendors, so embedded and runtime runs
  share kernels), and what it is (version, commit, the ``--spec-type`` values it accepts);
  ``cmake`` runs its steps as one process group, ``archive`` unpacks the source checked;
* ``methods``: every ``--spec-type`` as a method, spectui's K / p-min mapped onto the flags
  each one reads, and what cannot work refused from the GGUF headers before a server starts;
* ``server``: the launcher every runtime shares (a free loopback port, a fresh API key per
  start, waiting until it is ready, the listener guard that fails closed, stop, the log kept:
  ``logs``), with ``lifetime``: a server that never outlives spectui;
* ``llama_server``: llama-server on that launcher (its settings and flags, the key in its
  environment, no ``/slots``, ``/props`` read once ready);
* ``ownership`` and ``leftovers``: a cached build or export is run only while it is the user's
  alone, and what a crashed run left half-made is removed at the next start;
* ``mlx_lm_server``: mlx_lm.server on the same launcher (its draft-model method, the model
  exported from a GGUF once, no API key and no acceptance to report, both said in the header);
* ``engine``: a session on it through the existing server engine and client (``runtime_engine``,
  the ``runtime.*`` properties the header records);
* ``session``: ``RuntimeEngine``, the engine a session opens for a runtime: it starts the
  runtime's server for the run's settings (llama-server or mlx_lm.server), keeps it while they
  fit, and stops it when closed.

The layer between ``sessions`` (which chooses engines) and ``server`` (which measures a running
one): it imports ``server``, ``models`` and below, and nothing above.
"""
