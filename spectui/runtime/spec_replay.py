"""How llama-server's own drafters would draft over token streams already known, without a model.

Under greedy decoding every speculative setting writes the target's own tokens, so one AR run of
a workload fixes the text every setting of it produces, and an n-gram drafter's proposal at each
step depends on that text alone. ``native/spec_replay.cpp`` drives llama.cpp's drafters (the
``common/speculative.cpp`` that llama-server links) over such streams as llama-server's slot loop
calls them, and counts each request's target passes and drafted and accepted tokens: what a
setting would do on a person's requests, for the whole space, in a second of CPU.

It is compiled on first use against spectui's own llama-server build (the same source and the
same ``libllama-common``, so its drafters are the server's to the line), into that build's
``bin`` beside the server, named by a hash of its source; a server spectui did not build has no
source here, and then nothing is replayed (``replay_tool`` says why). Drafters that need a model
(draft-simple, eagle3, mtp, dflash) are not replayed: they are measured by running them.

A prompt's tokens are the server's own: its ``/apply-template`` and ``/tokenize`` (a chat
request's template applied as the server applies it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from spectui import storage
from spectui.config import RunConfig
from spectui.errors import SpectuiError
from spectui.runtime.build import SERVER
from spectui.runtime.ownership import require_owned
from spectui.server.client import ServerClient, ServerError

SOURCE_NAME = "spec_replay.cpp"
TOOL_PREFIX = "spectui-spec-replay"
COMPILE_TIMEOUT_S = 300
RUN_TIMEOUT_S = 300


@dataclass(frozen=True)
class Stream:
    """One request as the server saw it: its prompt's tokens, the output AR wrote, the asked
    ``max_tokens`` and whether the output ended on an end-of-generation token."""

    prompt: tuple[int, ...]
    output: tuple[int, ...]
    n_predict: int
    eos: bool

    def to_dict(self) -> dict[str, object]:
        return {"prompt": list(self.prompt), "output": list(self.output), "n_predict": self.n_predict, "eos": self.eos}


@dataclass(frozen=True)
class Counts:
    """What a setting does over one request: target passes after the prompt, tokens drafted and
    accepted, and each pass's draft length (0: a plain decode)."""

    passes: int
    drafted: int
    accepted: int
    sizes: tuple[int, ...] = ()


def _source() -> bytes:
    return resources.files("spectui.runtime").joinpath("native").joinpath(SOURCE_NAME).read_bytes()


def _compiler() -> str | None:
    return next((found for name in ("c++", "g++", "clang++") if (found := shutil.which(name))), None)


def replay_tool(server_path: str) -> tuple[Path | None, str]:
    """(the replay program for the llama-server at ``server_path``, or None and why not). It is
    built only beside spectui's own build of the server, from that build's source."""
    binary = Path(server_path).resolve()
    bin_dir = binary.parent
    build = bin_dir.parent
    source = build.parent / "sdist" / "vendor" / "llama.cpp"
    if binary.name != SERVER or build.name != "build" or not (source / "common" / "speculative.h").is_file():
        return None, "the server is not spectui's own build: no llama.cpp source beside it to compile the drafters' replay from"
    if not (bin_dir / "libllama-common.so").exists() and not (bin_dir / "libllama-common.dylib").exists():
        return None, f"no libllama-common beside {binary}: rebuild it with `spectui runtime build`"
    code = _source()
    tool = bin_dir / f"{TOOL_PREFIX}-{hashlib.sha256(code).hexdigest()[:12]}"
    if tool.is_file():
        require_owned([bin_dir, tool], "the drafters' replay program", f"remove {tool}")
        return tool, ""
    compiler = _compiler()
    if compiler is None:
        return None, "no C++ compiler (c++, g++ or clang++) to build the drafters' replay"
    require_owned([build.parent, build, bin_dir, source], "the llama.cpp build the replay compiles against",
                  f"remove {build.parent} and run `spectui runtime build`")
    with storage.locked(tool):
        if tool.is_file():
            return tool, ""
        src = bin_dir / f".{TOOL_PREFIX}.cpp"
        src.write_bytes(code)
        tmp = tool.with_name(f".{tool.name}.tmp")
        include = [f"-I{source / d}" for d in ("common", "include", "ggml/include", "vendor")]
        cmd = [compiler, "-O2", "-std=c++17", str(src), *include, f"-L{bin_dir}", "-lllama-common", "-lllama", "-lggml",
               "-lggml-base", f"-Wl,-rpath,{bin_dir}", "-o", str(tmp)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"compiling the drafters' replay failed ({exc})"
        finally:
            src.unlink(missing_ok=True)
        if done.returncode != 0:
            tmp.unlink(missing_ok=True)
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            return None, f"compiling the drafters' replay failed: {last}"
        os.replace(tmp, tool)
    return tool, ""


def replay(tool: Path, configs: Sequence[Sequence[str]], streams: Sequence[Sequence[Stream]], *, n_ctx: int) -> list[list[Counts]]:
    """Each config's (llama-server's ``--spec-*`` flags) counts over every request of
    ``streams`` (one stream a client slot, stepped together as a server's batch steps its
    slots), in the streams' order."""
    doc = {"n_ctx": n_ctx, "configs": [list(c) for c in configs], "streams": [[r.to_dict() for r in s] for s in streams]}
    try:
        done = subprocess.run([str(tool)], input=json.dumps(doc), capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SpectuiError(f"the drafters' replay did not run ({exc})") from None
    try:
        out = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    except ValueError:
        out = {}
    if done.returncode != 0 or "results" not in out:
        why = out.get("error") or (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise SpectuiError(f"the drafters' replay failed: {why}")
    return [[Counts(int(r["passes"]), int(r["drafted"]), int(r["accepted"]), tuple(r["sizes"])) for r in per] for per in out["results"]]


def prompt_tokens(client: ServerClient, config: RunConfig) -> tuple[int, ...]:
    """The tokens a llama-server holds for ``config``'s prompt: a chat request's messages through
    the server's own template (``/apply-template``), then its tokenizer with special tokens added
    and parsed, as it tokenizes a request."""
    try:
        if config.chat:
            reply = client.post("/apply-template", {"messages": config.messages()})
            text = reply.json().get("prompt") if reply.ok and isinstance(reply.json(), dict) else None
            if not isinstance(text, str):
                raise SpectuiError(f"the server did not apply its chat template (HTTP {reply.status})")
        else:
            text = config.raw_text()
        reply = client.post("/tokenize", {"content": text, "add_special": True, "parse_special": True})
        tokens = reply.json().get("tokens") if reply.ok and isinstance(reply.json(), dict) else None
    except ServerError as exc:
        raise SpectuiError(f"the server did not tokenize a prompt ({exc})") from None
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        raise SpectuiError(f"the server did not tokenize a prompt (HTTP {reply.status})")
    return tuple(tokens)


