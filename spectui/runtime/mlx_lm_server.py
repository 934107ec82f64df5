"""mlx_lm.server as a runtime spectui starts, measures and stops (``--runtime mlx-lm``).

What it is, read in mlx-lm 0.32's ``mlx_lm/server.py`` and checked against the running server:

* ``python -m mlx_lm server --model DIR [--draft-model DIR --num-draft-tokens K] --host --port``
  (``python -m mlx_lm.server`` is the same program; it prints a deprecation line first, and is
  run only where mlx-lm has no ``python -m mlx_lm``). Its one speculative method is a draft
  model: each step the draft proposes ``--num-draft-tokens`` tokens (default 3) and the target
  verifies them. No p-min, no n-gram lookup. A request may override ``num_draft_tokens``;
  spectui sends none, so the command line is the whole configuration, as for llama-server.
* It binds its port, logs ``Starting httpd at HOST on port P...`` and loads the model in a
  thread of its own meanwhile: ``/health`` says "ok" while the model still loads, so it is
  ready once a one-token warm-up request is answered (the model loaded, its kernels run once,
  as llama-server warms up at load; the warm-up's prompt, a newline, is no prefix of a chat
  prompt, so mlx-lm's prompt cache gives the session nothing). A model that fails to load ends
  that thread: ``/health`` answers 503 while the HTTP server lives on, and the start fails with
  the log's line. A failed bind raises in the main thread, but the loader thread (no daemon)
  keeps the process alive: the launcher reads the failure from the log and tries another port.
* **No API key**: mlx_lm.server has no authentication at all. It listens on 127.0.0.1 only,
  unauthenticated: any local user can send it requests while it runs. ``runtime.auth`` in the
  header says so.
* **No acceptance**: no draft counts in its stream, its answers or any endpoint (no
  ``/metrics``). ``End.server`` keeps drafted / accepted at -1 and says "acceptance not reported
  by mlx_lm.server"; nothing is estimated.
* ``/v1/models`` scans the Hugging Face cache (and fails where there is none): the server gets
  an empty cache folder of its own (``HF_HUB_CACHE``) and lists the model it serves only, and
  ``HF_HUB_OFFLINE=1``: nothing is downloaded.

The model argument: an mlx-lm directory is used as it is; a GGUF file (the embedded default
included) is exported once (``mlx_gguf.export_mlx_model``: Q4_0 / Q4_1 / Q8_0 stay quantised)
into the user cache, keyed by the file's sha256, and the draft likewise. A draft must have the
target's vocabulary (llama.cpp's rule, ``spectui.models.vocab``), checked before anything starts.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import sys
from collections.abc import Generator
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from spectui import storage
from spectui.config import BackendConfig, RunConfig
from spectui.drafting import RUNTIME_PREFIX, Runtime
from spectui.engine.backends.mlx_paths import is_gguf, resolve_mlx_model
from spectui.errors import SpectuiError
from spectui.models.artifacts import file_sha256
from spectui.models.gguf import read_gguf
from spectui.models.heads import is_head_file, read_head
from spectui.models.tokenizer import TextTokenizer
from spectui.models.vocab import VocabFacts, draft_incompatibility
from spectui.paths import cache_dir, state_dir
from spectui.recording.schema import End, Event
from spectui.runtime.engine import runtime_props
from spectui.runtime.leftovers import remove_leftovers
from spectui.runtime.methods import METHODS, MLX_LM_METHODS, PREFIX
from spectui.runtime.ownership import folder_and_files, require_owned
from spectui.runtime.server import HOST, READY_TIMEOUT_S, RuntimeServer, StartFailed
from spectui.server.client import READ_TIMEOUT_S, ServerError
from spectui.server.engine import ServerEngine
from spectui.server.probe import MLX_LM, probe
from spectui.server.vocabulary import LocalVocabulary
from spectui.subprocesses import absolute_entries, python_argv

NAME = "mlx_lm.server"
#: mlx_lm.server's own draft length (``--num-draft-tokens``' default in 0.26-0.32)
MLX_DEFAULT_K = 3
ACCEPTANCE = (f"acceptance not reported by {NAME}: its stream, its answers and its endpoints carry no draft counts "
              "(drafted and accepted stay -1; nothing is estimated)")
AUTH = (f"none: {NAME} takes no API key; it listens on {HOST} only, unauthenticated "
        "(any local user can send it requests while it runs)")
_BIND_FAILED = "Address already in use"
_WARM_UP = {"prompt": "\n", "max_tokens": 1, "temperature": 0.0, "stream": True}
_DRAFT_METHOD = MLX_LM_METHODS[0]


def missing() -> str:
    """Why mlx_lm.server cannot run here ("" where it can)."""
    if importlib.util.find_spec("mlx") is None or importlib.util.find_spec("mlx_lm") is None:
        return f"{NAME} needs MLX and mlx-lm, not installed here (they install on Apple silicon and on Linux); use --runtime llama-server"
    return ""


def package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return ""


# -- the method -------------------------------------------------------------------------------


@dataclass(frozen=True)
class MlxMethod:
    """mlx_lm.server's speculation: none (AR), or ``draft-model`` with a draft and K
    (``--num-draft-tokens``; None: its own default)."""

    draft_model: str = ""  # the draft as given (a GGUF or an mlx-lm directory)
    k: int | None = None

    @classmethod
    def parse(cls, text: str, *, k: int | None = None, p_min: float | None = None, lookup: int | None = None,
              draft_model: str = "") -> MlxMethod:
        """``runtime:draft-model`` (or ``none``); what mlx_lm.server cannot do is one line."""
        body = text.removeprefix(PREFIX)
        names = [n.strip() for n in body.split(",") if n.strip()]
        ours = [_DRAFT_METHOD, "none"]
        other = next((n for n in names if n not in ours), None)
        if other is not None and other in METHODS:
            raise SpectuiError(f"{other} is a llama-server method (--runtime llama-server); {NAME} drafts with a draft model only: "
                               f"--draft {PREFIX}{_DRAFT_METHOD} --draft-model DIR|FILE.gguf")
        if other is not None or len(names) != 1:
            raise SpectuiError(f"unknown {NAME} method {body!r}: expected {PREFIX}{_DRAFT_METHOD} (a draft model; --mode ar runs without)")
        if p_min:
            raise SpectuiError(f"{NAME} has no p-min (its draft proposes K tokens at every step): drop --p-min")
        if lookup:
            raise SpectuiError(f"--lookup sets an n-gram method's key length; {NAME} has no n-gram method")
        if names[0] == "none":
            if draft_model:
                raise SpectuiError("none (no speculation) takes no draft model")
            return cls(k=k)
        if not draft_model:
            raise SpectuiError(f"{_DRAFT_METHOD} needs a draft model (--draft-model DIR or FILE.gguf)")
        head = read_head(draft_model) if is_head_file(draft_model) else None
        if head is not None:  # mlx-lm 0.32 runs draft models only: no EAGLE-3, DFlash or DSpark
            raise SpectuiError(f"{head.name} is a {head.label} head, which {NAME} cannot run; llama-server runs it: "
                               f"--runtime llama-server --draft {PREFIX}{head.method}")
        return cls(draft_model, k)

    @property
    def speculative(self) -> bool:
        return bool(self.draft_model)

    @property
    def name(self) -> str:
        return _DRAFT_METHOD if self.speculative else "none"

    def describe(self) -> str:
        if not self.speculative:
            return "none (autoregressive)"
        k = f"{self.k}" if self.k is not None else f"{MLX_DEFAULT_K}, its default"
        return f"{_DRAFT_METHOD} (--num-draft-tokens {k})"


def method_of(config: RunConfig) -> MlxMethod:
    d = config.draft.drafter
    if config.mode == "ar":
        return MlxMethod()
    if not isinstance(d, Runtime):
        raise SpectuiError(f"mlx_lm.server drafts with its own methods (--draft {RUNTIME_PREFIX}draft-model), not --draft {config.draft.flag}")
    return MlxMethod.parse(RUNTIME_PREFIX + d.method, k=config.draft.fixed_k, p_min=d.p_min or None, lookup=d.lookup or None,
                           draft_model=d.draft_model)


# -- the models -------------------------------------------------------------------------------


def local_model(spec: str, what: str) -> str:
    """A model argument to a local GGUF file or mlx-lm directory (``resolve_mlx_model``: never downloads)."""
    if spec and spec.startswith((".", "/", "~")) and not os.path.exists(os.path.expanduser(spec)):
        raise SpectuiError(f"{what} not found: {spec}")
    path = resolve_mlx_model(spec)
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise SpectuiError(f"{what} {path} is a folder without config.json: not an mlx-lm model directory")
        return path
    if not is_gguf(path):
        raise SpectuiError(f"{what} {path} is neither a GGUF file nor an mlx-lm model directory")
    return path


def vocabulary(path: str) -> VocabFacts:
    """A GGUF's vocabulary from its header; a directory's from the tokenizer spectui rebuilds
    from it (whose type is not recorded, so a GGUF / directory pair is not compared by type)."""
    if not os.path.isdir(path):
        return VocabFacts.from_gguf(read_gguf(path).metadata)
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as exc:
        raise SpectuiError(f"{path}/config.json cannot be read: {exc}") from None
    return VocabFacts.from_tokenizer(TextTokenizer.from_dir(path, config))


def check_pair(target: str, draft: str) -> None:
    """Refuse a draft whose tokens mean other text than the target's (mlx-lm would only warn)."""
    mismatch = draft_incompatibility(vocabulary(target), vocabulary(draft), os.path.basename(target), os.path.basename(draft))
    if mismatch:
        raise SpectuiError(f"{os.path.basename(draft)} cannot draft for {os.path.basename(target)}: {mismatch}")


#: an export in progress: ``.<name>.<pid>.tmp`` beside where it will be renamed to
_EXPORTING = re.compile(r"\..+\.(?P<pid>\d+)\.tmp")


def model_dir(path: str) -> str:
    """``path`` as an mlx-lm directory: itself, or its GGUF exported once into the user cache
    (``mlx-lm/models/<sha256[:16]>/<name>``). The export is written beside and renamed into
    place, so a directory there is a whole one; one a crashed export left half-written is
    removed at the next (``spectui.runtime.leftovers``). An export is loaded only while it is
    the user's alone (``spectui.runtime.ownership``)."""
    if os.path.isdir(path):
        return path
    models = cache_dir() / "mlx-lm" / "models"
    folder = storage.prepare_dir(models / file_sha256(path)[:16])
    for other in models.iterdir():
        remove_leftovers(other, _EXPORTING)
    out = folder / os.path.basename(path).removesuffix(".gguf")
    if not out.is_dir():
        _export(path, folder, out)
    require_owned(folder_and_files(out), f"the MLX export of {os.path.basename(path)}", f"remove {out} and spectui exports it again")
    return str(out)


def _export(path: str, folder: Path, out: Path) -> None:
    from spectui.engine.backends.mlx_gguf import export_mlx_model

    tmp = folder / f".{out.name}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        export_mlx_model(path, tmp)
        os.rename(tmp, out)
    except OSError as exc:
        if not out.is_dir():  # another process's export won the rename: use it
            raise storage.disk_error(out, exc) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- the launch -------------------------------------------------------------------------------


@dataclass(frozen=True)
class MlxLaunch:
    """What one mlx_lm.server serves: the target (as given, and the directory it runs), the method."""

    source: str
    model: str
    method: MlxMethod = field(default_factory=MlxMethod)
    draft_source: str = ""
    draft_dir: str = ""
    ignored: tuple[str, ...] = ()  # the run's settings mlx_lm.server has no flag for


def check(config: RunConfig) -> tuple[MlxMethod, str, str]:
    """Everything that can be refused before a server starts (mlx-lm installed, the method, the
    files, the draft's vocabulary): the method, the target's file and the draft's ("" = none)."""
    why = missing()
    if why:
        raise SpectuiError(why)
    method = method_of(config)
    source = local_model(config.target, "the target")
    draft = local_model(method.draft_model, "the draft model") if method.speculative else ""
    if draft:
        check_pair(source, draft)
    return method, source, draft


def prepare(config: RunConfig) -> MlxLaunch:
    """``check``, then the GGUFs exported (once; seconds)."""
    method, source, draft = check(config)
    return MlxLaunch(source=source, model=model_dir(source), method=method, draft_source=draft,
                     draft_dir=model_dir(draft) if draft else "", ignored=ignored_settings(config))


def ignored_settings(config: RunConfig) -> tuple[str, ...]:
    b = config.backend
    given = [("threads", b.n_threads != 0), ("flash attention", b.flash_attn != "auto"), ("GPU layers", b.n_gpu_layers >= 0),
             ("context size", b.n_ctx != BackendConfig().n_ctx)]
    return tuple(name for name, set_ in given if set_)


def python_path_without_relative(value: str) -> str:
    """``PYTHONPATH`` without its empty or relative entries: those name a folder relative to
    wherever the process starts, the very lookup ``MlxLmServer.workdir`` keeps out."""
    return absolute_entries(value)


def _server_module() -> list[str]:
    """``-m mlx_lm server`` where mlx-lm has a ``__main__`` (looked for on disk: finding a
    submodule's spec would import mlx-lm here, 1.7 s for nothing), else ``-m mlx_lm.server``."""
    spec = importlib.util.find_spec("mlx_lm")
    folders = spec.submodule_search_locations or [] if spec is not None else []
    if any(os.path.isfile(os.path.join(folder, "__main__.py")) for folder in folders):
        return ["-m", "mlx_lm", "server"]
    return ["-m", "mlx_lm.server"]


@dataclass(frozen=True)
class MlxLmServer:
    """mlx_lm.server as a ``spectui.runtime.server.Runtime``."""

    launch: MlxLaunch
    name: str = NAME
    log_folder: str = "mlx-lm/logs"

    def argv(self, port: int) -> list[str]:
        # absolute: the server starts in a folder of its own (``workdir``), not where these were named
        out = [*python_argv(*_server_module()), "--model", os.path.abspath(self.launch.model)]
        m = self.launch.method
        if m.speculative:
            out += ["--draft-model", os.path.abspath(self.launch.draft_dir)] + (["--num-draft-tokens", str(m.k)] if m.k is not None else [])
        return out + ["--host", HOST, "--port", str(port)]

    def workdir(self) -> str:
        """Where it starts: ``python -m`` puts its working directory first on ``sys.path``, so in
        the user's folder a planted ``mlx_lm/`` or ``mlx/`` would be imported instead of the
        installed package (and serve unauthenticated). A private folder of spectui's instead."""
        return str(storage.prepare_dir(state_dir() / "mlx-lm" / "run", private=True, own=True))

    def environment(self, api_key: str) -> dict[str, str]:
        hub = storage.prepare_dir(cache_dir() / "mlx-lm" / "empty-hub-cache")
        env = {**os.environ, "HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
        safe_path = python_path_without_relative(env.get("PYTHONPATH", ""))
        if safe_path:
            env["PYTHONPATH"] = safe_path
        else:
            env.pop("PYTHONPATH", None)
        return env

    def takes_key(self) -> bool:
        return False

    def listening(self, port: int) -> re.Pattern[str]:
        return re.compile(rf"Starting httpd at {re.escape(HOST)} on port {port}\b")

    def bind_failed(self, log_tail: str) -> bool:
        return _BIND_FAILED in log_tail

    def ready(self, server: RuntimeServer) -> bool:
        client = server.client(read_timeout_s=READY_TIMEOUT_S)
        health = client.get("/health", timeout_s=5.0)
        if health.status == 503:
            raise StartFailed("could not load its model (/health answers 503: its generation thread died)")
        if not health.ok:
            return False
        for event in client.stream("/v1/completions", _WARM_UP):
            if event.kind == "error":
                raise StartFailed(f"failed its warm-up request: {event.data[:200]}")
        return True

    def props(self) -> dict[str, str]:
        mlx_lm, mlx = package_version("mlx-lm"), package_version("mlx")
        out = {
            "runtime.version": mlx_lm or "unknown",
            "runtime.package": f"mlx-lm {mlx_lm or '(version unknown)'}, mlx {mlx or '(version unknown)'}",
            "runtime.python": sys.executable,
            "runtime.model_dir": self.launch.model,
            "runtime.auth": AUTH,
            "runtime.acceptance": ACCEPTANCE,
        }
        if self.launch.model != self.launch.source:
            out["runtime.made_from"] = self.launch.source
        if self.launch.draft_dir:
            out["runtime.draft_dir"] = self.launch.draft_dir
            if self.launch.draft_dir != self.launch.draft_source:
                out["runtime.draft_made_from"] = self.launch.draft_source
        if self.launch.ignored:
            out["runtime.ignored"] = f"{', '.join(self.launch.ignored)}: {NAME} has no flag for them"
        return out


def mlx_engine(server: RuntimeServer, config: RunConfig, launch: MlxLaunch, *, read_timeout_s: float = READ_TIMEOUT_S) -> ServerEngine:
    """A ``ServerEngine`` on the mlx_lm.server spectui started: known to be mlx-lm, of the
    installed version (its endpoints name none), with the target's vocabulary for the ids."""
    client = server.client(read_timeout_s=read_timeout_s)
    try:
        info = probe(client)
    except ServerError as exc:
        raise SpectuiError(f"the {NAME} spectui started does not answer: {exc}") from None
    info.kind, info.version = MLX_LM, package_version("mlx-lm")
    info.props["identified_by"] = f"spectui started it ({NAME})"
    info.metrics_note = f"{NAME} exposes no /metrics"
    info.props.update(runtime_props(server))
    info.props["runtime.method"] = launch.method.describe()
    vocab = LocalVocabulary.open(launch.source, "--target")
    return ServerEngine(config, client, info, vocab)


def say_no_acceptance(events: Generator[Event, None, None]) -> Generator[Event, None, None]:
    """The session's events, its ``End.server`` saying that mlx_lm.server reports no acceptance."""
    try:
        for event in events:
            if type(event) is End and event.server is not None and event.server.drafted < 0:
                event.server.acceptance_source = ACCEPTANCE
            yield event
    finally:
        events.close()  # a session stopped early closes the request's stream too
