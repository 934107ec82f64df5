"""llama-server linked to the llama.cpp libraries that the installed llama-cpp-python carries.

llama-cpp-python installs libllama, libggml* and libmtmd built from the very source spectui
builds llama-server from (its vendored llama.cpp, of one version). Compiling them again is
about half of a whole build: of a 9.6-minute static build on two cores, 4.6 minutes went to
llama.cpp's model code, ggml and mtmd. Here CMake configures llama.cpp with shared libraries,
the installed libraries are copied where its link lines expect them (``build/bin``), and only
the targets between llama-server and those libraries are compiled, each with Make's
``<target>/fast`` rule, which builds a target without building what it depends on. The runtime
then runs the embedded engine's own kernels, by construction.

Whatever does not fit (no installed libraries, a library a link line names that the package
lacks) is ``NotLinkable`` with the reason before anything compiles; ``build_server`` then
builds llama.cpp whole (static), as it does when a linked build fails or does not start.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spectui.runtime.cmake import COMPILE_START, STEP, BuildError, ProgressFn, compile_targets, configure

#: the target graph CMake writes at configure time (``--graphviz``), one file per target
GRAPH = "targets.dot"
#: this file in the build folder makes the graph show custom targets too (the web UI's assets)
_GRAPH_OPTIONS = ("CMakeGraphVizOptions.cmake", "set(GRAPHVIZ_CUSTOM_TARGETS TRUE)\n")
#: CMake's graph shapes of what a build makes: an executable, a static, shared or module
#: library, an object library, a custom target (interfaces, imported and system libraries are
#: not built)
_BUILT_SHAPES = {"egg", "octagon", "doubleoctagon", "tripleoctagon", "hexagon", "box"}
_SHARED = "doubleoctagon"
_NODE = re.compile(r'^\s*"(node\d+)"\s*\[\s*label\s*=\s*"([^"\\]*)[^"]*"\s*,\s*shape\s*=\s*(\w+)')
_EDGE = re.compile(r'^\s*"(node\d+)"\s*->\s*"(node\d+)"')
_LIBRARY_FILE = re.compile(r"^lib[\w.+-]+\.(so(\.\d+)*|(\d+\.)*dylib)$")


class NotLinkable(Exception):
    """Why this llama.cpp cannot be linked to the installed libraries (a build falls back)."""


@dataclass(frozen=True)
class LinkPlan:
    installed: tuple[str, ...]  #: the targets the installed libraries stand for ("llama", "ggml", ...)
    compile: tuple[str, ...]  #: the rest, in the order they are built (dependencies first)


def shared_flags(flags: Sequence[str]) -> list[str]:
    """``flags`` asking for shared libraries, and for Make (``<target>/fast`` is a Makefile rule)."""
    return [*(f for f in flags if not f.startswith("-DBUILD_SHARED_LIBS")), "-DBUILD_SHARED_LIBS=ON", "-G", "Unix Makefiles"]


def installed_libraries() -> Path | None:
    """The folder of llama.cpp's shared libraries that llama-cpp-python installed (its
    ``llama_cpp/lib``), found without importing it; None when there is none."""
    try:
        spec = importlib.util.find_spec("llama_cpp")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "lib"
    return folder if folder.is_dir() and any(_LIBRARY_FILE.match(p.name) for p in folder.iterdir()) else None


def read_graph(path: Path) -> tuple[dict[str, tuple[str, str]], dict[str, list[str]]]:
    """CMake's graphviz file: {node: (target name, shape)} and {node: [the nodes it depends on]}."""
    nodes: dict[str, tuple[str, str]] = {}
    edges: dict[str, list[str]] = {}
    for line in path.read_text(errors="replace").splitlines():
        m = _NODE.match(line)
        if m:
            nodes[m.group(1)] = (m.group(2), m.group(3))
            continue
        m = _EDGE.match(line)
        if m and m.group(2) not in edges.setdefault(m.group(1), []):
            edges[m.group(1)].append(m.group(2))
    return nodes, edges


def plan(graph: Path, target: str, libraries: Path) -> LinkPlan:
    """Which of ``target``'s dependencies the installed ``libraries`` stand for (a shared library
    whose ``lib<name>.`` files are there) and the order to compile the rest: dependencies
    first, nothing below an installed library (what those need is in them)."""
    if not graph.is_file():
        raise NotLinkable(f"CMake wrote no target graph for {target}")
    nodes, edges = read_graph(graph)
    root = next((n for n, (name, _shape) in nodes.items() if name == target), None)
    if root is None:
        raise NotLinkable(f"{target} is not in CMake's target graph")
    files = [p.name for p in libraries.iterdir() if _LIBRARY_FILE.match(p.name)]

    def installed(node: str) -> bool:
        name, shape = nodes[node]
        return shape == _SHARED and any(f.startswith(f"lib{name}.") for f in files)

    order: list[str] = []
    prebuilt: list[str] = []
    seen: set[str] = set()

    def visit(node: str) -> None:  # post-order: a target after what it depends on
        if node in seen:
            return
        seen.add(node)
        name, shape = nodes[node]
        if installed(node):
            prebuilt.append(name)
            return
        for dep in edges.get(node, []):
            visit(dep)
        if shape in _BUILT_SHAPES:
            order.append(name)

    visit(root)
    if not prebuilt:
        raise NotLinkable(f"none of the libraries {target} links is among the installed ones")
    return LinkPlan(installed=tuple(sorted(prebuilt)), compile=tuple(order))


def check_links(build: Path, link_plan: LinkPlan, libraries: Path) -> None:
    """Every library file in ``build/bin`` that a link line of a compiled target names is either
    made by one of them or in ``libraries`` (a package built with other settings names other
    files: better said now than after the compile)."""
    bin_dir = (build / "bin").resolve()
    for target in link_plan.compile:
        for link in build.glob(f"**/CMakeFiles/{target}.dir/link.txt"):
            workdir = link.parent.parent.parent  # link lines run in the target's own build folder
            for word in link.read_text(errors="replace").split():
                name = Path(word).name
                if not _LIBRARY_FILE.match(name) or (workdir / word).resolve().parent != bin_dir:
                    continue
                if not any(name.startswith(f"lib{t}.") for t in link_plan.compile) and not (libraries / name).exists():
                    raise NotLinkable(f"{target} links {name}, which the installed llama-cpp-python does not have")


def _objects(build: Path, targets: Sequence[str]) -> list[int]:
    """How many sources each of ``targets`` compiles (from compile_commands.json): its share of
    the progress (1 each where the file is not there)."""
    try:
        outputs = [str(c.get("output") or c.get("command", "")) for c in json.loads((build / "compile_commands.json").read_text())]
    except (OSError, ValueError, AttributeError):
        return [1] * len(targets)
    return [max(1, sum(f"CMakeFiles/{t}.dir/" in o for o in outputs)) for t in targets]


def refresh_libraries(bin_dir: Path, libraries: Path) -> list[str]:
    """Copy again every installed library whose copy beside a linked llama-server differs from
    it: llama-cpp-python reinstalled at the same version (rebuilt with other compiler flags,
    say) leaves the build record as it was, and the old copies would run instead of the
    libraries the embedded engine loads. Returns the names copied again."""
    copied = []
    for lib in sorted(libraries.iterdir()):
        if not _LIBRARY_FILE.match(lib.name) or lib.is_symlink():
            continue
        copy = bin_dir / lib.name
        if not copy.is_file() or copy.stat().st_size != lib.stat().st_size or copy.read_bytes() != lib.read_bytes():
            shutil.copy2(lib, copy, follow_symlinks=False)
            copied.append(lib.name)
    return copied


def build_linked(source: Path, build: Path, flags: Sequence[str], target: str, libraries: Path, *,
                 progress: ProgressFn | None = None, jobs: int | None = None) -> LinkPlan:
    """Configure ``source`` with shared libraries, copy ``libraries`` into ``build/bin`` and
    compile what ``target`` needs beyond them. ``NotLinkable`` before anything compiles when the
    plan does not fit; ``BuildError`` when a compile fails."""
    say = progress or (lambda _f, _t: None)
    build.mkdir(parents=True, exist_ok=True)
    (build / _GRAPH_OPTIONS[0]).write_text(_GRAPH_OPTIONS[1])
    graph = build / GRAPH
    configure(source, build, [*shared_flags(flags), f"--graphviz={graph}"], progress=say)
    link_plan = plan(build / f"{GRAPH}.{target}", target, libraries)
    check_links(build, link_plan, libraries)
    bin_dir = build / "bin"
    bin_dir.mkdir(exist_ok=True)
    files = [lib for lib in libraries.iterdir() if _LIBRARY_FILE.match(lib.name)]
    for lib in files:  # all of them: a backend ggml loads at run time is found beside the binary
        shutil.copy2(lib, bin_dir / lib.name, follow_symlinks=False)
    linked = sorted({lib.name.split(".", 1)[0] for lib in files})
    say(COMPILE_START, f"linking the installed llama-cpp-python's {', '.join(linked)}; compiling {', '.join(link_plan.compile)}")
    weights = _objects(build, link_plan.compile)
    total, done = sum(weights), 0
    for i, (name, weight) in enumerate(zip(link_plan.compile, weights)):
        lo = COMPILE_START + (1 - COMPILE_START) * done / total
        hi = COMPILE_START + (1 - COMPILE_START) * (done + weight) / total
        say(lo, f"{STEP}{name}")
        compile_targets(build, [f"{name}/fast"], progress=say, jobs=jobs, span=(lo, hi), log_mode="w" if i == 0 else "a")
        done += weight
    if not (bin_dir / target).is_file():
        raise BuildError(f"the linked build ended without {bin_dir / target}; see {build / 'build.log'}")
    return link_plan
