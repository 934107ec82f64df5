"""Ask a server what it is before measuring it: kind, version, model, and what it exposes.

llama-server answers ``/props`` (build, model, generation defaults, speculative settings),
``/slots`` and, started with ``--metrics``, ``/metrics``; llama-cpp-python's FastAPI app
publishes ``/openapi.json`` with its version; mlx-lm's ``http.server`` answers ``/health`` and
``/v1/models`` and names itself in the ``Server`` header. Whatever is not exposed stays empty:
nothing is guessed into the recording except the kind, and a guess says so.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from spectui.server.client import Reply, ServerClient, ServerError
from spectui.server.wire import error_message, parse_prometheus

LLAMA_SERVER = "llama-server"
LLAMA_CPP_PYTHON = "llama-cpp-python"
MLX_LM = "mlx-lm"
OPENAI_COMPATIBLE = "openai-compatible"

#: A text longer than this (a chat template) is recorded as its sha256.
MAX_PROP_CHARS = 200


@dataclass
class ServerInfo:
    kind: str
    version: str = ""
    model_id: str = ""
    props: dict[str, str] = field(default_factory=dict)
    metrics: bool = False  # /metrics answers with Prometheus text
    metrics_note: str = ""  # why not, when not


def probe(client: ServerClient) -> ServerInfo:
    """Identify the server. Raises ``ServerError`` when it cannot be reached or refuses us."""
    models = client.get("/v1/models")
    if models.status in (401, 403):
        raise ServerError(
            f"the server refused the request (HTTP {models.status}: {error_message(models.text)}); "
            "pass its API key with --api-key-env VAR"
        )
    entries = _model_entries(models)
    props = client.get("/props")
    body = props.json() if props.ok else None
    if isinstance(body, dict) and ("default_generation_settings" in body or "build_info" in body):
        info = ServerInfo(LLAMA_SERVER, version=str(body.get("build_info", "")))
        info.props = flatten(body)
        info.model_id = _pick_model(entries, 0) or str(body.get("model_path", ""))
        info.props.update(_slots_summary(client))
        _probe_metrics(client, info)
        return info
    openapi = client.get("/openapi.json")
    doc = openapi.json() if openapi.ok else None
    about = doc.get("info") if isinstance(doc, dict) else None
    if not isinstance(about, dict):  # the server's to write: anything but an object says nothing
        about = {}
    title = str(about.get("title", ""))
    if "llama.cpp Python" in title:
        info = ServerInfo(LLAMA_CPP_PYTHON, version=str(about.get("version", "")), model_id=_pick_model(entries, 0))
        info.metrics_note = "llama-cpp-python exposes no /metrics"
        return info
    health = client.get("/health")
    mlx_like = models.headers.get("server", "").startswith("BaseHTTP") and all("owned_by" not in e for e in entries)
    if mlx_like and isinstance(health.json(), dict) and health.json().get("status") == "ok":
        # mlx-lm lists cached Hugging Face models first and the model it serves last
        info = ServerInfo(MLX_LM, model_id=_pick_model(entries, -1))
        info.props["identified_by"] = "its /health, /v1/models and Server header (mlx-lm names no version there)"
        info.metrics_note = "mlx-lm exposes no /metrics"
        return info
    info = ServerInfo(OPENAI_COMPATIBLE, model_id=_pick_model(entries, 0))
    _probe_metrics(client, info)
    return info


def _model_entries(reply: Reply) -> list[dict[str, Any]]:
    body = reply.json() if reply.ok else None
    data = body.get("data") if isinstance(body, dict) else None
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def _pick_model(entries: list[dict[str, Any]], index: int) -> str:
    return str(entries[index].get("id", "")) if entries else ""


def _probe_metrics(client: ServerClient, info: ServerInfo) -> None:
    try:
        reply = client.get("/metrics")
    except ServerError as exc:
        info.metrics_note = f"/metrics failed: {exc}"
        return
    if reply.ok and parse_prometheus(reply.text):
        info.metrics = True
    elif reply.status == 501:  # llama-server without --metrics
        info.metrics_note = f"/metrics is off ({error_message(reply.text)}); start llama-server with --metrics"
    else:
        info.metrics_note = f"/metrics answered HTTP {reply.status}"


def read_metrics(client: ServerClient) -> dict[str, float]:
    """One reading of ``/metrics`` ({} when it fails: a missing reading is not an error)."""
    try:
        reply = client.get("/metrics")
    except ServerError:
        return {}
    return parse_prometheus(reply.text) if reply.ok else {}


def _slots_summary(client: ServerClient) -> dict[str, str]:
    """llama-server ``/slots``: how many slots, their context, whether they speculate."""
    try:
        reply = client.get("/slots")
    except ServerError:
        return {}
    slots = reply.json() if reply.ok else None
    if not isinstance(slots, list) or not slots:
        return {"slots": f"not exposed (HTTP {reply.status})"} if not reply.ok else {}
    out = {"slots.count": str(len(slots))}
    first = slots[0] if isinstance(slots[0], dict) else {}
    for key in ("n_ctx", "speculative"):
        if key in first:
            out[f"slots.{key}"] = _scalar(first[key])
    out["slots.processing"] = str(sum(1 for s in slots if isinstance(s, dict) and s.get("is_processing")))
    return out


def flatten(obj: Any, prefix: str = "", depth: int = 3) -> dict[str, str]:
    """Scalars of a JSON tree as dotted keys; long strings as their sha256, lists as their
    items when short and scalar, else their length."""
    out: dict[str, str] = {}
    if isinstance(obj, dict) and depth > 0:
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{k}.", depth - 1))
        return out
    key = prefix.rstrip(".")
    if isinstance(obj, list):
        scalars = all(not isinstance(v, (dict, list)) for v in obj)
        text = ",".join(_scalar(v) for v in obj) if scalars else ""
        out[key] = text if scalars and len(text) <= MAX_PROP_CHARS else f"[{len(obj)} items]"
    elif isinstance(obj, dict):
        out[key] = f"{{{len(obj)} keys}}"
    else:
        out[key] = _scalar(obj)
    return out


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    text = "" if v is None else str(v)
    if len(text) > MAX_PROP_CHARS:
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    return text
