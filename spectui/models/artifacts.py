"""Frozen artifacts of a run: model fingerprints, runtime versions, host facts.

A sha256 of a 20 GB model takes minutes, so fingerprints are cached by (path, size, mtime)
in the user cache directory: a model is hashed once until the file changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import psutil

from spectui.models.gguf import GGUFInfo
from spectui.paths import cache_dir
from spectui.recording.schema import HostInfo, ModelArtifacts


def file_sha256(path: str, *, cache: Path | None = None) -> str:
    """sha256 of a file, remembered by (absolute path, size, mtime)."""
    st = os.stat(path)
    key = f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}"
    cache_file = (cache or cache_dir()) / "fingerprints.json"
    try:
        known = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        return known[key]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    digest = h.hexdigest()
    known[key] = digest
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known))
        os.replace(tmp, cache_file)  # atomic: concurrent runs never see half a file
    except OSError:
        pass  # a read-only home only costs a re-hash next time
    return digest


def model_artifacts(info: GGUFInfo) -> ModelArtifacts:
    return ModelArtifacts(
        path=os.path.abspath(info.path),
        name=info.name,
        sha256=file_sha256(info.path),
        size_bytes=os.path.getsize(info.path),
        architecture=info.architecture,
        quant=info.quant,
        n_params=info.n_params,
        n_ctx_train=info.n_ctx_train,
        vocab_size=len(info.tokens),
        vocab_sha256=info.vocab_sha256(),
        chat_template_sha256=info.chat_template_sha256(),
    )


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return ""


@lru_cache(maxsize=1)
def host_info() -> HostInfo:
    return HostInfo(
        os=f"{platform.system()} {platform.release()}",
        machine=platform.machine(),
        cpu=_cpu_name(),
        cpu_count=os.cpu_count() or 0,
        gpu=_gpu_name(),
        total_memory_bytes=psutil.virtual_memory().total,
        python=sys.version.split()[0],
    )


def _cpu_name() -> str:
    if sys.platform == "darwin":
        return _run(["sysctl", "-n", "machdep.cpu.brand_string"])
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _gpu_name() -> str:
    if sys.platform == "darwin" and platform.machine() == "arm64":
        return _cpu_name() + " (Metal, unified memory)"
    return _run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"]).replace("\n", "; ")


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
