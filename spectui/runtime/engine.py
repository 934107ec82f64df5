"""The engine a started runtime is measured through: the existing server engine
(``spectui.server.engine``) over the ``RuntimeServer``'s client, with what the runtime is added
to the header. ``RuntimeEngine`` (``session.py``), the engine a session opens for
``--runtime``, starts the server and measures it through one of these.

``ServerEngine`` probes the server as it would any other (``/props`` flattened into the
header's ``server.props``, ``/metrics`` for the acceptance counters; ``/slots`` answers 501, as
the launcher turned it off) and streams the same events. What only the launcher knows goes
into ``server.props`` under ``runtime.*``: the runtime, its binary or package, where it came
from, its version (llama.cpp's commit), the method and its flags, and the whole command line
(which holds no key).
"""

from __future__ import annotations

from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.runtime.server import RuntimeServer
from spectui.server.client import READ_TIMEOUT_S, ServerError
from spectui.server.engine import ServerEngine
from spectui.server.logprobs import Policy
from spectui.server.probe import probe
from spectui.server.vocabulary import LocalVocabulary


def runtime_props(server: RuntimeServer) -> dict[str, str]:
    """What the header records about a runtime spectui started (all strings, as ``props``)."""
    return {
        "runtime.name": server.runtime.name,
        **server.runtime.props(),
        "runtime.command_line": server.command_line,
        "runtime.log": str(server.log_path),
        "runtime.start_s": f"{server.started_s:.2f}",
    }


def runtime_engine(
    server: RuntimeServer, config: RunConfig, *, method: str = "", read_timeout_s: float = READ_TIMEOUT_S, logprobs: Policy = "auto"
) -> ServerEngine:
    """A ``ServerEngine`` on ``server``; ``config.target`` (the model it serves) gives the local
    vocabulary, so token ids are the model's. ``method``: the ``--spec-type`` line to record."""
    client = server.client(read_timeout_s=read_timeout_s)
    try:
        info = probe(client)
    except ServerError as exc:
        raise SpectuiError(f"the {server.runtime.name} spectui started does not answer: {exc}") from None
    info.props.update(runtime_props(server))
    if method:
        info.props["runtime.method"] = method
    return ServerEngine(config, client, info, LocalVocabulary.find(config.target, info.model_id), logprobs=logprobs)
