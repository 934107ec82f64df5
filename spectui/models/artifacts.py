"""Frozen artifacts of a run: model fingerprints, runtime versions, host facts.

A sha256 of a 20 GB model takes minutes, so fingerprints are cached by (path, size, mtime)
in the user cache directory: a model is hashed once until the file changes.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import msgspec
import psutil

from spectui import subprocesses
from spectui.models.gguf import GGUFInfo
from spectui.models.json_cache import read_entries, write_entry
from spectui.recording.schema import HostInfo, ModelArtifacts

FINGERPRINTS = "fingerprints.json"


def file_sha256(path: str, *, cache: Path | None = None) -> str:
    """sha256 of a file, remembered by (absolute path, size, mtime)."""
    st = os.stat(path)
    key = f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}"
    known = read_entries(FINGERPRINTS, cache)
    hit = known.get(key)
    if isinstance(hit, str):
        return hit
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    digest = h.hexdigest()
    write_entry(FINGERPRINTS, key, digest, cache)  # not written (read-only home): a re-hash next time
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
    """This machine, as a header records it: read once a process (its CPU, GPU and memory do
    not change while it runs, and ``nvidia-smi`` is a process to start on each reading)."""
    return msgspec.structs.replace(_host_info())


@lru_cache(maxsize=1)
def _host_info() -> HostInfo:
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
        return subprocesses.run(cmd, capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
