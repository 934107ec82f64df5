"""The local model catalogue: models already on this machine, and which can draft for which.

Where people keep models, each read as its tool lays it out (nothing is downloaded, no weights
are loaded: GGUF metadata through ``spectui.models.gguf``, an MLX directory's ``config.json``,
safetensors headers and ``tokenizer.json``):

* LM Studio: ``~/.lmstudio/models`` and ``~/.cache/lm-studio/models``, ``publisher/repo/file.gguf``;
* Ollama: ``$OLLAMA_MODELS`` or ``~/.ollama/models``: a manifest per ``name:tag`` under
  ``manifests/<registry>/<namespace>/<name>/<tag>`` names its weights layer (media type
  ``application/vnd.ollama.image.model``), a GGUF stored as ``blobs/sha256-<digest>``;
* the Hugging Face cache: ``$HF_HUB_CACHE``, ``$HF_HOME/hub`` or ``~/.cache/huggingface/hub``,
  ``models--org--name/snapshots/<revision>/`` (read through ``huggingface_hub.scan_cache_dir``):
  GGUF files, and MLX model directories (``config.json`` + ``*.safetensors``);
* llama.cpp's download cache: ``$LLAMA_CACHE`` or ``~/.cache/llama.cpp``;
* ``$SPECTUI_MODELS`` (folders, ``os.pathsep``-separated) and the folders a command is given;
* the embedded default model, always.

Reading a 49k-token vocabulary costs ~0.2 s, so each file's facts are cached by (path, size,
mtime) in ``catalogue.json`` under the user cache folder. Anything unreadable (a folder, a
manifest, a ``.gguf`` that is not GGUF) becomes a one-line note; everything else is listed.

Drafts pair by llama.cpp's vocabulary rule (``spectui.models.vocab``: the same type and special
tokens, sizes within 128, the same shared tokens) and, as LM Studio pairs them, a smaller
model: fewer parameters, or as many in fewer bytes (a lower-bit quantisation of the target).
A GGUF target takes GGUF drafts (llama.cpp loads no MLX directory); an MLX one takes both.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import msgspec

from spectui import file_kinds, storage
from spectui.errors import SpectuiError
from spectui.format import model_name
from spectui.models.gguf import read_gguf
from spectui.models.heads import HEAD_ARCHITECTURES
from spectui.models.registry import DEFAULT_MODEL, embedded_model_path
from spectui.models.vocab import VocabFacts, VocabSignature
from spectui.paths import cache_dir

OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"
#: every shard of a split GGUF but the first (llama.cpp opens the rest from it)
_LATER_SHARD = re.compile(r"-0*([2-9]|\d{2,})-of-\d+\.gguf$", re.IGNORECASE)
#: bumped when the cached facts change shape
_CACHE_VERSION = 2
_CACHE_KIND = file_kinds.json_kind("spectui's model catalogue cache", lambda doc: isinstance(doc, dict) and "facts" in doc)


class ModelEntry(msgspec.Struct, kw_only=True):
    name: str  # what --target / --draft accept
    source: str  # "embedded", "lmstudio", "ollama", "huggingface", "llama.cpp", "SPECTUI_MODELS", "folder"
    format: str  # "gguf" or "mlx"
    path: str  # the GGUF file or the MLX directory
    model_name: str = ""  # the model's own name (general.name, or config.json's)
    architecture: str = ""
    n_params: int = 0
    quant: str = ""
    size_bytes: int = 0
    n_ctx_train: int = 0
    vocab_size: int = 0
    vocab_sha256: str = ""
    #: what pairing by llama.cpp's vocabulary rule needs (``spectui.models.vocab``); None:
    #: the tokenizer could not be read, and the model pairs with nothing
    vocab_signature: VocabSignature | None = None

    @property
    def display_name(self) -> str:
        """The name every screen gives the model (``format.model_name``): a GGUF's file name,
        else (an Ollama blob, an MLX folder named by its revision) the catalogue name."""
        plain_file = self.format == "gguf" and self.source != "ollama"
        return model_name(self.path if plain_file else self.name, self.quant if plain_file else "")


class Catalogue(msgspec.Struct, kw_only=True):
    models: list[ModelEntry]
    notes: list[str]

    def drafts_for(self, target: ModelEntry) -> list[ModelEntry]:
        """Compatible drafts of ``target``, smallest first."""
        out = [m for m in self.models if m.path != target.path and can_draft(m, target)]
        return sorted(out, key=lambda m: (m.n_params, m.size_bytes, m.name))

    def refused_drafts(self, target: ModelEntry) -> list[tuple[ModelEntry, str]]:
        """Every other model that cannot draft for ``target``, with the reason."""
        out = [(m, draft_refusal(m, target)) for m in self.models if m.path != target.path]
        return [(m, why) for m, why in out if why is not None]

    def find(self, name: str) -> ModelEntry | None:
        """The model a name means: its catalogue name, or a unique last part of one (a file's
        stem, Ollama's ``name`` for ``name:latest``); case does not matter."""
        want = name.lower()
        exact = [m for m in self.models if m.name.lower() == want]
        if exact:
            return exact[0]  # the same name twice: the first source in catalogue order
        tails = [
            m for m in self.models
            if m.name.lower().endswith("/" + want) or m.name.lower() == want + ":latest" or Path(m.path).stem.lower() == want
        ]
        paths = list(dict.fromkeys(m.path for m in tails))
        if len(paths) > 1:
            raise SpectuiError(f"{name!r} matches several models: {', '.join(m.name for m in tails)}; use a full name from spectui models")
        return tails[0] if tails else None


def draft_refusal(draft: ModelEntry, target: ModelEntry) -> str | None:
    """Why ``draft`` cannot draft for ``target`` (one clause, for a list or an error), or None."""
    if draft.architecture in HEAD_ARCHITECTURES:  # it shares the vocabulary, and drafts only as a head
        return f"a trained head ({draft.architecture}): `spectui models` lists it under the targets it fits"
    if target.architecture in HEAD_ARCHITECTURES:
        return f"{target.name} is a trained head ({target.architecture}), not a target"
    if draft.vocab_signature is None or target.vocab_signature is None:
        return "its tokenizer could not be read"
    reason = draft.vocab_signature.incompatibility(target.vocab_signature)
    if reason is not None:
        return f"{reason} (llama.cpp's vocabulary rule)"
    if target.format == "gguf" and draft.format != "gguf":
        return "an MLX folder cannot draft for a GGUF target (llama.cpp loads GGUF only)"
    if not (draft.n_params < target.n_params or (draft.n_params == target.n_params and draft.size_bytes < target.size_bytes)):
        return "not smaller than the target: it would cost more to draft than to verify"
    return None


def can_draft(draft: ModelEntry, target: ModelEntry) -> bool:
    return draft_refusal(draft, target) is None


# -- where models live -----------------------------------------------------------------------


def locations(folders: Sequence[str] = (), env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(source, folder) in the order names are looked up."""
    env = os.environ if env is None else env
    home = os.path.expanduser("~")
    hf_home = env.get("HF_HOME") or os.path.join(home, ".cache", "huggingface")
    out = [
        ("lmstudio", os.path.join(home, ".lmstudio", "models")),
        ("lmstudio", os.path.join(home, ".cache", "lm-studio", "models")),
        ("ollama", env.get("OLLAMA_MODELS") or os.path.join(home, ".ollama", "models")),
        ("huggingface", env.get("HF_HUB_CACHE") or os.path.join(hf_home, "hub")),
        ("llama.cpp", env.get("LLAMA_CACHE") or os.path.join(home, ".cache", "llama.cpp")),
    ]
    out += [("SPECTUI_MODELS", p) for p in (env.get("SPECTUI_MODELS") or "").split(os.pathsep) if p]
    out += [("folder", os.path.abspath(p)) for p in folders]
    return out


def discover(folders: Sequence[str] = (), env: Mapping[str, str] | None = None) -> Catalogue:
    """Every model in the known places and ``folders``. Missing default places are skipped
    silently; a folder named by the user (argument or ``$SPECTUI_MODELS``) that is missing is a note."""
    notes: list[str] = []
    cache = _FactCache()
    found: list[tuple[str, str, str, str]] = []  # (source, name, format, path)
    try:
        found.append(("embedded", DEFAULT_MODEL, "gguf", embedded_model_path()))
    except SpectuiError as exc:
        notes.append(str(exc))
    for source, folder in locations(folders, env):
        if not os.path.isdir(folder):
            if source in ("folder", "SPECTUI_MODELS"):
                notes.append(f"no such folder: {folder}")
            continue
        if source == "ollama":
            found += _ollama(folder, notes)
        elif source == "huggingface":
            found += _hf_cache(folder, notes)
        else:
            found += _walk(source, folder, notes)
    models, seen = [], set()
    for source, name, fmt, path in found:
        real = os.path.realpath(path)
        if (name, real) in seen:
            continue
        seen.add((name, real))
        try:
            facts = cache.facts(path, fmt)
        except SpectuiError as exc:
            notes.append(str(exc))
            continue
        models.append(msgspec.convert({"name": name, "source": source, "format": fmt, "path": path, **facts}, ModelEntry))
    cache.save()
    return Catalogue(models=models, notes=notes)


def _note_unreadable(notes: list[str]) -> Callable[[OSError], None]:
    def note(exc: OSError) -> None:
        notes.append(f"cannot read folder {exc.filename}: {exc.strerror or exc}")

    return note


def _is_mlx_dir(folder: str, files: Sequence[str]) -> bool:
    return "config.json" in files and any(f.endswith(".safetensors") for f in files) and os.path.isdir(folder)


def _walk(source: str, root: str, notes: list[str]) -> list[tuple[str, str, str, str]]:
    """GGUF files (and MLX directories) anywhere under ``root``, named by their path in it."""
    out = []
    for folder, dirs, files in os.walk(root, onerror=_note_unreadable(notes), followlinks=True):
        dirs.sort()
        rel = os.path.relpath(folder, root)
        if _is_mlx_dir(folder, files):
            out.append((source, os.path.basename(root) if rel == "." else rel.replace(os.sep, "/"), "mlx", folder))
        for f in sorted(files):
            if f.lower().endswith(".gguf") and not f.lower().startswith("mmproj") and not _LATER_SHARD.search(f):
                stem = os.path.join(rel, f[: -len(".gguf")]) if rel != "." else f[: -len(".gguf")]
                out.append((source, stem.replace(os.sep, "/"), "gguf", os.path.join(folder, f)))
    return out


def _hf_cache(hub: str, notes: list[str]) -> list[tuple[str, str, str, str]]:
    """Each model repo of the cache (``huggingface_hub.scan_cache_dir``, which knows its layout):
    the revision ``main`` points at, else the newest snapshot, walked for GGUF files and MLX
    folders. The cache's own warnings (a damaged repo folder) become notes."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.utils import CacheNotFound

    try:
        cache = scan_cache_dir(hub)
    except (CacheNotFound, OSError, ValueError) as exc:  # gone since the check; a file, not a folder
        notes.append(f"cannot read the Hugging Face cache {hub}: {getattr(exc, 'strerror', None) or exc}")
        return []
    notes += [f"Hugging Face cache: {w}" for w in cache.warnings]
    out = []
    for repo in sorted(cache.repos, key=lambda r: r.repo_id):
        if repo.repo_type != "model" or not repo.revisions:
            continue
        main = [r for r in repo.revisions if "main" in r.refs]
        revision = main[0] if main else max(repo.revisions, key=lambda r: r.last_modified)
        snapshot = str(revision.snapshot_path)
        for _source, name, fmt, path in _walk("huggingface", snapshot, notes):
            out.append(("huggingface", repo.repo_id if fmt == "mlx" and path == snapshot else f"{repo.repo_id}/{name}", fmt, path))
    return out


def _ollama(root: str, notes: list[str]) -> list[tuple[str, str, str, str]]:
    """Each manifest resolved to its weights blob, named ``name:tag`` (``ns/name:tag`` off the
    library namespace, ``registry/ns/name:tag`` off Ollama's registry)."""
    out = []
    manifests = os.path.join(root, "manifests")
    for folder, _dirs, files in os.walk(manifests, onerror=_note_unreadable(notes)):
        parts = os.path.relpath(folder, manifests).split(os.sep)
        if len(parts) != 3:
            continue
        registry, namespace, model = parts
        for tag in sorted(files):
            prefix = "" if registry == "registry.ollama.ai" else f"{registry}/"
            prefix += "" if namespace == "library" and not prefix else f"{namespace}/"
            name = f"{prefix}{model}:{tag}"
            path = os.path.join(folder, tag)
            try:
                with open(path, encoding="utf-8") as f:
                    doc = json.load(f)
                layer = next(x for x in doc.get("layers", []) if x.get("mediaType") == OLLAMA_MODEL_LAYER)
                blob = os.path.join(root, "blobs", str(layer["digest"]).replace(":", "-"))
            except (OSError, ValueError, AttributeError, KeyError, StopIteration, TypeError) as exc:
                why = "no model layer" if isinstance(exc, StopIteration) else (getattr(exc, "strerror", None) or str(exc) or type(exc).__name__)
                notes.append(f"Ollama model {name}: broken manifest {path} ({why})")
                continue
            if not os.path.isfile(blob):
                notes.append(f"Ollama model {name}: its weights blob {blob} is missing")
                continue
            out.append(("ollama", name, "gguf", blob))
    return out


# -- facts of one model, cached ---------------------------------------------------------------


class _FactCache:
    """Facts by "path|size|mtime_ns", kept in ``catalogue.json`` under the user cache folder."""

    def __init__(self) -> None:
        self.file = cache_dir() / "catalogue.json"
        try:
            doc = json.loads(self.file.read_text())
            self.known = doc["facts"] if doc.get("version") == _CACHE_VERSION else {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            self.known = {}  # a damaged cache costs one re-read
        self.dirty = False

    def facts(self, path: str, fmt: str) -> dict:
        try:
            if fmt == "gguf":
                st = os.stat(path)
                key = f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}"
            else:
                stats = [os.stat(os.path.join(path, f)) for f in sorted(os.listdir(path)) if f.endswith((".json", ".safetensors"))]
                key = f"{os.path.abspath(path)}|{sum(s.st_size for s in stats)}|{max(s.st_mtime_ns for s in stats)}"
        except OSError as exc:
            raise SpectuiError(f"cannot read {path}: {exc.strerror or exc}") from None
        if key not in self.known:
            self.known[key] = gguf_facts(path) if fmt == "gguf" else mlx_facts(path)
            self.dirty = True
        return self.known[key]

    def save(self) -> bool:
        """Merge into the file (under a lock, replaced atomically: a second spectui's facts
        stay); False when nothing was written."""
        if not self.dirty:
            return False
        try:
            storage.prepare_dir(self.file.parent)
            with storage.locked(self.file):
                storage.claim(self.file, _CACHE_KIND)
                try:
                    doc = json.loads(self.file.read_text())
                    on_disk = doc["facts"] if doc.get("version") == _CACHE_VERSION else {}
                except (OSError, ValueError, KeyError, TypeError, AttributeError):
                    on_disk = {}
                doc = {"version": _CACHE_VERSION, "facts": {**on_disk, **self.known}}
                storage.write_atomic(self.file, json.dumps(doc), _CACHE_KIND, claimed=True)
        except OSError:
            return False  # a read-only home only costs a re-read next time
        self.dirty = False
        return True


def gguf_facts(path: str) -> dict:
    info = read_gguf(path)  # SpectuiError, one line, for a file that is not GGUF
    return {
        "model_name": info.name,
        "architecture": info.architecture,
        "n_params": info.n_params,
        "quant": info.quant,
        "size_bytes": os.path.getsize(path),
        "n_ctx_train": info.n_ctx_train,
        "vocab_size": len(info.tokens),
        "vocab_sha256": info.vocab_sha256(),
        "vocab_signature": msgspec.to_builtins(VocabSignature.of(VocabFacts.from_gguf(info.metadata))),
    }


def mlx_facts(path: str) -> dict:
    """config.json, the safetensors headers (shapes only) and tokenizer.json of a directory."""
    from spectui.models.tokenizer import TextTokenizer

    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        weights = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
        shapes: dict[str, list[int]] = {}
        for w in weights:
            shapes.update(_safetensors_shapes(os.path.join(path, w)))
        size = sum(os.path.getsize(os.path.join(path, w)) for w in weights)
    except (OSError, ValueError, struct.error) as exc:
        raise SpectuiError(f"unreadable MLX model directory {path}: {getattr(exc, 'strerror', None) or exc}") from None
    q = config.get("quantization") if isinstance(config.get("quantization"), dict) else None
    bits = int(q.get("bits", 0)) if q else 0  # the usual width; layers may differ (read from shapes)
    n_params = 0
    group = int(q.get("group_size", 0)) if q else 0
    for name, shape in shapes.items():
        if name.endswith((".scales", ".biases")):
            continue
        scales = shapes.get(name[: -len("weight")] + "scales") if name.endswith(".weight") else None
        if scales and group:  # packed: each row holds scales-columns x group_size values, whatever the bits
            n_params += _count(shape[:-1]) * scales[-1] * group
        else:
            n_params += _count(shape)
    vocab_sha, vocab_size, signature = "", 0, None
    try:
        tok = TextTokenizer.from_dir(path, config)
        vocab_sha, vocab_size = tok.vocab_sha256(), tok.n_vocab
        signature = msgspec.to_builtins(VocabSignature.of(VocabFacts.from_tokenizer(tok)))
    except Exception as exc:  # noqa: BLE001 - any tokenizer failure: listed, but pairs with nothing
        if not isinstance(exc, SpectuiError):
            raise SpectuiError(f"unreadable tokenizer.json in {path}: {exc}") from None
    src = config.get("spectui", {}) if isinstance(config.get("spectui"), dict) else {}
    return {
        "model_name": str(src.get("gguf_name") or config.get("_name_or_path") or os.path.basename(path.rstrip(os.sep))),
        "architecture": str(config.get("model_type", "")),
        "n_params": n_params,
        "quant": f"mlx {bits}-bit g{q.get('group_size', '?')}" if q else str(config.get("torch_dtype") or "unquantized"),
        "size_bytes": size,
        "n_ctx_train": int(config.get("max_position_embeddings") or 0),
        "vocab_size": vocab_size,
        "vocab_sha256": vocab_sha,
        "vocab_signature": signature,
    }


def _safetensors_shapes(path: str) -> dict[str, list[int]]:
    """Every tensor's shape, from the header alone (8-byte length + JSON)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if n > 100 << 20:
            raise ValueError(f"implausible safetensors header length {n}")
        header = json.loads(f.read(n))
    return {name: list(t["shape"]) for name, t in header.items() if name != "__metadata__"}


def _count(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


# -- names for --target / --draft -------------------------------------------------------------


def resolve_catalogue_name(spec: str, *, folders: Sequence[str] = ()) -> str:
    """A --target / --draft value as a path: a catalogue name becomes its file or directory;
    anything else (a path, a registered drafter's name, the embedded model's name, a name nothing
    matches) is returned as given, for the loaders to take or refuse."""
    if spec in ("", DEFAULT_MODEL) or os.path.exists(os.path.expanduser(spec)):
        return spec
    entry = discover(folders).find(spec)
    return entry.path if entry is not None else spec
