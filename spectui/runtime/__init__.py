"""Runtimes: an engine spectui starts, measures and stops (llama-server, mlx_lm.server).

People turn speculation on in a runtime (``llama-server --spec-type ...``), not in spectui's own
loop; this package lets spectui run that runtime as it is deployed:

* ``build``: which llama-server runs (``--llama-server PATH``, ``$PATH``, or a build made once
  per llama-cpp-python version from the llama.cpp it vendors, so embedded and runtime runs
  share kernels), and what it is (version, commit, the ``--spec-type`` values it accepts);
  ``cmake`` runs its steps as one process group, ``archive`` unpacks the source checked;
* ``methods``: every ``--spec-type`` as a method, spectui's K / p-min mapped onto the flags
  each one reads, and what cannot work refused from the GGUF headers before a server starts;
* ``server``: the launcher (loopback port, a fresh API key per start, no ``/slots``, health,
  the log kept: ``logs``), with ``lifetime``: a server that never outlives spectui;
* ``ownership`` and ``leftovers``: a cached build or export is run only while it is the user's
  alone, and what a crashed run left half-made is removed at the next start;
* ``mlx_lm_server``: mlx_lm.server on the same launcher (its draft-model method, the model
  exported from a GGUF once, no API key and no acceptance to report, both said in the header);
* ``engine``: a session on it through the existing server engine and client.

The layer between ``sessions`` (which chooses engines) and ``server`` (which measures a running
one): it imports ``server``, ``models`` and below, and nothing above.
"""
