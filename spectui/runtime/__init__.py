"""Runtimes: an engine spectui starts, measures and stops (issue 43; today llama-server).

People turn speculation on in a runtime (``llama-server --spec-type ...``), not in spectui's own
loop; this package lets spectui run that runtime as it is deployed:

* ``build``: which llama-server runs (``--llama-server PATH``, ``$PATH``, or a build made once
  per llama-cpp-python version from the llama.cpp it vendors, so embedded and runtime runs
  share kernels), and what it is (version, commit, the ``--spec-type`` values it accepts);
* ``methods``: every ``--spec-type`` as a method, spectui's K / p-min mapped onto the flags
  each one reads, and what cannot work refused from the GGUF headers before a server starts;
* ``server``: the launcher (loopback port, a fresh API key per start, no ``/slots``, health,
  the log kept, and a server that never outlives spectui);
* ``engine``: a session on it through the existing server engine and client.

The layer between ``sessions`` (which chooses engines) and ``server`` (which measures a running
one): it imports ``server``, ``models`` and below, and nothing above.
"""
