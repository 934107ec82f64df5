"""llama.cpp's own tools, built from the llama-cpp-python source package that is installed.

The peer benchmark compares spectui with the C++ programs of the very llama.cpp revision that
llama-cpp-python vendors, so both sides run the same kernels. Nothing of llama.cpp is kept in
this repository: the source package is fetched and unpacked once per version by
``spectui.runtime.build`` (the same code that builds the llama-server ``--runtime`` starts), and
the tools are built beside it, offline, in their own folder (``build-tools``: the examples are
on there, and the server's build stays as ``spectui runtime build`` made it).

Each ``run_*`` function returns what the tool itself reports, parsed from its log: decode
tok/s, and for the speculative tools the drafted and accepted counts.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from spectui.runtime.build import OFFLINE_FLAGS, build_root, source_tree
from spectui.runtime.cmake import STEP, BuildError, cmake_build

#: llama-server too, compiled whole (static) like every tool here; spectui's runtime build of
#: it (``spectui runtime build``) is its own, linked to llama-cpp-python's libraries
TOOLS = ("llama-bench", "llama-completion", "llama-lookup", "llama-speculative-simple", "llama-server")


class ToolError(RuntimeError):
    pass


def installed_version() -> str:
    from importlib.metadata import version

    return version("llama-cpp-python")


def tools_dir(version: str | None = None) -> Path:
    return build_root(version or installed_version()) / "build-tools"


def ensure_tools(bin_dir: str | None = None, *, log=print) -> Path:
    """A folder holding ``TOOLS``: ``bin_dir`` if given, else a cached build (made if missing)."""
    if bin_dir:
        folder = Path(bin_dir)
        missing = [t for t in TOOLS if not (folder / t).exists()]
        if missing:
            raise ToolError(f"{folder} lacks {', '.join(missing)}")
        return folder
    version = installed_version()
    build = tools_dir(version)
    out = build / "bin"
    if all((out / t).exists() for t in TOOLS):
        return out

    def progress(_fraction: float, text: str) -> None:
        if not text.startswith(STEP):  # phases only: a compile step per line would flood the log
            log(text)

    # the examples (llama-lookup, llama-speculative-simple) are on here; every other flag is
    # the server build's, so nothing is fetched during the build
    flags = [f for f in OFFLINE_FLAGS if not f.startswith("-DLLAMA_BUILD_EXAMPLES=")] + ["-DLLAMA_BUILD_EXAMPLES=ON"]
    try:
        source, _commit = source_tree(version, progress=progress)
        log(f"building {', '.join(TOOLS)} from llama.cpp in {build} (once; several minutes on few cores)...")
        cmake_build(source, build, TOOLS, flags, progress=progress, jobs=os.cpu_count() or 2)
    except BuildError as exc:
        raise ToolError(str(exc)) from None
    return out


# -- running the tools --------------------------------------------------------------------


@dataclass
class ToolRun:
    tok_s: float
    n_tokens: int = 0
    drafted: int = 0
    accepted: int = 0
    text: str = ""


def _run(tool: Path, args: list[str]) -> tuple[str, str]:
    proc = subprocess.run([str(tool), *args], capture_output=True, text=True, errors="replace")
    if proc.returncode:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ToolError(f"{tool.name} exited {proc.returncode}: {' | '.join(tail)}")
    return proc.stdout, proc.stderr


def _common(model: str, prompt_file: str, n: int, threads: int, n_ctx: int) -> list[str]:
    # the prompt file is the exact chat-templated text (see ``write_prompt``); no escape
    # processing, so a backslash in a code prompt stays a backslash
    return ["-m", model, "-f", prompt_file, "-n", str(n), "-t", str(threads), "-tb", str(threads), "-c", str(n_ctx),
            "--temp", "0", "--seed", "1", "--no-escape"]


def write_prompt(text: str, folder: str, name: str) -> str:
    """The prompt as a file for ``-f``, which drops one trailing newline: add it back."""
    path = os.path.join(folder, f"{name}.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    return path


def run_bench(bin_dir: Path, model: str, *, n: int, depth: int, threads: int, reps: int) -> list[float]:
    """llama-bench text generation at ``depth`` tokens of context: one tok/s per repetition."""
    out, _ = _run(bin_dir / "llama-bench", ["-m", model, "-p", "0", "-n", str(n), "-d", str(depth),
                                             "-t", str(threads), "-r", str(reps), "-o", "json"])
    rows = json.loads(out)
    return [float(x) for x in rows[0]["samples_ts"]]


_EVAL = re.compile(r"eval time =\s*([\d.]+) ms /\s*(\d+) (?:runs|tokens)")
_DECODED = re.compile(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds")
_COUNT = re.compile(r"\b(n_drafted|n_accept)\s*=\s*(\d+)")


def run_completion(bin_dir: Path, model: str, prompt_file: str, *, n: int, threads: int, n_ctx: int) -> ToolRun:
    out, err = _run(bin_dir / "llama-completion", [*_common(model, prompt_file, n, threads, n_ctx), "-no-cnv",
                                                    "--no-display-prompt"])
    evals = [m for m in _EVAL.finditer(err) if "prompt" not in err[max(0, m.start() - 12):m.start()]]
    if not evals:
        raise ToolError("llama-completion printed no eval timing")
    ms, runs = float(evals[-1].group(1)), int(evals[-1].group(2))
    return ToolRun(tok_s=runs / (ms / 1000), n_tokens=runs + 1, text=out)


def _speculative(tool: Path, args: list[str]) -> ToolRun:
    out, err = _run(tool, args)
    m = _DECODED.search(err)
    if not m:
        raise ToolError(f"{tool.name} printed no 'decoded' line")
    n, secs = int(m.group(1)), float(m.group(2))
    counts = {k: int(v) for k, v in _COUNT.findall(err)}
    # the tools count the first token (sampled from the prompt's logits) inside their decode
    # span; spectui's decode rate leaves it out: (n - 1) tokens over the span, for both
    return ToolRun(tok_s=(n - 1) / secs, n_tokens=n, drafted=counts.get("n_drafted", 0),
                   accepted=counts.get("n_accept", 0), text=out)


def run_lookup(bin_dir: Path, model: str, prompt_file: str, *, n: int, k: int, threads: int, n_ctx: int) -> ToolRun:
    return _speculative(bin_dir / "llama-lookup", [*_common(model, prompt_file, n, threads, n_ctx),
                                                   "--spec-draft-n-max", str(k)])


def run_speculative_simple(bin_dir: Path, model: str, draft: str, prompt_file: str, *, n: int, k: int, threads: int,
                           n_ctx: int) -> ToolRun:
    # p-min 0 and n-min 0: always draft K tokens, as spectui does at a fixed K
    return _speculative(bin_dir / "llama-speculative-simple", [
        *_common(model, prompt_file, n, threads, n_ctx), "-md", draft, "--spec-type", "draft-simple", "--spec-draft-n-max", str(k),
        "--spec-draft-n-min", "0", "--spec-draft-p-min", "0", "-td", str(threads)])


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


if __name__ == "__main__":  # build (or find) the tools: python benchmarks/native_tools.py
    print(ensure_tools(sys.argv[1] if len(sys.argv) > 1 else None, log=lambda m: print(m, file=sys.stderr)))
